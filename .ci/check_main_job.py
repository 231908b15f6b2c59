"""Run the README's main job and check that it prints the table the README shows.

Run by ``.ci/run`` from the repository root::

    python .ci/check_main_job.py            # runs the main job (minutes), compares
    python .ci/check_main_job.py --output F # compares the printed output saved in F instead

The README holds the main job's printed table, exactly the lines the job prints, between
the lines ``<!-- main-job-table:start -->`` and ``<!-- main-job-table:end -->`` (a fenced
code block around them is allowed: fence lines and blank lines at the block's ends are not
part of the table). The job's printed table is the header line that starts with
``manifold`` and the lines after it up to the first blank line. The script fails with a
unified diff when the two differ, and when the README does not show the command it runs
(:data:`COMMAND`), so that the two cannot drift apart.

The main job runs in a temporary directory (its pictures are written there) with the
interpreter running this script and this tree's hypermc first on ``PYTHONPATH``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START, END = "<!-- main-job-table:start -->", "<!-- main-job-table:end -->"
#: The main job as the README writes it (relative to the repository root).
COMMAND = "python examples/mammals.py"
#: The printed table's first line starts with this (the plain-text and the markdown layouts).
_HEADER = re.compile(r"^\|? ?manifold\b")
_FENCE = re.compile(r"^\s*(```|~~~)")


class CheckError(Exception):
    """The README block or the printed output is not what the check expects."""


def readme_table(text: str) -> list[str]:
    """The table lines between the markers of ``text`` (a README): fence lines and
    surrounding blank lines dropped, trailing whitespace kept as printed.

    Raises:
        CheckError: no block, more than one, or an empty one.
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise CheckError(f"README.md: expected one {START} ... {END} block, found {len(starts)} start and {len(ends)} end markers")
    block = [line for line in lines[starts[0] + 1 : ends[0]] if not _FENCE.match(line)]
    while block and not block[0].strip():
        block.pop(0)
    while block and not block[-1].strip():
        block.pop()
    if not block:
        raise CheckError(f"README.md: the {START} block holds no table")
    return block


def printed_table(output: str) -> list[str]:
    """The table in the main job's standard output: the line starting with ``manifold``
    (or ``| manifold``) and the lines after it up to the first blank line.

    Raises:
        CheckError: no such line, or more than one.
    """
    lines = output.splitlines()
    heads = [i for i, line in enumerate(lines) if _HEADER.match(line)]
    if len(heads) != 1:
        raise CheckError(f"the main job's output holds {len(heads)} table headers (lines starting with 'manifold'), expected 1")
    table = []
    for line in lines[heads[0] :]:
        if not line.strip():
            break
        table.append(line)
    return table


def shows_command(text: str, command: str = COMMAND) -> bool:
    """Whether ``text`` (a README) has a line ending in ``command`` (after ``$``, ``&&`` or nothing)."""
    return re.search(rf"(^|\$ |&& ){re.escape(command)}[ \t]*$", text, re.MULTILINE) is not None


def compare(expected: list[str], printed: list[str]) -> str:
    """A unified diff of the README's and the printed table ('' when they agree)."""
    diff = difflib.unified_diff(expected, printed, "README.md main-job table", "printed by " + COMMAND, lineterm="")
    return "\n".join(diff)


def run_main_job() -> str:
    """Run :data:`COMMAND` in a temporary directory; its standard output."""
    script = ROOT / COMMAND.split()[1]
    # this tree's hypermc, as `pip install -e .` would give (the same package in CI)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="hypermc-main-job-") as tmp:
        proc = subprocess.run([sys.executable, str(script)], cwd=tmp, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CheckError(f"{COMMAND} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", type=Path, help="compare this saved output of the main job instead of running it")
    args = p.parse_args(argv)
    start = time.perf_counter()
    try:
        text = README.read_text(encoding="utf-8")
        expected = readme_table(text)
        if not shows_command(text):
            raise CheckError(f"README.md does not show the main-job command {COMMAND!r} on a line of its own; update COMMAND or the README")
        output = args.output.read_text(encoding="utf-8") if args.output else run_main_job()
        diff = compare(expected, printed_table(output))
    except CheckError as e:
        print(f"check_main_job: FAILED: {e}", file=sys.stderr)
        return 1
    if diff:
        print(f"check_main_job: FAILED: the README's main-job table differs from what {COMMAND} printed:\n{diff}", file=sys.stderr)
        return 1
    print(f"check_main_job: {COMMAND} printed the README's table ({len(expected)} lines; {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
