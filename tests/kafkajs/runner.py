"""Running client.js: one KafkaJS scenario in a Node.js process, its JSON result back.

The tests skip, saying why, where Node.js or the installed KafkaJS is missing (``make
install`` runs ``npm ci`` here when npm is on the machine), as the browser tests do
without Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
NODE = shutil.which("node")

needs_kafkajs = pytest.mark.skipif(
    NODE is None or not (HERE / "node_modules" / "kafkajs").is_dir(),
    reason="KafkaJS is not installed (make install runs npm ci in tests/kafkajs; needs Node.js)",
)


def run_kafkajs(
    scenario: str,
    bootstrap: str,
    topic: str,
    group: str,
    *,
    ca: Path | None = None,
    client_cert: tuple[Path, Path] | None = None,
    sasl: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    """The scenario's result; AssertionError with KafkaJS's error when it failed.

    ``ca`` turns TLS on, trusting that CA, and ``client_cert`` (certificate, key) gives the
    client a certificate; ``sasl`` is (mechanism, user, password) with KafkaJS's mechanism
    names ("plain", "scram-sha-256", ...).
    """
    done = _node(scenario, bootstrap, topic, group, _environment(ca, client_cert, sasl))
    assert done.returncode == 0, f"KafkaJS {scenario}: {done.stderr.strip() or done.stdout.strip()}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def kafkajs_error(
    scenario: str, bootstrap: str, topic: str, group: str, *, sasl: tuple[str, str, str]
) -> str:
    """The error KafkaJS ended the scenario with (AssertionError if it succeeded)."""
    done = _node(scenario, bootstrap, topic, group, _environment(None, None, sasl))
    assert done.returncode != 0, f"KafkaJS {scenario} succeeded: {done.stdout.strip()}"
    return done.stderr.strip()


class Producing:
    """The ``failover`` scenario while it runs: ``acked`` follows its progress lines, ``stop``
    ends it and returns its result."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked = 0
        self._process = subprocess.Popen(
            _command("failover", bootstrap, topic, "-"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(None, None, None),
            cwd=HERE,
        )
        self._lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.append(line)
            if line.startswith("acked "):
                self.acked = int(line.split()[1])

    def stop(self) -> dict[str, Any]:
        assert self._process.stdin is not None
        self._process.stdin.write("stop\n")
        self._process.stdin.close()
        code = self._process.wait(90)
        self._reader.join(10)
        assert self._process.stderr is not None
        assert code == 0, f"KafkaJS failover: {self._process.stderr.read().strip()}"
        result: dict[str, Any] = json.loads(self._lines[-1])
        return result

    def __enter__(self) -> Producing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def _command(scenario: str, bootstrap: str, topic: str, group: str) -> list[str]:
    assert NODE is not None
    return [NODE, str(HERE / "client.js"), scenario, bootstrap, topic, group]


def _environment(
    ca: Path | None, client_cert: tuple[Path, Path] | None, sasl: tuple[str, str, str] | None
) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAJS_")}
    if ca is not None:
        env["KAFKAJS_CA"] = str(ca)
    if client_cert is not None:
        env["KAFKAJS_CERT"], env["KAFKAJS_KEY"] = map(str, client_cert)
    if sasl is not None:
        env["KAFKAJS_SASL"] = ":".join(sasl)
    return env


def _node(
    scenario: str, bootstrap: str, topic: str, group: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _command(scenario, bootstrap, topic, group),
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=HERE,
    )
