"""docs/cli.md is the current ``--help`` of every subcommand (regenerate: ``python -m tests.test_cli_reference``).

The page's help blocks are compared with what argparse prints now (at a fixed width), so
an option added, renamed or given a new default without the reference changing fails here.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from hypermc.__main__ import _parser

PAGE = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
WIDTH = "100"
_BLOCK = re.compile(r"^<!-- help: (?P<name>[\w-]*) -->\n```text\n(?P<body>.*?)^```\n", re.S | re.M)


def _helps() -> dict[str, str]:
    """``{"": top-level help, "train": ..., ...}`` at ``COLUMNS=WIDTH``."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parser = _parser()
        out = {"": parser.format_help()}
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        for name, p in sub.choices.items():
            out[name] = p.format_help()
        return out
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **sub.choices}


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_cli_reference_is_current():
    """Every subcommand has a help block, and each block holds every option string and the
    option's help text with its default, as argparse expands them now. (Compared as words,
    not as a layout: argparse's layout changes between Python versions.)"""
    documented = {m["name"]: _flat(m["body"]) for m in _BLOCK.finditer(PAGE.read_text())}
    parsers = _parsers()
    assert set(documented) == set(parsers), f"docs/cli.md documents {sorted(documented)}, the CLI has {sorted(parsers)}"
    stale = []
    for name, parser in parsers.items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            words = [*action.option_strings]
            if action.help and action.help is not argparse.SUPPRESS:
                words.append(formatter._expand_help(action))
            stale += [f"{name or 'python -m hypermc'}: {w!r}" for w in words if _flat(w) not in documented[name]]
    assert not stale, "docs/cli.md is out of date (run python -m tests.test_cli_reference):\n" + "\n".join(stale)


def test_the_check_sees_a_stale_page(monkeypatch):
    parsers = _parsers()
    parsers["train"].add_argument("--brand-new-option", help="not documented")
    monkeypatch.setattr(sys.modules[__name__], "_parsers", lambda: parsers)
    try:
        test_cli_reference_is_current()
    except AssertionError as exc:
        assert "--brand-new-option" in str(exc)
    else:
        raise AssertionError("a new option was not noticed")


def _write() -> None:
    text = PAGE.read_text()
    helps = _helps()

    def repl(m: re.Match) -> str:
        return f"<!-- help: {m['name']} -->\n```text\n{helps[m['name']]}```\n"

    PAGE.write_text(_BLOCK.sub(repl, text))


if __name__ == "__main__":
    _write()
    sys.exit(0)
