"""Reassembling size-prefixed frames from a byte stream, receiving each byte in place once.

A sans-I/O core for the listener's ``asyncio.BufferedProtocol``: the transport asks
``buffer()`` where to put the next bytes it receives (``recv_into``) and reports how
many came with ``received(n)``; complete frames come out of ``frames`` as read-only
memoryviews of the buffer they arrived in. Nothing is copied out of a buffer: a
Produce request's record batches go from the socket to the log's ``writev`` without
passing through a Python ``bytes`` object.

Memory follows the bytes that arrive, not the size a prefix declares. Small frames
are received many at a time into a shared buffer of ``buffer_size``. A frame too
big for that gets a buffer of its own once its prefix is known, and the rest of it
is received straight into that buffer:

- up to ``EAGER_FRAME_BYTES`` (a normal Produce: ``message.max.bytes`` is 1 MiB by
  default) the buffer is a ``bytearray`` allocated whole, and its whole size is
  charged at once (``charged``), as Kafka's pool charges a request's buffer;
- above that it is an anonymous private memory mapping of the frame's size, whose
  pages the kernel provides only as bytes are written into them, so the memory
  held grows with the bytes received and only they are charged. A client that
  declares 100 MB and sends 5 MB costs 5 MB; no copy is made as the frame grows.

``charged`` counts every byte of request memory this reader has taken, for the
listener to hold against ``queued.max.request.bytes`` (``memory_pool``).

A buffer is never reused: frames handed out may be kept (the log, a delayed
operation), so when one fills up the next bytes go to a new one and the old one
lives as long as some frame still refers to it. Read-only views also keep kio happy
(it rejects bytearray) and guarantee no handler writes into a request.
"""

from __future__ import annotations

import mmap
from collections import deque

from odradek.protocol.frames import SIZE_PREFIX_LEN, frame_size

#: Size of a fresh receive buffer; small frames are received many at a time into one.
DEFAULT_BUFFER_SIZE = 64 * 1024
#: A buffer with less room than this left is replaced rather than read into a few bytes at a time.
MIN_FREE = 4 * 1024
#: Frames up to this size get a whole buffer at once; larger ones a mapping filled as bytes arrive.
#: Twice the default message.max.bytes, so a Produce of one full batch stays on the eager path.
EAGER_FRAME_BYTES = 2 * 1024 * 1024
#: Flags of a large frame's mapping: private anonymous memory, zero pages until written.
_MAP_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS


class FrameReader:
    """Frames of one connection. ``InvalidFrame`` from ``received`` means the stream is unusable."""

    __slots__ = (
        "_buffer_size",
        "_charged_end",
        "_end",
        "_max_frame_bytes",
        "_size",
        "_start",
        "_view",
        "charged",
        "frames",
        "queued_bytes",
    )

    def __init__(self, max_frame_bytes: int, buffer_size: int = DEFAULT_BUFFER_SIZE) -> None:
        #: Complete frame bodies (without their size prefix), oldest first.
        self.frames: deque[memoryview] = deque()
        #: Total size of ``frames`` (the listener stops reading while it is large).
        self.queued_bytes = 0
        #: Bytes of request memory taken so far (received, or allocated ahead for a frame); only grows.
        self.charged = 0
        self._max_frame_bytes = max_frame_bytes
        self._buffer_size = buffer_size
        self._view = memoryview(bytearray(buffer_size))
        self._start = 0  # first byte not yet part of a complete frame
        self._end = 0  # end of the bytes received so far
        self._charged_end = 0  # the bytes of the buffer before this are charged
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

    def buffer(self, limit: int = 0) -> memoryview:
        """Where the next received bytes go (at most its length of them).

        ``limit`` > 0 asks for at most that many bytes and no buffer of a frame's own:
        the listener reads only a little while request memory is short.
        """
        held = self._end - self._start
        missing = (SIZE_PREFIX_LEN if self._size < 0 else SIZE_PREFIX_LEN + self._size) - held
        free = len(self._view) - self._end
        if limit:
            if free == 0:
                self._replace(max(self._buffer_size, held + limit), held, lazy=False)
            return self._view[self._end : self._end + limit]
        if free < missing or (free < MIN_FREE and held < MIN_FREE):
            # Room for the whole frame being received, at least a normal buffer's worth; what is
            # held is copied, which is little: a size prefix and the start of a frame, or a frame
            # that would not fit (its new buffer then receives the rest of it in place).
            need = held + missing
            own = self._size >= 0 and need > self._buffer_size  # the frame gets a buffer of its own
            self._replace(max(self._buffer_size, need), held, lazy=own and need > EAGER_FRAME_BYTES)
            if own and need <= EAGER_FRAME_BYTES:
                self.charged += need - self._charged_end  # that buffer is taken whole, now
                self._charged_end = need
        return self._view[self._end :]

    def _replace(self, capacity: int, held: int, lazy: bool) -> None:
        """Move the ``held`` bytes of the incomplete frame to a new buffer of ``capacity``.

        What was charged ahead for the frame stays charged: it moves along with the frame.
        """
        ahead = max(self._charged_end - self._end, 0)
        if lazy:
            view = memoryview(mmap.mmap(-1, capacity, flags=_MAP_FLAGS))
        else:
            view = memoryview(bytearray(capacity))
        view[:held] = self._view[self._start : self._end]
        self._view, self._start, self._end, self._charged_end = view, 0, held, held + ahead

    def received(self, n: int) -> None:
        """``n`` bytes were written at the start of the last ``buffer()``; queue the frames they complete."""
        end = self._end = self._end + n
        if end > self._charged_end:
            self.charged += end - self._charged_end
            self._charged_end = end
        view, start, size = self._view, self._start, self._size
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
