"""How the message browser shows bytes: every input gets a form, and no form loses bytes."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from odradek.console.payload import MAX_SHOWN, hex_dump, show


def unhex(dump: str) -> bytes:
    return bytes.fromhex("".join(line[10:] for line in dump.splitlines()))


def test_null_text_json_and_hex():
    assert show(None).kind == "null"
    assert (show(b"hello\tworld\n").kind, show(b"hello\tworld\n").text) == (
        "text",
        "hello\tworld\n",
    )
    assert (
        show(b'{"a":[1,{"b":null}]}').text
        == '{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ]\n}'
    )
    assert show(b"[1, 2").kind == "text"  # looks like JSON, is not: shown as written
    assert show("naïve".encode()).text == "naïve"
    assert show(b"\xc3\x28").kind == "hex"  # invalid UTF-8
    assert show(b"a\x00b").kind == "hex"  # valid UTF-8 with a control character
    assert show(b"").kind == "text"


def test_hex_dump_has_sixteen_bytes_a_line_with_offsets():
    dump = hex_dump(bytes(range(20)))
    assert dump.splitlines() == [
        "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f",
        "00000010  10 11 12 13",
    ]


def test_a_long_value_is_cut_and_says_so():
    long_text = show(b"x" * (MAX_SHOWN + 10))
    assert (long_text.kind, long_text.size, long_text.truncated) == ("text", MAX_SHOWN + 10, True)
    assert len(long_text.text) == MAX_SHOWN
    # A cut inside a two-byte character still shows text: the half character is left out.
    cut = show(b"x" * (MAX_SHOWN - 1) + "é".encode() + b"tail")
    assert (cut.kind, cut.text) == ("text", "x" * (MAX_SHOWN - 1))
    # Long JSON is not parsed (it would not parse once cut): shown as its text.
    assert show(b"[" + b"1," * MAX_SHOWN + b"1]").kind == "text"


@given(st.binary(max_size=300))
def test_any_bytes_have_a_form_that_keeps_them(data: bytes):
    shown = show(data)
    assert shown.size == len(data) and not shown.truncated
    if shown.kind == "hex":
        assert unhex(shown.text) == data
    elif shown.kind == "json":
        assert json.loads(shown.text) == json.loads(data)
    else:
        assert shown.kind == "text" and shown.text.encode() == data


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_json_objects_and_arrays_are_pretty_printed(value):
    encoded = json.dumps(value).encode()
    shown = show(encoded)
    if isinstance(value, (list, dict)):
        assert shown.kind == "json" and json.loads(shown.text) == value
