"""Reassembling size-prefixed frames from a byte stream, receiving each byte in place once.

A sans-I/O core for the listener's ``asyncio.BufferedProtocol``: the transport asks
``buffer()`` where to put the next bytes it receives (``recv_into``) and reports how
many came with ``received(n)``; complete frames come out of ``frames`` as read-only
memoryviews of the buffer they arrived in. Nothing is copied out of a buffer: a
Produce request's record batches go from the socket to the log's ``writev`` without
passing through a Python ``bytes`` object. When a frame's size prefix says it is
larger than the space left, a buffer of exactly that size is allocated and the rest
of the frame is received straight into it, so a 1 MB request costs no copy at all
beyond the bytes that arrived with its prefix.

A buffer is never reused: frames handed out may be kept (the log, a delayed
operation), so when one fills up the next bytes go to a new one and the old one
lives as long as some frame still refers to it. Read-only views also keep kio happy
(it rejects bytearray) and guarantee no handler writes into a request.
"""

from __future__ import annotations

from collections import deque

from odradek.protocol.frames import SIZE_PREFIX_LEN, frame_size

#: Size of a fresh receive buffer; small frames are received many at a time into one.
DEFAULT_BUFFER_SIZE = 64 * 1024
#: A buffer with less room than this left is replaced rather than read into a few bytes at a time.
MIN_FREE = 4 * 1024


class FrameReader:
    """Frames of one connection. ``InvalidFrame`` from ``received`` means the stream is unusable."""

    __slots__ = (
        "_buffer_size",
        "_end",
        "_max_frame_bytes",
        "_size",
        "_start",
        "_view",
        "frames",
        "queued_bytes",
    )

    def __init__(self, max_frame_bytes: int, buffer_size: int = DEFAULT_BUFFER_SIZE) -> None:
        #: Complete frame bodies (without their size prefix), oldest first.
        self.frames: deque[memoryview] = deque()
        #: Total size of ``frames`` (the listener stops reading while it is large).
        self.queued_bytes = 0
        self._max_frame_bytes = max_frame_bytes
        self._buffer_size = buffer_size
        self._view = memoryview(bytearray(buffer_size))
        self._start = 0  # first byte not yet part of a complete frame
        self._end = 0  # end of the bytes received so far
        self._size = -1  # body size of the frame being received, -1 while its prefix is incomplete

    @property
    def partial(self) -> bool:
        """Whether bytes of an incomplete frame (or size prefix) are held."""
        return self._end > self._start

    def take(self) -> memoryview:
        """The oldest complete frame (IndexError when there is none)."""
        frame = self.frames.popleft()
        self.queued_bytes -= len(frame)
        return frame

    def buffer(self) -> memoryview:
        """Where the next received bytes go (at most its length of them)."""
        held = self._end - self._start
        missing = (SIZE_PREFIX_LEN if self._size < 0 else SIZE_PREFIX_LEN + self._size) - held
        free = len(self._view) - self._end
        if free < missing or (free < MIN_FREE and held < MIN_FREE):
            # Room for the whole frame being received, at least a normal buffer's worth; what is
            # held is copied, which is little: a size prefix and the start of a frame, or a frame
            # that would not fit (its new buffer then receives the rest of it in place).
            capacity = max(self._buffer_size, held + missing)
            view = memoryview(bytearray(capacity))
            view[:held] = self._view[self._start : self._end]
            self._view, self._start, self._end = view, 0, held
        return self._view[self._end :]

    def received(self, n: int) -> None:
        """``n`` bytes were written at the start of the last ``buffer()``; queue the frames they complete."""
        self._end += n
        view, start, end, size = self._view, self._start, self._end, self._size
        while True:
            if size < 0:
                if end - start < SIZE_PREFIX_LEN:
                    break
                size = frame_size(view[start : start + SIZE_PREFIX_LEN], self._max_frame_bytes)
            if end - start - SIZE_PREFIX_LEN < size:
                break
            body = start + SIZE_PREFIX_LEN
            self.frames.append(view[body : body + size].toreadonly())
            self.queued_bytes += size
            start, size = body + size, -1
        self._start, self._size = start, size
