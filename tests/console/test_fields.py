"""The values users type, sans-I/O: numbers within Kafka's integer types, times, name=value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.console.errors import ConsoleError
from odradek.console.fields import parse_pairs, parse_timestamp, whole_number


@given(st.integers(-(2**70), 2**70), st.sampled_from([16, 32, 64]))
def test_a_number_is_taken_exactly_when_its_kafka_type_holds_it(value, bits):
    fits = -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
    try:
        assert whole_number(f" {value} ", "n", bits=bits) == value
    except ConsoleError as exc:
        assert not fits
        assert exc.status == 400 and exc.message.startswith(f"n {value} is out of range")
    else:
        assert fits


def test_blank_is_the_default_and_words_are_refused():
    assert whole_number("  ", "n", 7) == 7
    assert whole_number(None, "n") is None
    with pytest.raises(ConsoleError, match="n must be a whole number, not 'x1'"):
        whole_number("x1", "n")


def test_timestamps():
    assert parse_timestamp("1008000") == 1_008_000
    assert parse_timestamp("1970-01-01T00:16:48") == 1_008_000
    assert parse_timestamp("1970-01-01T01:16:48+01:00") == 1_008_000
    for bad, reason in [
        ("-5", "before 1970"),
        ("1960-01-01T00:00:00", "before 1970"),
        ("99999999999999999999", "out of range"),
        ("yesterday", "neither milliseconds nor an ISO 8601 time"),
    ]:
        with pytest.raises(ConsoleError, match=reason):
            parse_timestamp(bad)


def test_pairs():
    assert parse_pairs("a=1\n\n b = x=y \n", "configs") == [("a", "1"), ("b", "x=y")]
    with pytest.raises(ConsoleError, match="headers: expected name=value, got '=v'"):
        parse_pairs("=v", "headers")
