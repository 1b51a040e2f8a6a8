"""The generated reference pages match the code, and every config is documented."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from odradek.cli.docs import REFERENCE_DIR, REGENERATE, pages, stale_pages, valid_values
from odradek.cli.main import build_parser, main
from odradek.server.config import CONFIG_DEFS
from odradek.storage.config import LogConfig

ROOT = Path(__file__).resolve().parent.parent


def test_committed_reference_pages_match_the_code() -> None:
    stale = stale_pages(ROOT / REFERENCE_DIR)
    assert not stale, f"{', '.join(stale)} out of date: run `{REGENERATE}` and commit the result"


@pytest.mark.parametrize(
    ("name", "doc", "importance"),
    [(d.name, d.doc, d.importance) for d in CONFIG_DEFS.values()]
    + [(d.name, d.doc, d.importance) for d in LogConfig.config_defs()],
)
def test_every_config_has_a_one_line_description(name: str, doc: str, importance: str) -> None:
    assert doc.strip() and "\n" not in doc, name
    assert doc.rstrip().endswith("."), f"{name}: a description is a sentence"
    assert importance in ("high", "medium", "low"), name


def test_every_subcommand_is_in_the_cli_reference() -> None:
    cli = pages()["cli.md"]
    for command in ("serve", "cluster up", "topics create", "consume", "groups describe", "docs"):
        assert f"## `odradek {command}`" in cli


def test_check_names_stale_pages_and_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["docs", "--dir", str(tmp_path)]) == 0
    assert main(["docs", "--dir", str(tmp_path), "--check"]) == 0
    (tmp_path / "configs.md").write_text("edited by hand\n")
    capsys.readouterr()
    assert main(["docs", "--dir", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "configs.md" in err and "cli.md" not in err and REGENERATE in err


@pytest.mark.parametrize(
    ("bounds", "text"),
    [
        ({"at_least": 1}, "[1,...]"),
        ({"at_least": 0, "at_most": 1}, "[0,...,1]"),
        ({"above": 0, "at_most": 1.0}, "(0,...,1.0]"),
        ({"at_most": 22}, "[...,22]"),
        ({"choices": ("compact", "delete")}, "[compact, delete]"),
        ({}, ""),
    ],
)
def test_valid_values_are_written_as_kafkas_docs_write_them(
    bounds: dict[str, Any], text: str
) -> None:
    assert valid_values(**bounds) == text


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _parsers(sub)
    return found


def test_every_cli_option_says_what_it_does() -> None:
    """--help and the CLI reference show each option's help; none may be blank."""
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            if not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{parser.prog} {'/'.join(action.option_strings)}: no help"
