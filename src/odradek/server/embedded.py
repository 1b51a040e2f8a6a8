"""EmbeddedBroker: a real `odradek serve` process on a free port, for tests and notebooks.

A subprocess rather than a thread, so that it behaves exactly like a deployed
broker (signals, crash recovery, its own event loop) and can be killed with
SIGKILL to test durability. The data dir is a temporary directory unless given.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from odradek.server.ready import parse_ready_line


class BrokerStartError(RuntimeError):
    """The broker process exited or did not print its ready line in time."""


class StartedInWith(ABC):
    """``with X() as x``: started on entry (and closed again if the start fails), closed on
    exit; for the embedded processes (broker, ZooKeeper, cluster)."""

    @abstractmethod
    def start(self) -> Any: ...

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()


class EmbeddedBroker(StartedInWith):
    """``with EmbeddedBroker() as broker: use(broker.bootstrap_servers)``."""

    def __init__(
        self,
        config: Mapping[str, str] | None = None,
        data_dir: str | Path | None = None,
        port: int = 0,
        start_timeout: float = 30.0,
        log_level: str = "INFO",
    ) -> None:
        self.config = dict(config or {})
        #: The broker's --log-level (DEBUG shows, for example, each TLS connection's principal).
        self.log_level = log_level
        self._own_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="odradek-"))
        )
        self._port = port
        self._start_timeout = start_timeout
        self._process: subprocess.Popen[str] | None = None
        self.bootstrap_servers = ""
        #: Listener name -> "host:port" the broker advertises on it (several when ``listeners`` names several).
        self.listeners: dict[str, str] = {}
        #: "http://host:port/metrics" when the config sets metrics.http.listener, else None.
        self.metrics_url: str | None = None
        #: Lines the broker wrote to stderr (its log), for test diagnostics.
        self.log_lines: list[str] = []

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self) -> EmbeddedBroker:
        # After a restart, keep the port clients already know.
        port = self._port
        if self.bootstrap_servers:
            port = int(self.bootstrap_servers.rsplit(":", 1)[1])
        cmd = [
            sys.executable,
            "-m",
            "odradek",
            "--log-level",
            self.log_level,
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        for key, value in self.config.items():
            cmd += ["-o", f"{key}={value}"]
        self._process = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(target=self._drain_stderr, args=(self._process,), daemon=True).start()
        ready = threading.Event()
        found: list[str] = []

        def read_stdout(process: subprocess.Popen[str]) -> None:
            assert process.stdout is not None
            for line in process.stdout:
                parsed = parse_ready_line(line)
                if parsed is not None and not found:
                    found.append(parsed.bootstrap_servers)
                    self.listeners = parsed.listeners
                    self.metrics_url = parsed.metrics_url
                    ready.set()
            ready.set()

        threading.Thread(target=read_stdout, args=(self._process,), daemon=True).start()
        if not ready.wait(self._start_timeout) or not found:
            self.kill()
            tail = "".join(self.log_lines[-20:])
            raise BrokerStartError(f"broker did not become ready; its log ends:\n{tail}")
        self.bootstrap_servers = found[0]
        return self

    def _drain_stderr(self, process: subprocess.Popen[str]) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.log_lines.append(line)

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM and wait for a clean shutdown; returns the exit status."""
        if self._process is None:
            return None
        process, self._process = self._process, None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
        return process.wait()

    def kill(self) -> None:
        """SIGKILL: a crash, for recovery tests."""
        if self._process is None:
            return
        process, self._process = self._process, None
        process.kill()
        process.wait()

    def restart(self, hard: bool = False) -> EmbeddedBroker:
        """Stop (SIGTERM, or SIGKILL when ``hard``) and start again on the same port and data."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
