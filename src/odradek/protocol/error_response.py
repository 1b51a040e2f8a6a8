"""The error response of any request, built from kio's schema (Kafka's AbstractRequest.getErrorResponse).

Used for a request of a version the broker does not serve but kio (and so Kafka)
defines: instead of closing the connection, the client gets that version's
response with the error in every error code field. As Kafka's per-API
getErrorResponse does, arrays of the response that share their name with an array
of the request (ListOffsets ``topics`` and ``partitions``) repeat the request's
entries, keyed by its topic and partition fields; every other array is empty,
other integers are -1 (Kafka's "unknown": no producer id, no offset) unless the
schema gives a default, strings are empty or null.
"""

from __future__ import annotations

import dataclasses
import typing
import uuid
from datetime import UTC, datetime, timedelta
from functools import cache
from types import NoneType, UnionType
from typing import Any

from odradek.protocol.errors import ErrorCode

#: Fields that name what an entry is about; copied from the request's matching entry.
_KEY_FIELDS = frozenset({"name", "topic", "topic_id", "partition_index", "partition", "index"})


def error_response(response_schema: type, request: Any, error_code: ErrorCode) -> Any:
    """``response_schema``'s entity answering ``request`` with ``error_code`` everywhere."""
    return _build(response_schema, request, error_code)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(cls: type, mirror: Any, error_code: ErrorCode) -> Any:
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        values[f.name] = _value(f, hints[f.name], mirror, error_code)
    return cls(**{k: v for k, v in values.items() if v is not dataclasses.MISSING})


def _value(f: dataclasses.Field[Any], hint: Any, mirror: Any, error_code: ErrorCode) -> Any:
    kafka_type = f.metadata.get("kafka_type", "")
    if kafka_type == "error_code":
        return error_code
    if f.name in _KEY_FIELDS and hasattr(mirror, f.name):
        return getattr(mirror, f.name)
    if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
        return dataclasses.MISSING  # the schema's default
    if kafka_type.startswith("timedelta"):
        return timedelta(0)
    if kafka_type.startswith("datetime"):
        return datetime.fromtimestamp(0, UTC)
    nullable = isinstance(hint, UnionType) and NoneType in typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        (element, _) = typing.get_args(hint)
        source = getattr(mirror, f.name, None)
        if (
            isinstance(element, type)
            and dataclasses.is_dataclass(element)
            and isinstance(source, tuple)
        ):
            return tuple(_build(element, entry, error_code) for entry in source)
        return ()
    if nullable:
        return None
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _build(hint, None, error_code)
    if kafka_type.startswith(("int", "uint", "float")):
        return hint(-1) if kafka_type.startswith("int") else hint(0)
    if kafka_type == "bool":
        return False
    if kafka_type == "string":
        return ""
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type in ("bytes", "records"):
        return b""
    raise TypeError(f"no error value for {f.name} of {kafka_type or hint}")
