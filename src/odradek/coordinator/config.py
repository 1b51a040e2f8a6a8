"""Group coordinator settings, named and defaulted as Kafka's broker configs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104_857_600
    offset_metadata_max_bytes: int = 4096
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_max_size: int = 2**31 - 1
    #: KIP-848 online migration between classic and consumer groups: disabled, upgrade, downgrade or
    #: bidirectional (Kafka 4's default).
    group_consumer_migration_policy: str = "bidirectional"

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> GroupCoordinatorConfig:
        """Pick our keys out of broker properties ("group.max.size" -> group_max_size)."""
        values: dict[str, str | int] = {}
        for name, spec in cls.__dataclass_fields__.items():
            value = props.get(name.replace("_", "."))
            if value is not None:
                text = str(value).strip()
                values[name] = text.lower() if isinstance(spec.default, str) else int(text)
        return cls(**values)  # type: ignore[arg-type]  # each value has its field's type

    @property
    def upgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.group_consumer_migration_policy in ("downgrade", "bidirectional")

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
