"""The pure parts of the client tools: argument and line parsing."""

from pathlib import Path

import pytest

from odradek.cli.client_options import read_properties
from odradek.cli.configs import parse_config_list
from odradek.cli.produce import LineReader


def test_config_list_with_brackets() -> None:
    assert parse_config_list("retention.ms=1000,cleanup.policy=[compact,delete]") == {
        "retention.ms": "1000",
        "cleanup.policy": "compact,delete",
    }
    assert parse_config_list("") == {}
    with pytest.raises(ValueError):
        parse_config_list("retention.ms")


def test_line_reader_without_key() -> None:
    assert LineReader({}, None).parse("a\tb") == (None, b"a\tb")


def test_line_reader_key_separator_and_null_marker() -> None:
    reader = LineReader({"null.marker": "NULL"}, ":")
    assert reader.parse("k:v:w") == (b"k", b"v:w")
    assert reader.parse("NULL:x") == (None, b"x")
    assert reader.parse(":") == (b"", b"")
    with pytest.raises(ValueError):
        reader.parse("no separator")


def test_line_reader_properties() -> None:
    reader = LineReader({"parse.key": "true", "key.separator": "|"}, None)
    assert reader.parse("a|b") == (b"a", b"b")


def test_read_properties(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text("# comment\n! other\nsecurity.protocol=PLAINTEXT\n\nclient.id = tool\nx=a=b\n")
    assert read_properties(path) == {
        "security.protocol": "PLAINTEXT",
        "client.id": "tool",
        "x": "a=b",
    }
