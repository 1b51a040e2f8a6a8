"""Requests as the SASL authenticator receives them and its answers decoded, for its tests."""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.schema.sasl_authenticate.v2 import request as authenticate_v2
from kio.serial import entity_reader, entity_writer

from odradek.protocol import schemas


def frame(request: Any, correlation_id: int = 7) -> memoryview:
    api_key, version = int(request.__api_key__), int(request.__version__)
    header = struct.pack(">hhih", api_key, version, correlation_id, 4) + b"test"
    if request.__flexible__:
        header += b"\x00"
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return memoryview(header + buf.getvalue())


def answer(request: Any, data: bytes | None) -> Any:
    assert data is not None
    api_key, version = int(request.__api_key__), int(request.__version__)
    assert struct.unpack(">i", data[:4])[0] == 7  # the correlation id
    body = data[5:] if request.__flexible__ and api_key != 18 else data[4:]
    return entity_reader(schemas.response_schema(api_key, version))(body, 0)[0]


def authenticate(token: bytes) -> Any:
    return authenticate_v2.SaslAuthenticateRequest(auth_bytes=token)
