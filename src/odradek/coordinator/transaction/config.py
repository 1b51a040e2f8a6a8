"""Transaction coordinator settings, named and defaulted as Kafka's broker configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_segment_bytes: int = 104_857_600
    transaction_state_log_min_isr: int = 2
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 604_800_000
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 3_600_000
    #: Where AddOffsetsToTxn finds a group's partition.
    offsets_topic_num_partitions: int = 50
    #: KIP-939: whether producers may ask for two-phase commit (InitProducerId v6 Enable2Pc).
    transaction_two_phase_commit_enable: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> TransactionConfig:
        """Pick our keys out of broker properties ("transaction.max.timeout.ms" -> ...)."""
        values: dict[str, object] = {}
        for name, spec in cls.__dataclass_fields__.items():
            raw = props.get(name.replace("_", "."))
            if raw is None:
                continue
            text = str(raw).strip()
            values[name] = text.lower() == "true" if spec.type in (bool, "bool") else int(text)
        return cls(**values)  # type: ignore[arg-type]  # each value parsed to its field's type

    @property
    def config_names(self) -> tuple[str, ...]:
        return tuple(name.replace("_", ".") for name in self.__dataclass_fields__)
