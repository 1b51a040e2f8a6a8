"""The metrics HTTP listener: GET /metrics on the broker's own event loop.

Why not prometheus_client's ``start_http_server``: its thread would call the
collectors from outside the event loop, while the loop changes the partitions,
logs and groups they read (a dict changing size during a walk, offsets read
halfway through an append). Here a scrape reads the broker's state on the loop,
where it lives, copying numbers into tuples, and then builds the families and
formats the text in a worker thread: the loop is held only for the copy. With
10,000 partitions (a 2.6 MB answer; measured on the 2-core development machine at
load average 9) the copy held the loop 0.02-0.045 s, where building the families on
the loop had held it 0.13-0.54 s; building and formatting took 0.2-0.9 s in the
thread, which still takes turns with the loop at the GIL.
``odradek_metrics_last_scrape_*_seconds`` report both parts with every scrape.

The protocol is the small part of HTTP/1.1 a scraper uses: GET or HEAD, a
``Content-Length`` body, keep-alive unless the client says ``Connection: close``
(Prometheus keeps its connection). The format follows the ``Accept`` header as
prometheus_client's own server does (``choose_encoder``): OpenMetrics when
asked for ``application/openmetrics-text``, Prometheus text 0.0.4 otherwise.
Anything else is answered 404 or 405 and a malformed request closes the
connection; the broker is never affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

#: The longest request head accepted; a scraper's is a few hundred bytes.
MAX_HEAD_BYTES = 16 * 1024
#: How long an idle keep-alive connection (or a slow request head) may stay.
IDLE_TIMEOUT_S = 60.0
PATH = "/metrics"


class _Snapshot:
    """Families already collected, in the shape the encoders want (a registry's ``collect``)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


class MetricsHttpServer:
    """Serves ``collect()``'s families at /metrics on ``host:port``."""

    def __init__(
        self, host: str, port: int, read: Callable[[], Callable[[], Iterable[Metric]]]
    ) -> None:
        """``read()`` runs on the event loop and returns what builds the families in a thread."""
        self.host = host
        self.port = port
        self._read = read
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task] = set()
        #: Seconds the last scrape held the event loop reading, and then spent building and
        #: formatting in a thread: what a scrape costs the broker, reported with the next one.
        self.last_collect_s = 0.0
        self.last_format_s = 0.0

    async def start(self) -> tuple[str, int]:
        """Bind and serve; the (host, port) bound (port 0 picks a free one)."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self.port)
        except OSError as e:
            address = f"{self.host}:{self.port}"
            raise OSError(
                e.errno,
                f"cannot listen on {address} (metrics.http.listener): {e.strerror}",
                address,
            ) from e
        self.port = self._server.sockets[0].getsockname()[1]
        return self.host, self.port

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while await self._answer(reader, writer):
                pass
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except (ConnectionError, ValueError) as e:
            log.debug("metrics connection closed: %s", e)
        except Exception:
            log.exception("metrics scrape failed")
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; whether the connection stays open for another."""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
        if len(head) > MAX_HEAD_BYTES:
            raise ValueError("request head too long")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1 request line: {lines[0][:80]!r}")
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        keep_alive = (
            headers.get("connection", "").lower() != "close"
            if version == "HTTP/1.1"
            else headers.get("connection", "").lower() == "keep-alive"
        )
        if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
            # A body is never read: answer, and close rather than parse what follows.
            status, content_type, body = "400 Bad Request", "text/plain", b"no body expected\n"
            keep_alive = False
        elif target.partition("?")[0] != PATH:
            status, content_type, body = "404 Not Found", "text/plain", b"try /metrics\n"
        elif method not in ("GET", "HEAD"):
            status, content_type, body = "405 Method Not Allowed", "text/plain", b"GET only\n"
        else:
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            started = time.perf_counter()
            build = self._read()  # on the loop: the broker's state holds still
            collected = time.perf_counter()
            body = await asyncio.to_thread(lambda: encoder(_Snapshot(list(build()))))
            self.last_collect_s = collected - started
            self.last_format_s = time.perf_counter() - collected
            status = "200 OK"
        response = (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        ).encode("latin-1")
        writer.write(response if method == "HEAD" else response + body)
        await writer.drain()
        return keep_alive
