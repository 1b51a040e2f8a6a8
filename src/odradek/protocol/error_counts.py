"""How many times a response carries each error code: Kafka's ``AbstractResponse.errorCounts``.

The request metrics count errors per API and code from it (ErrorsPerSec, NONE
included). Hand-encoded responses (Produce, Fetch) carry their counts in
``EncodedResponse.error_counts``, set where the fields are written; a kio response
is walked here: every ``error_code`` field of the response and of its nested
entities counts once. Which fields of each schema class hold entities is worked
out once per class, so a walk touches only error codes and entity lists.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from odradek.protocol.response import EncodedResponse

_FIELDS: dict[type, tuple[bool, tuple[str, ...]]] = {}


def _fields(cls: type) -> tuple[bool, tuple[str, ...]]:
    """(has an ``error_code``, names of fields that may hold entities) of a kio schema class."""
    known = _FIELDS.get(cls)
    if known is not None:
        return known
    has_error, nested = False, []
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            has_error = True
        elif f.name.startswith("__"):
            continue
        else:
            nested.append(f.name)
    known = _FIELDS[cls] = (has_error, tuple(nested))
    return known


def _walk(entity: Any, counts: dict[int, int]) -> None:
    has_error, nested = _fields(type(entity))
    if has_error:
        code = int(entity.error_code)
        counts[code] = counts.get(code, 0) + 1
    for name in nested:
        value = getattr(entity, name)
        if isinstance(value, tuple):
            if value and dataclasses.is_dataclass(value[0]):
                for item in value:
                    _walk(item, counts)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            _walk(value, counts)


def error_counts(response: Any) -> dict[int, int] | None:
    """Error code -> occurrences in ``response``; None when it cannot tell (raw bytes)."""
    if isinstance(response, EncodedResponse):
        return response.error_counts
    if not dataclasses.is_dataclass(response):
        return None
    counts: dict[int, int] = {}
    _walk(response, counts)
    return counts
