"""The live tail's sans-I/O parts: positions as event ids, and the events themselves."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.console.errors import ConsoleError
from odradek.console.live import event, format_positions, parse_positions


@given(st.dictionaries(st.integers(0, 10**5), st.integers(0, 2**63 - 1)))
def test_positions_survive_a_round_trip(positions):
    assert parse_positions(format_positions(positions)) == positions


def test_positions_text():
    assert parse_positions("") == {}
    assert parse_positions(" 1:20 , 0:15,") == {0: 15, 1: 20}
    assert format_positions({1: 20, 0: 15}) == "0:15,1:20"


@pytest.mark.parametrize("text", ["0-5", "a:1", "1:", "1:x", "0:-1"])
def test_bad_positions_are_a_400(text):
    with pytest.raises(ConsoleError) as raised:
        parse_positions(text)
    assert raised.value.status == 400


@given(st.recursive(st.none() | st.text() | st.integers(), lambda c: st.lists(c, max_size=3)))
def test_an_event_is_one_data_line_whatever_the_text(data):
    raw = event(data, "notice", "0:1").decode()
    assert raw.endswith("\n\n")
    lines = raw[:-2].split("\n")
    assert lines[:2] == ["event: notice", "id: 0:1"]
    assert len(lines) == 3 and lines[2].startswith("data: ")
    assert json.loads(lines[2][len("data: ") :]) == data
