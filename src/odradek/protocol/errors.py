"""Kafka error codes, shared by every layer that reports an error to a client.

kio already carries the full, versioned table of Kafka's error codes; we re-export
it so that the rest of Odradek names errors as Kafka does without a hand-kept copy.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """An error that maps to one Kafka error code in a response."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", error_code: ErrorCode | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        if error_code is not None:
            self.error_code = error_code


__all__ = ["ErrorCode", "KafkaError"]
