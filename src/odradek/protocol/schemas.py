"""kio-backed decoding of requests and encoding of responses for the control plane.

kio has a generated dataclass for every Kafka request and response version; this
module only caches lookups and adapts buffers (kio wants bytes or a read-only
memoryview, never a bytearray).
"""

from __future__ import annotations

import io
from datetime import timedelta
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.protocol import Entity

from odradek.protocol.tolerant import tolerant_reader


class UnknownApi(LookupError):
    """kio has no schema for this api key and version."""


@cache
def request_schema(api_key: int, api_version: int) -> type[Entity]:
    try:
        return load_request_schema(api_key, api_version)
    except Exception as e:  # kio raises its own KioIndexError subclasses
        raise UnknownApi(f"no request schema for api key {api_key} v{api_version}") from e


@cache
def response_schema(api_key: int, api_version: int) -> type[Entity]:
    try:
        return load_response_schema(api_key, api_version)
    except Exception as e:
        raise UnknownApi(f"no response schema for api key {api_key} v{api_version}") from e


@cache
def response_module(api_key: int, api_version: int) -> ModuleType:
    """The kio module holding a response's nested entity classes (topics, partitions...)."""
    return load_payload_module(api_key, api_version, EntityType.response)


@cache
def request_module(api_key: int, api_version: int) -> ModuleType:
    """The kio module holding a request's nested entity classes (for requests this broker sends)."""
    return load_payload_module(api_key, api_version, EntityType.request)


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether this API version uses compact encodings, tagged fields and header v2."""
    return bool(request_schema(api_key, api_version).__flexible__)


def decode_request(api_key: int, api_version: int, body: bytes | memoryview) -> Any:
    """The kio request object for a request body."""
    schema = request_schema(api_key, api_version)
    if isinstance(body, memoryview) and not body.readonly:
        body = body.toreadonly()
    try:
        request, _size = _reader(schema)(body, 0)
    except KeyError:
        # kio refuses tagged fields it does not know; the protocol says to skip them.
        request, _size = tolerant_reader(schema)(body, 0)
    return request


def encode(entity: Any) -> bytes:
    """Any kio entity (a response, a nested struct) as bytes."""
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@cache
def _reader(schema: type[Entity]) -> Any:
    return entity_reader(schema)


def build(cls: type[Entity], **fields: Any) -> Any:
    """Construct a kio entity, dropping keyword arguments its version does not have.

    Handlers serve many versions of one API; this lets them name every field once
    and have each version keep the ones it defines.
    Plain ints are accepted for kio's timedelta (milliseconds) and error code fields.
    """
    known = cls.__dataclass_fields__
    kwargs = {}
    for name, value in fields.items():
        f = known.get(name)
        if f is None:
            continue
        kafka_type = f.metadata.get("kafka_type", "")
        if type(value) is int:
            if kafka_type.startswith("timedelta"):
                value = timedelta(milliseconds=value)
            elif kafka_type == "error_code":
                value = ErrorCode(value)
        kwargs[name] = value
    return cls(**kwargs)
