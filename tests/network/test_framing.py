"""FrameReader: frames come out whole and unchanged however the stream is cut, big ones received in place."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.network.framing import FrameReader
from odradek.protocol.frames import InvalidFrame


def framed(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def feed(reader: FrameReader, data: bytes, cuts: list[int]) -> list[bytes]:
    """Deliver ``data`` as a transport would: each receive fills at most the buffer offered."""
    out: list[bytes] = []
    pos = 0
    cuts = [c for c in cuts if c > 0] or [len(data)]
    i = 0
    while pos < len(data):
        buf = reader.buffer()
        assert len(buf) > 0
        n = min(len(buf), cuts[i % len(cuts)], len(data) - pos)
        buf[:n] = data[pos : pos + n]
        reader.received(n)
        pos += n
        i += 1
        while reader.frames:
            out.append(bytes(reader.take()))
    return out


@settings(max_examples=200, deadline=None)
@given(
    bodies=st.lists(
        st.one_of(st.binary(max_size=50), st.binary(min_size=200, max_size=3000)), max_size=20
    ),
    cuts=st.lists(st.integers(1, 5000), min_size=1, max_size=10),
    buffer_size=st.integers(1, 2048),
)
def test_frames_survive_any_cutting(bodies: list[bytes], cuts: list[int], buffer_size: int) -> None:
    reader = FrameReader(max_frame_bytes=10_000, buffer_size=buffer_size)
    assert feed(reader, framed(bodies), cuts) == bodies
    assert not reader.partial and reader.queued_bytes == 0


def test_frames_are_read_only_and_outlive_the_next_reads() -> None:
    reader = FrameReader(max_frame_bytes=10_000, buffer_size=64)
    bodies = [bytes([i]) * 40 for i in range(10)]
    data = framed(bodies)
    kept = []
    for i in range(0, len(data), 7):
        buf = reader.buffer()
        chunk = data[i : i + 7]
        buf[: len(chunk)] = chunk
        reader.received(len(chunk))
        while reader.frames:
            kept.append(reader.take())
    assert all(f.readonly for f in kept)
    assert [bytes(f) for f in kept] == bodies  # no later receive overwrote an earlier frame


def test_a_big_frame_is_received_in_place_after_its_prefix() -> None:
    reader = FrameReader(max_frame_bytes=10**7, buffer_size=1024)
    body = bytes(range(256)) * 4000  # 1 MB
    data = framed([body])
    buf = reader.buffer()
    buf[:1024] = data[:1024]
    reader.received(1024)
    rest = reader.buffer()
    # The next receive can take the whole remainder of the frame in one call.
    assert len(rest) == len(data) - 1024
    rest[:] = data[1024:]
    reader.received(len(rest))
    assert bytes(reader.take()) == body


@pytest.mark.parametrize("prefix", [struct.pack(">i", -1), struct.pack(">i", 10_001)])
def test_bad_size_prefix_raises(prefix: bytes) -> None:
    reader = FrameReader(max_frame_bytes=10_000)
    buf = reader.buffer()
    buf[:4] = prefix
    with pytest.raises(InvalidFrame):
        reader.received(4)
