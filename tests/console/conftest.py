"""A real `odradek console` process per test module, against a real broker.

The console runs as users run it (``python -m odradek console --port 0``) and is found by
its ready line; the tests speak HTTP to it (``fetch``) or drive a browser at it.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

READY = re.compile(r"odradek console ready url=(\S+)")
START_TIMEOUT_S = 30


class ConsoleProcess:
    """``odradek console`` for ``bootstrap_servers``; ``.url`` once it printed its ready line."""

    def __init__(self, bootstrap_servers: str, *extra: str) -> None:
        # The log goes to a file: a pipe nobody reads would stop the console once full.
        self.log = tempfile.TemporaryFile("w+")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "odradek",
                "console",
                "--bootstrap-server",
                bootstrap_servers,
                "--port",
                "0",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        self.url = self._await_ready()

    def _await_ready(self) -> str:
        found: list[str] = []

        def read() -> None:
            assert self.process.stdout is not None
            for line in self.process.stdout:
                match = READY.search(line)
                if match:
                    found.append(match.group(1))
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not found:
            self.stop()
            raise RuntimeError(f"odradek console did not start: {self.stderr()}")
        return found[0].rstrip("/")

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        status = self.process.wait(START_TIMEOUT_S)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return status


@dataclass
class Page:
    status: int
    url: str
    body: str


def fetch(
    url: str, form: dict[str, str] | None = None, headers: dict[str, str] | None = None
) -> Page:
    """GET ``url``, or POST ``form`` to it; redirects followed, error statuses returned."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return Page(response.status, response.url, response.read().decode())
    except urllib.error.HTTPError as exc:
        return Page(exc.code, url, exc.read().decode())


#: The module consoles sample a viewed group's lag this often, so a chart gains points quickly.
LAG_INTERVAL_MS = 300


@dataclass
class Event:
    name: str
    id: str | None
    data: object


class EventStream:
    """A Server-Sent Events stream read as a browser's EventSource reads it."""

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.connection.request("GET", f"{parts.path}?{parts.query}", headers=headers or {})
        self.response = self.connection.getresponse()
        assert self.response.status == 200
        assert self.response.headers["Content-Type"] == "text/event-stream"

    def next(self) -> Event:
        """The next event (comments skipped); its data parsed as JSON."""
        name, event_id, data = "message", None, []
        while True:
            line = self.response.readline().decode()
            assert line, "the stream ended"
            line = line.rstrip("\n")
            if not line:
                if data:
                    return Event(name, event_id, json.loads("\n".join(data)))
                continue
            field, _, value = line.partition(": ")
            if field == "event":
                name = value
            elif field == "id":
                event_id = value
            elif field == "data":
                data.append(value)

    def close(self) -> None:
        self.connection.close()


@pytest.fixture(scope="module")
def console(odradek_broker) -> Iterator[ConsoleProcess]:
    process = ConsoleProcess(
        odradek_broker.bootstrap_servers, "--lag-interval-ms", str(LAG_INTERVAL_MS)
    )
    yield process
    process.stop()


def free_port() -> int:
    """A port nothing listens on (bound and released), for a broker that is down."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
