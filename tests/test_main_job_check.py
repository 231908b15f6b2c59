""".ci/check_main_job.py: the README's main-job table block and the job's printed table.

The check itself (running the main job, minutes) is a step of ``.ci/run``; these tests
cover its parsing and comparison, the README's block, and that a short run of the main
job prints a table the check reads.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import runpy
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("check_main_job", ROOT / ".ci" / "check_main_job.py")
assert _spec is not None and _spec.loader is not None
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

TABLE = [
    "manifold   dim dtype       nc               MAP                MR",
    "halfspace    2 float64      -            0.9556             1.176",
    "halfspace    2 float64      2            0.9550             1.185",
]


def _readme(*body: str) -> str:
    return "\n".join(["# x", "", "python examples/mammals.py", "", *body, "", "## next"]) + "\n"


def test_readme_block_in_a_fence():
    text = _readme(check.START, "```text", *TABLE, "```", check.END)
    assert check.readme_table(text) == TABLE


def test_readme_block_without_fence_and_with_blank_edges():
    text = _readme(check.START, "", *TABLE, "", check.END)
    assert check.readme_table(text) == TABLE


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ((), "found 0 start and 0 end markers"),
        ((check.START, *TABLE), "found 1 start and 0 end markers"),
        ((check.END, *TABLE, check.START), "found 1 start and 1 end markers"),
        ((check.START, *TABLE, check.END, check.START, *TABLE, check.END), "found 2 start and 2 end markers"),
        ((check.START, "```", "```", check.END), "holds no table"),
    ],
    ids=["none", "no end", "reversed", "two blocks", "empty"],
)
def test_readme_block_errors(body, match):
    with pytest.raises(check.CheckError, match=match):
        check.readme_table(_readme(*body))


def test_printed_table_stops_at_the_blank_line():
    out = "mammals: 1180 nodes\n  plain64 seed 0: MAP 0.9556\n\n" + "\n".join(TABLE) + "\n\nwall time 95 s\nwrote mammals.png\n"
    assert check.printed_table(out) == TABLE
    assert check.printed_table("\n".join(TABLE)) == TABLE  # at the end of the output


@pytest.mark.parametrize("out", ["mammals: 1180 nodes\nno table\n", "\n".join(TABLE + [""] + TABLE)], ids=["none", "two"])
def test_printed_table_errors(out):
    with pytest.raises(check.CheckError, match="table headers"):
        check.printed_table(out)


def test_compare_gives_a_diff_naming_the_changed_row():
    printed = [*TABLE[:2], TABLE[2].replace("0.9550", "0.9551")]
    diff = check.compare(TABLE, printed)
    assert "-halfspace    2 float64      2            0.9550" in diff
    assert "+halfspace    2 float64      2            0.9551" in diff
    assert check.compare(TABLE, list(TABLE)) == ""


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("```bash\npython examples/mammals.py\n```", True),
        ("pip install -e . && python examples/mammals.py", True),
        ("$ python examples/mammals.py  ", True),
        ("python examples/mammals.py --epochs 1000", False),
        ("see `python examples/mammals.py`.", False),
    ],
)
def test_shows_command(text, shown):
    assert check.shows_command(text) is shown


def test_main_reports_a_difference(tmp_path, monkeypatch, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(_readme(check.START, "```", *TABLE, "```", check.END), encoding="utf-8")
    monkeypatch.setattr(check, "README", readme)
    out = tmp_path / "out.txt"
    out.write_text("\n".join([*TABLE[:2], TABLE[2].replace("1.185", "1.186")]) + "\n", encoding="utf-8")
    assert check.main(["--output", str(out)]) == 1
    assert "+halfspace    2 float64      2            0.9550             1.186" in capsys.readouterr().err
    out.write_text("header\n\n" + "\n".join(TABLE) + "\n", encoding="utf-8")
    assert check.main(["--output", str(out)]) == 0


def test_the_readme_holds_the_block():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = check.readme_table(text)
    assert check.shows_command(text)
    assert check.printed_table("\n".join(table)) == table  # a header line the check finds, no blank line inside
    assert all(line == line.rstrip() for line in table), "trailing whitespace in the README block"


def test_a_short_main_job_prints_a_table_the_check_reads(tmp_path, monkeypatch):
    # the layout only (2 epochs): the digits are checked by .ci/run's full run
    monkeypatch.chdir(tmp_path)
    script = ROOT / "examples" / "mammals.py"
    monkeypatch.setattr(
        sys, "argv", [str(script), "--epochs", "2", "--rows", "plain64", "2", "--plot", "", "--curve", "", "--quiet", "--threads", "0"]
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__main__")
    table = check.printed_table(out.getvalue())
    readme = check.readme_table((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(table) == 3 and table[0] == readme[0]
    assert [line.split()[:4] for line in table[1:]] == [["halfspace", "2", "float64", "-"], ["halfspace", "2", "float64", "2"]]
    assert all(line == line.rstrip() for line in table)
