"""Typed storage errors, each carrying the Kafka error code the broker answers with."""

from __future__ import annotations

from odradek.protocol.errors import ErrorCode as ErrorCode
from odradek.protocol.errors import KafkaError as KafkaError


class CorruptRecord(KafkaError):
    """A batch fails its size or CRC32C checks."""

    error_code = ErrorCode.corrupt_message


class InvalidRecord(KafkaError):
    """A batch whose fields contradict each other or the log (e.g. offsets going back)."""

    error_code = ErrorCode.invalid_record


class RecordTooLarge(KafkaError):
    """A batch larger than max.message.bytes (Kafka's RECORD_TOO_LARGE, code 10)."""

    error_code = ErrorCode.message_too_large


class UnsupportedForMessageFormat(KafkaError):
    """A batch that is not record batch v2 (magic 0 or 1)."""

    error_code = ErrorCode.unsupported_for_message_format


class OffsetOutOfRange(KafkaError):
    error_code = ErrorCode.offset_out_of_range


class OutOfOrderSequence(KafkaError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpoch(KafkaError):
    error_code = ErrorCode.invalid_producer_epoch


class InvalidTxnState(KafkaError):
    """A non-transactional batch from a producer whose transaction is open in the partition."""

    error_code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFenced(KafkaError):
    """A transaction marker from a coordinator epoch older than the partition last saw."""

    error_code = ErrorCode.transaction_coordinator_fenced


class KafkaStorageError(KafkaError):
    """The log dir holding the partition is offline after an I/O error."""

    error_code = ErrorCode.kafka_storage_error


class InvalidConfig(KafkaError, ValueError):
    """A topic config value is invalid; the message names the key."""

    error_code = ErrorCode.invalid_config


class LogDirLocked(KafkaStorageError):
    """Another process holds the lock of a log dir."""


class InconsistentMetaProperties(KafkaStorageError):
    """meta.properties of the log dirs disagree with each other or with the broker config."""


class RecordValidationError(KafkaError):
    """A batch rejected because of some of its records (Kafka's RecordValidationException).

    ``record_errors`` holds (batch_index, message) for each bad record, the index
    counted across the partition's records of the request, for Produce v8+.
    """

    def __init__(
        self, message: str, error_code: ErrorCode, record_errors: list[tuple[int, str | None]]
    ) -> None:
        super().__init__(message, error_code)
        self.record_errors = record_errors
