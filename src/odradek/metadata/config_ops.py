"""IncrementalAlterConfigs operations on a set of config overrides (KIP-339), sans I/O.

SET replaces a value, DELETE removes the override (the config falls back to its
default), APPEND and SUBTRACT add or remove items of a LIST config. APPEND and
SUBTRACT start from the current override, or from the default when there is none,
as Kafka does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum

from odradek.protocol.errors import ErrorCode, KafkaError


class OpType(IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class InvalidConfigOp(KafkaError):
    error_code = ErrorCode.invalid_config


class DuplicateConfigKey(KafkaError):
    error_code = ErrorCode.invalid_request


def _items(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def apply_incremental(
    overrides: Mapping[str, str],
    ops: Iterable[tuple[str, int, str | None]],
    list_configs: frozenset[str],
    defaults: Mapping[str, str | None],
) -> dict[str, str]:
    """The overrides after applying (name, op, value) operations, all or nothing."""
    result = dict(overrides)
    seen: set[str] = set()
    for name, op_code, value in ops:
        if name in seen:
            raise DuplicateConfigKey(f"Error due to duplicate config keys: {name}")
        seen.add(name)
        try:
            op = OpType(op_code)
        except ValueError:
            raise InvalidConfigOp(f"Unknown config operation {op_code} for {name}") from None
        if op is OpType.DELETE:
            result.pop(name, None)
            continue
        if value is None:
            raise InvalidConfigOp(f"Null value not supported for {op.name} of config {name}")
        if op is OpType.SET:
            result[name] = value
            continue
        if name not in list_configs:
            raise InvalidConfigOp(
                f"Config value {op.name.lower()} is not allowed for config key: {name}"
            )
        current = _items(result[name] if name in result else defaults.get(name))
        if op is OpType.APPEND:
            current += [item for item in _items(value) if item not in current]
        else:
            removed = set(_items(value))
            current = [item for item in current if item not in removed]
        result[name] = ",".join(current)
    return result
