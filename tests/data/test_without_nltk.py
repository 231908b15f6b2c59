"""hypermc and its test suite without nltk: imports work, WordNet tests skip, the error says why.

nltk is hidden with ``sys.modules["nltk"] = None`` (``import nltk`` then raises
ImportError, as when it is not installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import hypermc.data

ROOT = Path(__file__).resolve().parents[2]

_HIDE = "import sys; sys.modules['nltk'] = None; "


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", _HIDE + code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_hypermc_imports_and_loads_the_bundled_closure_without_nltk():
    r = _run("import hypermc, hypermc.data, hypermc.embed, hypermc.__main__; print(hypermc.data.load_mammals().num_nodes)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1180"]


@pytest.mark.slow  # collects the whole suite: ~45 s on one core
def test_the_test_suite_collects_without_nltk_and_skips_the_wordnet_tests():
    r = _run("import pytest; sys.exit(pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', '-rs', 'tests']))")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "error" not in r.stdout.splitlines()[-1].lower()
    assert "SKIPPED [1] tests/data/test_wordnet.py" in r.stdout and "could not import 'nltk'" in r.stdout


def test_wordnet_closure_without_nltk_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nltk", None)
    with pytest.raises(ImportError, match=r"needs nltk to read WordNet \(pip install nltk\); load_mammals\(\) needs neither"):
        hypermc.data.wordnet_closure("mammal.n.01")
