""".ci/check_wheel.py's wheel-content check, on synthetic wheels (the build itself is a step of .ci/run)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_wheel", ROOT / ".ci" / "check_wheel.py")
assert _spec is not None and _spec.loader is not None
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

DIST = "hypermc-1.2.3.dist-info"
TRACKED = ["hypermc/__init__.py", "hypermc/py.typed", "hypermc/data/mammal_closure.csv", "hypermc/data/breast_cancer.csv"]
TRACKED += ["hypermc/data/NOTICE.wordnet", "README.md", "tests/test_x.py"]
METADATA = "Metadata-Version: 2.4\nName: hypermc\nVersion: 1.2.3\nLicense-Expression: Apache-2.0\nRequires-Python: >=3.10\n"


def _wheel(tmp_path: Path, drop: str | None = None, extra: str | None = None, metadata: str = METADATA) -> Path:
    path = tmp_path / "hypermc-1.2.3-py3-none-any.whl"
    names = [n for n in TRACKED if n.startswith("hypermc/")] + [f"{DIST}/licenses/LICENSE", f"{DIST}/METADATA"]
    with zipfile.ZipFile(path, "w") as z:
        for name in names + ([extra] if extra else []):
            if name != drop:
                z.writestr(name, metadata if name.endswith("METADATA") else "x")
    return path


def test_a_complete_wheel_passes(tmp_path, capsys):
    check.check_contents(_wheel(tmp_path), "1.2.3", TRACKED)
    assert "metadata ok" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"drop": "hypermc/py.typed"}, "lacks package files: ['hypermc/py.typed']"),
        ({"drop": "hypermc/data/NOTICE.wordnet"}, "lacks package files: ['hypermc/data/NOTICE.wordnet']"),
        ({"drop": "hypermc/__init__.py"}, "lacks package files: ['hypermc/__init__.py']"),
        ({"drop": f"{DIST}/licenses/LICENSE"}, "lacks hypermc-1.2.3.dist-info/licenses/LICENSE"),
        ({"extra": "tests/test_x.py"}, "holds files outside hypermc/"),
        ({"metadata": METADATA.replace("Version: 1.2.3", "Version: 1.2.4")}, "METADATA lacks 'Version: 1.2.3'"),
        ({"metadata": METADATA.replace("License-Expression: Apache-2.0\n", "")}, "METADATA lacks 'License-Expression: Apache-2.0'"),
    ],
    ids=["py.typed", "NOTICE", "module", "LICENSE", "stray file", "version", "license"],
)
def test_an_incomplete_wheel_fails_naming_what_is_wrong(tmp_path, capsys, kwargs, message):
    with pytest.raises(SystemExit) as exc:
        check.check_contents(_wheel(tmp_path, **kwargs), "1.2.3", TRACKED)
    assert exc.value.code == 1
    assert message in capsys.readouterr().err
