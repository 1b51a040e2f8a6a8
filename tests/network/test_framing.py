"""FrameReader: frames come out whole and unchanged however the stream is cut, big ones received in place,
and the memory a frame takes follows the bytes that arrived, not the size its prefix declares."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.network import framing
from odradek.network.framing import EAGER_FRAME_BYTES, FrameReader
from odradek.protocol.frames import InvalidFrame


def framed(bodies: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + b for b in bodies)


def feed(
    reader: FrameReader, data: bytes, cuts: list[int], limits: list[int] | None = None
) -> list[bytes]:
    """Deliver ``data`` as a transport would: each receive fills at most the buffer offered.

    ``limits`` are the successive ``limit`` arguments of ``buffer`` (0: none), cycled.
    """
    out: list[bytes] = []
    pos = 0
    cuts = [c for c in cuts if c > 0] or [len(data)]
    limits = limits or [0]
    i = 0
    while pos < len(data):
        limit = limits[i % len(limits)]
        buf = reader.buffer(limit)
        assert 0 < len(buf) <= (limit or len(buf))
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
    eager=st.integers(1, 4000),
    limits=st.lists(st.sampled_from([0, 0, 1, 7, 4096]), min_size=1, max_size=5),
)
def test_frames_survive_any_cutting(
    bodies: list[bytes], cuts: list[int], buffer_size: int, eager: int, limits: list[int]
) -> None:
    """Whatever mix of shared, whole and growing buffers and of short reads: the same frames,
    and every byte charged exactly once (nothing charged ahead is left over)."""
    reader = FrameReader(max_frame_bytes=10_000, buffer_size=buffer_size)
    data = framed(bodies)
    with mock.patch.object(framing, "EAGER_FRAME_BYTES", eager):
        assert feed(reader, data, cuts, limits) == bodies
    assert not reader.partial and reader.queued_bytes == 0
    assert reader.charged == len(data)


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


def vm_rss() -> int:
    """This process's resident memory in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_a_huge_frame_takes_memory_as_its_bytes_arrive() -> None:
    declared = 64 * 1024 * 1024
    reader = FrameReader(max_frame_bytes=declared, buffer_size=1024)
    chunk = b"x" * (256 * 1024)
    buf = reader.buffer()
    buf[:4] = struct.pack(">i", declared)
    reader.received(4)
    before = vm_rss()
    for _ in range(4):  # 1 MiB of the 64 MiB declared
        buf = reader.buffer()
        buf[: len(chunk)] = chunk
        reader.received(len(chunk))
    assert reader.charged == 4 + 4 * len(chunk)
    assert vm_rss() - before < 16 * 1024 * 1024
    assert reader.partial and not reader.frames
    # The rest still arrives in place: one offered buffer takes the remainder whole.
    rest = reader.buffer()
    assert len(rest) == declared - 4 * len(chunk)
    rest[:] = b"y" * len(rest)
    reader.received(len(rest))
    frame = reader.take()
    assert frame.readonly and len(frame) == declared
    assert isinstance(frame.obj, mmap.mmap)
    assert bytes(frame[: 4 * len(chunk)]) == chunk * 4 and frame[-1] == ord("y")
    assert reader.charged == 4 + declared


def test_a_mid_sized_frame_gets_its_whole_buffer_and_is_charged_for_it_at_once() -> None:
    size = EAGER_FRAME_BYTES // 2
    reader = FrameReader(max_frame_bytes=EAGER_FRAME_BYTES, buffer_size=1024)
    buf = reader.buffer()
    buf[:8] = struct.pack(">i", size) + b"abcd"
    reader.received(8)
    rest = reader.buffer()
    assert len(rest) == size - 4
    assert reader.charged == 4 + size  # taken whole, as Kafka's pool charges a request's buffer
    rest[:] = b"z" * len(rest)
    reader.received(len(rest))
    assert bytes(reader.take()) == b"abcd" + b"z" * (size - 4)
    assert reader.charged == 4 + size


def test_a_limited_buffer_gives_a_frame_no_buffer_of_its_own() -> None:
    reader = FrameReader(max_frame_bytes=10**7, buffer_size=1024)
    buf = reader.buffer(4096)
    assert len(buf) == 1024  # the shared buffer, however much was allowed
    buf[:4] = struct.pack(">i", 10**6)
    reader.received(4)
    assert len(reader.buffer(100)) == 100
    assert reader.charged == 4
