"""A minimal blocking Kafka client for tests: one kio request, one kio response.

Admin client libraries hide some fields (producer ids, topic ids, synonyms);
this sends exactly the request a test builds and returns the decoded response.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.incremental_alter_configs.v1 import request as alter_v1
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer

from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode

API_VERSIONS = 18


class KioClient:
    def __init__(
        self, bootstrap_servers: str, timeout: float = 30.0, client_id: str = "kio-test"
    ) -> None:
        host, port = bootstrap_servers.split(",")[0].rsplit(":", 1)
        self._sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation_id = 0
        self._client_id = client_id

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> KioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any) -> Any:
        api_key, version = int(request.__api_key__), int(request.__version__)
        flexible = bool(request.__flexible__)
        self._correlation_id += 1
        header_cls = RequestHeaderV2 if flexible else RequestHeaderV1
        header = header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self._correlation_id,
            client_id=self._client_id,
        )
        buf = io.BytesIO()
        entity_writer(header_cls)(buf, header)
        entity_writer(type(request))(buf, request)
        payload = buf.getvalue()
        self._sock.sendall(struct.pack(">i", len(payload)) + payload)
        size = struct.unpack(">i", self._recv(4))[0]
        body = self._recv(size)
        correlation_id = struct.unpack(">i", body[:4])[0]
        assert correlation_id == self._correlation_id
        # Response header v1 ends with an empty tagged-field section; ApiVersions always answers
        # with header v0, so that a client can read it whatever version it asked for.
        offset = 5 if flexible and api_key != API_VERSIONS else 4
        response, _ = entity_reader(schemas.response_schema(api_key, version))(
            memoryview(body)[offset:], 0
        )
        return response

    def _recv(self, n: int) -> bytes:
        chunks = b""
        while len(chunks) < n:
            chunk = self._sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks += chunk
        return chunks


def incremental_alter(
    client: KioClient, resource_type: int, name: str, ops: list[tuple[str, int, str | None]]
):
    """One resource's IncrementalAlterConfigs result; ``ops`` are (name, operation, value)."""
    resource = alter_v1.AlterConfigsResource(
        resource_type=resource_type,
        resource_name=name,
        configs=tuple(
            alter_v1.AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in ops
        ),
    )
    (response,) = client.send(
        alter_v1.IncrementalAlterConfigsRequest(resources=(resource,), validate_only=False)
    ).responses
    return response


def transaction_coordinator(bootstrap_servers: str, transactional_id: str = "any") -> Any:
    """FindCoordinator (key type 1) until it names a coordinator, as a transactional client
    does before InitProducerId: the first one creates __transaction_state (as in Kafka) and
    is answered COORDINATOR_NOT_AVAILABLE."""
    deadline = time.monotonic() + 30
    with KioClient(bootstrap_servers) as client:
        while True:
            (found,) = client.send(
                FindCoordinatorRequest(key_type=1, coordinator_keys=(transactional_id,))
            ).coordinators
            if found.error_code == ErrorCode.none:
                return found
            assert found.error_code == ErrorCode.coordinator_not_available, found
            assert time.monotonic() < deadline, "no transaction coordinator"
            time.sleep(0.05)
