import pytest

from odradek.metadata.config_ops import (
    DuplicateConfigKey,
    InvalidConfigOp,
    OpType,
    apply_incremental,
)
from odradek.protocol.errors import ErrorCode

LISTS = frozenset({"cleanup.policy"})
DEFAULTS = {"cleanup.policy": "delete", "retention.ms": "604800000"}


def apply(overrides, *ops):
    return apply_incremental(overrides, ops, LISTS, DEFAULTS)


def test_set_and_delete() -> None:
    assert apply({}, ("retention.ms", OpType.SET, "1000")) == {"retention.ms": "1000"}
    assert apply({"retention.ms": "1000"}, ("retention.ms", OpType.DELETE, None)) == {}
    assert apply({}, ("retention.ms", OpType.DELETE, None)) == {}


def test_append_starts_from_default_and_skips_present_items() -> None:
    assert apply({}, ("cleanup.policy", OpType.APPEND, "compact")) == {
        "cleanup.policy": "delete,compact"
    }
    assert apply(
        {"cleanup.policy": "compact"}, ("cleanup.policy", OpType.APPEND, "compact,delete")
    ) == {"cleanup.policy": "compact,delete"}


def test_subtract() -> None:
    assert apply(
        {"cleanup.policy": "compact,delete"}, ("cleanup.policy", OpType.SUBTRACT, "delete")
    ) == {"cleanup.policy": "compact"}


def test_append_to_non_list_is_invalid_config() -> None:
    with pytest.raises(InvalidConfigOp) as info:
        apply({}, ("retention.ms", OpType.APPEND, "5"))
    assert info.value.error_code == ErrorCode.invalid_config


def test_duplicate_keys_are_invalid_request() -> None:
    with pytest.raises(DuplicateConfigKey) as info:
        apply({}, ("retention.ms", OpType.SET, "5"), ("retention.ms", OpType.DELETE, None))
    assert info.value.error_code == ErrorCode.invalid_request


def test_unknown_op_and_null_set() -> None:
    with pytest.raises(InvalidConfigOp):
        apply({}, ("retention.ms", 9, "5"))
    with pytest.raises(InvalidConfigOp):
        apply({}, ("retention.ms", OpType.SET, None))
