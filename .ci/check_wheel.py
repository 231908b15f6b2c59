"""Build the hypermc wheel, check its contents, install it in a fresh venv, run the quickstart.

Run by ``.ci/run`` from the repository root::

    python .ci/check_wheel.py

1. Copies the source tree's files (git's tracked and untracked-but-not-ignored files) to a
   temporary directory and builds the wheel there with ``pip wheel --no-deps`` (with the
   installed setuptools where it meets pyproject.toml's requirement, else in pip's isolated
   build environment), so no stale ``build/`` directory of the checkout can leak into the wheel.
2. Checks the wheel: every file git tracks under ``hypermc/`` is in it (modules, the
   shipped csv data, the NOTICE files, ``py.typed``), nothing outside ``hypermc/`` and its
   ``.dist-info`` is, the LICENSE is in ``.dist-info/licenses``, and the metadata carries
   pyproject.toml's version and ``License-Expression: Apache-2.0``.
3. Creates a venv (``--system-site-packages``: torch and the other dependencies come from
   the running interpreter, nothing is downloaded; pip >= 22.3 installs into it with
   ``--python``), installs the wheel into it, and from a
   directory outside the source tree (no ``PYTHONPATH``) checks that ``import hypermc``
   loads the venv's copy and reports the version, loads the shipped mammal closure, and
   runs ``examples/quickstart.py`` (a copy), comparing its output with the source tree's run.

Exits non-zero with a message naming the failed check.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What is never copied when the tree is not a git checkout.
_IGNORED = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", ".venv", "venv", ".git", "runs", "*.so")


_START = time.perf_counter()


def step(message: str) -> None:
    print(f"check_wheel: [{time.perf_counter() - _START:5.0f} s] {message}", flush=True)


def fail(message: str) -> None:
    print(f"check_wheel: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        fail(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def source_files() -> list[str] | None:
    """The tree's files as git sees them (tracked + untracked, not ignored), or None without git."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


def copy_tree(dest: Path) -> list[str] | None:
    files = source_files()
    if files is None:
        shutil.copytree(ROOT, dest, ignore=_IGNORED)
        return None
    for f in files:
        target = dest / f
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, target)
    return files


def _has_build_backend() -> bool:
    """Whether the running interpreter has the setuptools that pyproject.toml's
    ``[build-system] requires`` names (``setuptools>=N``)."""
    wanted = re.search(r'requires\s*=\s*\["setuptools>=(\d+)"\]', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    try:
        major = int(metadata.version("setuptools").split(".")[0])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return wanted is not None and major >= int(wanted.group(1))


def project_version() -> str:
    sys.path.insert(0, str(ROOT))
    try:
        from hypermc._version import source_tree_version
    finally:
        sys.path.pop(0)
    version = source_tree_version(ROOT / "pyproject.toml")
    if version is None:
        fail("pyproject.toml has no [project] version")
    return version


def check_contents(wheel: Path, version: str, files: list[str] | None) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        dist_info = f"hypermc-{version}.dist-info"
        meta = z.read(f"{dist_info}/METADATA").decode()
    outside = sorted(n for n in names if not (n.startswith("hypermc/") or n.startswith(dist_info + "/")))
    if outside:
        fail(f"{wheel.name} holds files outside hypermc/ and {dist_info}/: {outside[:10]}")
    expected = {"hypermc/py.typed", "hypermc/data/mammal_closure.csv", "hypermc/data/breast_cancer.csv"}
    expected |= {f for f in (files or []) if f.startswith("hypermc/")}
    missing = sorted(expected - names)
    if missing:
        fail(f"{wheel.name} lacks package files: {missing[:20]}")
    if not any(n.startswith("hypermc/data/NOTICE") for n in names):
        fail(f"{wheel.name} lacks the data NOTICE files")
    if f"{dist_info}/licenses/LICENSE" not in names:
        fail(f"{wheel.name} lacks {dist_info}/licenses/LICENSE")
    for field in (f"Version: {version}", "License-Expression: Apache-2.0", "Requires-Python: >=3.10"):
        if not re.search(rf"^{re.escape(field)}$", meta, re.MULTILINE):
            fail(f"{wheel.name} METADATA lacks {field!r}")
    step(f"{wheel.name}: {len(names)} files, every tracked hypermc/ file, LICENSE, NOTICE, py.typed, metadata ok")


#: Run by the venv's interpreter outside the source tree: where hypermc comes from, its
#: version, the shipped data (four lines), then the quickstart (a copy in the working directory).
_PROBE = """
import runpy, sysconfig, hypermc
from hypermc.data import load_mammals
g = load_mammals()
print(hypermc.__file__)
print(hypermc.__version__)
print(g.num_nodes, g.num_edges)
print(sysconfig.get_paths()["purelib"], flush=True)
runpy.run_path("quickstart.py", run_name="__main__")
"""


def main() -> None:
    version = project_version()
    with tempfile.TemporaryDirectory(prefix="hypermc-wheel-") as tmp_name:
        tmp = Path(tmp_name)
        files = copy_tree(tmp / "src")
        isolation = []
        if _has_build_backend():
            isolation = ["--no-build-isolation"]  # the installed setuptools builds it: no download
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", *isolation, str(tmp / "src"), "-w", str(tmp / "dist")])
        wheels = sorted((tmp / "dist").glob("hypermc-*.whl"))
        if len(wheels) != 1:
            fail(f"expected one hypermc wheel in {tmp / 'dist'}, found {[w.name for w in wheels]}")
        step(f"built {wheels[0].name}")
        check_contents(wheels[0], version, files)

        venv = tmp / "venv"
        # no pip inside the venv (ensurepip is the slow part): this pip installs into it (--python)
        run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)])
        python = venv / "bin" / "python"
        if not python.exists():
            python = venv / "Scripts" / "python.exe"
        # --force-reinstall: an editable hypermc of the outer interpreter is visible through
        # --system-site-packages and would otherwise count as installed
        run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--force-reinstall", str(wheels[0])])
        step(f"installed it in a fresh venv ({venv})")

        work = tmp / "outside"
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        env["PYTHONSAFEPATH"] = "1"  # no script directory / cwd on sys.path
        shutil.copy2(ROOT / "examples" / "quickstart.py", work / "quickstart.py")
        lines = run([str(python), "-c", _PROBE], cwd=work, env=env).stdout.split("\n")
        where, reported, counts, site = lines[:4]
        installed = "\n".join(lines[4:])
        if not Path(where).resolve().is_relative_to(Path(site).resolve()):
            fail(f"the venv imported hypermc from {where}, not from its site-packages {site}")
        if reported != version:
            fail(f"installed hypermc.__version__ is {reported!r}, pyproject.toml says {version!r}")
        if counts != "1180 6540":
            fail(f"the installed package's mammal closure has {counts} nodes/edges, expected 1180 6540")
        step(f"the venv imports hypermc {reported} from {where}; the shipped mammal closure loads")

        reference = run([sys.executable, str(ROOT / "examples" / "quickstart.py")], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)}).stdout
        if not installed.strip():
            fail("the quickstart printed nothing")
        if installed != reference:
            fail(f"the quickstart printed differently from the installed wheel:\n{installed}\nsource tree:\n{reference}")
        step("the quickstart ran outside the source tree and printed what it prints in the tree")


if __name__ == "__main__":
    main()
