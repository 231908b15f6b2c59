"""The one results-file writer of the benchmark and example scripts (``--write-results PATH``).

A script adds the option with :func:`add_argument` and runs its ``main`` through
:func:`run`. With ``--write-results PATH`` the script's stdout is still printed and, when
the script finishes, PATH receives a Markdown fragment: a provenance line (the command,
the git commit, the machine, the wall time and the date) followed by the Markdown tables
the script printed, or its whole output in a fence when it printed no table; lines the
script printed starting with :data:`NOTE` come after the provenance line. The docs
include these fragments (``--8<-- "results/NAME.md"``), so no table is copied by hand.

Nothing here runs at import; the library never calls it.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

OPTION = "--write-results"
MARKER = "<!-- results fragment: written by the command below (--write-results); do not edit by hand -->"
# a printed line that starts with this goes into the fragment, after the provenance line
NOTE = "results note: "
# a table recorded before the scripts wrote their own fragments: its provenance as the docs stated it
RECORDED = "<!-- results fragment: recorded run, provenance as the docs stated it; rerun the command with --write-results to replace it -->"
ROOT = Path(__file__).resolve().parents[1]
# sources whose uncommitted changes make a run differ from its commit
SOURCE_DIRS = ("hypermc", "benchmarks", "examples")


def add_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--write-results PATH`` to a script's parser (read again by :func:`run`).

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_argument(parser)
        >>> parser.parse_args(["--write-results", "docs/results/x.md"]).write_results
        PosixPath('docs/results/x.md')
    """
    parser.add_argument(
        OPTION,
        metavar="PATH",
        type=Path,
        default=None,
        help="also write the printed table(s) to PATH as a Markdown fragment with the command, "
        "git commit, machine, wall time and date (the docs include docs/results/*.md)",
    )


def run(main: Callable[[], Any], argv: list[str] | None = None) -> None:
    """Run ``main()``; with ``--write-results PATH`` in ``argv`` (default ``sys.argv``) record its output to PATH.

    The fragment is written only when ``main`` returns normally.

    Example:
        >>> run(lambda: print("| a |\\n|---|\\n| 1 |"), ["script.py"])  # no option: main() alone
        | a |
        |---|
        | 1 |
    """
    argv = list(sys.argv if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument(OPTION, type=Path, default=None)
    known, _ = pre.parse_known_args(argv[1:])
    if known.write_results is None or "-h" in argv[1:] or "--help" in argv[1:]:
        main()
        return
    path: Path = known.write_results
    if path.suffix != ".md":
        raise ValueError(f"{OPTION}: expected a Markdown file path ending in .md, got {str(path)!r}")
    captured = io.StringIO()
    stdout = sys.stdout
    sys.stdout = _Tee(stdout, captured)
    start = time.perf_counter()
    try:
        main()
    finally:
        sys.stdout = stdout
    wall = time.perf_counter() - start
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(fragment(captured.getvalue(), command(argv), wall))


class _Tee(io.TextIOBase):
    """A text stream that writes to the terminal and to a buffer."""

    def __init__(self, *streams: Any) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for stream in self.streams:
            stream.write(s)
        return len(s)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def command(argv: list[str]) -> str:
    """The command line that reproduces the run: ``python <script relative to the repo> <args>``, without the results option.

    Example:
        >>> command([str(ROOT / "benchmarks" / "bench_ops.py"), "--quick", "--write-results", "x.md"])
        'python benchmarks/bench_ops.py --quick'
    """
    script = Path(argv[0]).resolve()
    name = str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else argv[0]
    args: list[str] = []
    rest = iter(argv[1:])
    for a in rest:
        if a == OPTION:
            next(rest, None)
        elif not a.startswith(OPTION + "="):
            args.append(a)
    return shlex.join(["python", name, *args])


def commit() -> str:
    """``commit <short hash>`` of the repository (noting uncommitted source changes), or ``commit not recorded``.

    Example:
        >>> commit().startswith("commit ")
        True
    """
    git = ["git", "-C", str(ROOT)]
    try:
        head = subprocess.run([*git, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no", "--", *SOURCE_DIRS], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "commit not recorded"
    return f"commit {head}" + (" with uncommitted source changes" if dirty else "")


def machine() -> str:
    """``N-core <arch> (<CPU model>), torch <version>, <threads> thread(s), device <device>``.

    Example:
        >>> "torch " in machine()
        True
    """
    import torch  # the scripts import it anyway; kept out of module import time

    arch = {"x86_64": "x86-64", "AMD64": "x86-64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())
    model = platform.processor() or "CPU model not recorded"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    device = f"GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "CPU only (no GPU)"
    threads = torch.get_num_threads()
    return f"{os.cpu_count()}-core {arch} ({model}), torch {torch.__version__}, {threads} torch thread{'s' * (threads != 1)}, {device}"


def tables(output: str) -> list[str]:
    """The Markdown tables in ``output`` (runs of lines starting with ``|`` whose second line is a ``|---`` row).

    Example:
        >>> tables("text\\n| a |\\n|---|\\n| 1 |\\nmore")
        ['| a |\\n|---|\\n| 1 |']
    """
    found: list[str] = []
    block: list[str] = []
    for line in [*output.splitlines(), ""]:
        if line.lstrip().startswith("|"):
            block.append(line.rstrip())
            continue
        if len(block) >= 2 and block[1].replace(" ", "").startswith(("|---", "|:--")):
            found.append("\n".join(block))
        block = []
    return found


def fragment(output: str, cmd: str, wall_s: float) -> str:
    """The Markdown fragment of one run: the marker, the provenance line, the notes (the
    printed lines that start with :data:`NOTE`), then the tables (or the fenced output).

    Example:
        >>> fragment("| a |\\n|---|\\n| 1 |", "python x.py", 1.5).splitlines()[-3:]
        ['| a |', '|---|', '| 1 |']
        >>> fragment(NOTE + "cut after 1 of 2 rows\\n| a |\\n|---|\\n| 1 |", "python x.py", 1.5).splitlines()[3]
        'cut after 1 of 2 rows'
    """
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = f"`{cmd}` printed this at {commit()} on a {machine()}, wall time {wall_s:.1f} s, {date}:"
    notes = [line[len(NOTE) :].strip() for line in output.splitlines() if line.startswith(NOTE)]
    if notes:
        header += "\n\n" + " ".join(notes)
    found = tables(output)
    rest = "\n".join(line for line in output.splitlines() if not line.startswith(NOTE))
    body = "\n\n".join(found) if found else "```\n" + rest.rstrip("\n") + "\n```"
    return f"{MARKER}\n{header}\n\n{body}\n"
