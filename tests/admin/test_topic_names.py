import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.metadata.topic_names import (
    MAX_NAME_LENGTH,
    InvalidTopicName,
    colliding_topic,
    validate_topic_name,
)
from odradek.protocol.errors import ErrorCode

LEGAL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


@given(
    st.text(alphabet=LEGAL, min_size=1, max_size=MAX_NAME_LENGTH).filter(
        lambda n: n not in (".", "..")
    )
)
def test_legal_names_pass(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "a" * (MAX_NAME_LENGTH + 1),
        "with space",
        "slash/topic",
        "ümlaut",
        "star*",
        "colon:x",
    ],
)
def test_illegal_names_are_invalid_topic_exception(name: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        validate_topic_name(name)
    assert info.value.error_code == ErrorCode.invalid_topic_exception


def test_longest_legal_name() -> None:
    validate_topic_name("x" * MAX_NAME_LENGTH)


def test_dot_underscore_collision() -> None:
    assert colliding_topic("metrics.cpu", ["metrics_cpu", "other"]) == "metrics_cpu"
    assert colliding_topic("metrics_cpu", ["metrics.cpu"]) == "metrics.cpu"
    assert colliding_topic("metrics_cpu", ["metrics_cpu"]) is None
    assert colliding_topic("metrics-cpu", ["metrics_cpu"]) is None
