"""max.connections, listener.name.<name>.max.connections and max.connections.per.ip.overrides:
Kafka's names, defaults and start-up validation, and the limits applied by a real broker."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from odradek import EmbeddedBroker
from odradek.server.config import INT_MAX, BrokerConfig, ConfigError


def test_kafkas_defaults() -> None:
    config = BrokerConfig({})
    assert config["max.connections"] == INT_MAX
    assert config["max.connections.per.ip"] == INT_MAX
    assert config["max.connections.per.ip.overrides"] == {}
    assert config.listener_max_connections() == {}


def test_per_listener_limits_use_kafkas_prefix_in_any_case() -> None:
    config = BrokerConfig(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "listener.name.internal.max.connections": "7",
            "max.connections": "100",
        }
    )
    assert config.listener_max_connections() == {"INTERNAL": 7}
    assert config["max.connections"] == 100
    assert (
        BrokerConfig({"listener.name.other.max.connections": "3"}).listener_max_connections() == {}
    )


@pytest.mark.parametrize(
    "props, message",
    [
        ({"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides"),
        (
            {"max.connections.per.ip.overrides": "bad#host:1"},
            "contains invalid addresses : bad#host",
        ),
        (
            {"max.connections.per.ip": "0"},
            "can be set to zero only if max.connections.per.ip.overrides",
        ),
        ({"max.connections": "-1"}, "max.connections: Value must be at least 0"),
        (
            {"listener.name.plaintext.max.connections": "x"},
            "listener.name.plaintext.max.connections",
        ),
    ],
)
def test_bad_values_are_refused_with_the_config_named(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig(props)


def serve(tmp_path: Path, *overrides: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(tmp_path), "--port", "0"]
    for item in overrides:
        args += ["-o", item]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "value, message",
    [
        ("127.0.0.1:x", "max.connections.per.ip.overrides"),
        ("no-such-host.invalid:3", "cannot resolve host 'no-such-host.invalid'"),
    ],
)
def test_serve_stops_on_a_bad_override(tmp_path: Path, value: str, message: str) -> None:
    result = serve(tmp_path, f"max.connections.per.ip.overrides={value}")
    assert result.returncode == 2
    assert message in result.stderr


def api_versions_v0(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t"
    return struct.pack(">i", len(body)) + body


def test_broker_applies_the_override_over_a_zero_default(tmp_path: Path) -> None:
    config = {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:1"}
    with EmbeddedBroker(data_dir=tmp_path / "data", config=config) as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as first:
            first.sendall(api_versions_v0(1))
            (size,) = struct.unpack(">i", first.recv(4, socket.MSG_WAITALL))
            assert struct.unpack(">i", first.recv(size, socket.MSG_WAITALL)[:4])[0] == 1
            with socket.create_connection((host, int(port)), timeout=10) as second:
                assert second.recv(4) == b""  # closed at once: 127.0.0.1 has its one connection
