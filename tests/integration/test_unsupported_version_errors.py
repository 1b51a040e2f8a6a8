"""Versions Kafka defines but we do not serve get that version's error response.

The response carries UNSUPPORTED_VERSION in every error field (Kafka's
getErrorResponse), the connection stays open, and the broker logs the request.
Versions Kafka does not define close the connection (test_unsupported_versions.py).
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kio.schema.describe_log_dirs.v5 import request as describe_log_dirs_v5
from kio.schema.metadata.v12 import request as metadata_v12
from kio.serial import entity_reader

from odradek import EmbeddedBroker
from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from odradek.server.apis import API_TABLE

from .test_unsupported_versions import encode, frame, read_frame

DESCRIBE_LOG_DIRS = describe_log_dirs_v5.DescribeLogDirsRequest(topics=None)


@pytest.fixture(scope="module")
def broker():
    with EmbeddedBroker() as b:
        yield b


def call(sock: socket.socket, request, correlation_id: int):
    api_key, version = int(request.__api_key__), int(request.__version__)
    sock.sendall(frame(api_key, version, correlation_id, encode(request), request.__flexible__))
    data = read_frame(sock)
    assert struct.unpack(">i", data[:4])[0] == correlation_id
    return entity_reader(schemas.response_schema(api_key, version))(
        data[5:] if api_key != 18 else data[4:], 0
    )[0]


@pytest.mark.parametrize("request_", [DESCRIBE_LOG_DIRS], ids=["describe-log-dirs-v5"])
def test_defined_but_unserved_version_gets_unsupported_version(
    broker: EmbeddedBroker, request_
) -> None:
    api_key, version = int(request_.__api_key__), int(request_.__version__)
    assert version > API_TABLE[api_key].max_version, "served now: pick a version we do not serve"
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        response = call(sock, request_, 11)
        assert response.error_code == ErrorCode.unsupported_version
        # The connection stays usable at a version we serve.
        metadata = call(
            sock,
            metadata_v12.MetadataRequest(
                topics=(),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            12,
        )
        assert metadata.brokers
    expected = f"with version {version} which is not enabled"
    deadline = time.monotonic() + 10
    while not any(expected in line and "UNSUPPORTED_VERSION" in line for line in broker.log_lines):
        assert time.monotonic() < deadline, "no log line names the unsupported version"
        time.sleep(0.05)
