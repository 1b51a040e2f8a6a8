"""Kafka's topic name rules, kept apart from any I/O so they can be tested alone.

Kafka limits names to 249 characters of [a-zA-Z0-9._-] (the partition directory
name ``<topic>-<partition>`` must fit in 255 bytes), forbids "." and "..", and
refuses a name that differs from an existing one only by '.' versus '_',
because both characters map to the same metric name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from odradek.protocol.errors import ErrorCode, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")

#: Topics the broker itself writes to; clients may not create or delete them.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class InvalidTopicName(KafkaError):
    """The name breaks one of Kafka's topic name rules."""

    error_code = ErrorCode.invalid_topic_exception


def validate_topic_name(name: str) -> None:
    """Raise InvalidTopicName with Kafka's wording if ``name`` is not a legal topic name."""
    if not name:
        raise InvalidTopicName("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicName('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicName(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicName(
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def unify_collision_chars(name: str) -> str:
    """The form under which '.' and '_' variants of a name are the same metric name."""
    return name.replace(".", "_")


def colliding_topic(name: str, existing: Iterable[str]) -> str | None:
    """The existing topic that differs from ``name`` only by '.' versus '_', if any.

    An identical name is not a collision (that is TOPIC_ALREADY_EXISTS).
    """
    unified = unify_collision_chars(name)
    for other in existing:
        if other != name and unify_collision_chars(other) == unified:
            return other
    return None
