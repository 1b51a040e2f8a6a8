"""Executors' reads as plain Fetch requests, whose record batches record_columns decodes.

librdkafka hands Python one Message object per record, which costs more than
everything Spark does with the row afterwards. Fetch requests (kio's schemas,
the version agreed through ApiVersions, 4 to 12) go over one socket per
partition leader; finding the leader and the partition's watermarks stays with
librdkafka's metadata.

It speaks PLAINTEXT only and understands the kafka.* options in FETCH_OPTIONS;
any other option (TLS, SASL, anything librdkafka-specific) sends the read
through librdkafka instead, so every option keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from odradek.spark.connection import BrokerConnection, BrokerError
from odradek.spark.options import SourceOptions

FETCH = 1
#: Fetch v4 brings isolation_level and aborted transactions; v13 replaces topic names by ids.
MIN_FETCH_VERSION, MAX_FETCH_VERSION = 4, 12
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
#: Options this reader honours itself (Kafka's names, as librdkafka takes them too).
FETCH_OPTIONS = frozenset(
    {
        "bootstrap.servers",
        "client.id",
        "isolation.level",
        "check.crcs",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "max.partition.fetch.bytes",
        "fetch.wait.max.ms",
        "fetch.max.wait.ms",
        "request.timeout.ms",
        "socket.timeout.ms",
        "security.protocol",
    }
)
# Bytes per partition per Fetch when max.partition.fetch.bytes is not given: Kafka's 1 MiB
# default makes 10,000-record Arrow batches of 100-byte records; 4 MiB halves the per-batch
# costs and stays far below what an executor holds anyway.
DEFAULT_PARTITION_FETCH_BYTES = 4 * 1024 * 1024


def can_fetch(options: SourceOptions) -> bool:
    """Whether every kafka.* option the query gives is one this reader honours."""
    config = options.consumer_config_dict()
    if config.get("security.protocol", "plaintext").lower() != "plaintext":
        return False
    return set(config) <= FETCH_OPTIONS


@dataclass(frozen=True)
class FetchSettings:
    """The kafka.* options of a query as Fetch request fields."""

    client_id: str
    isolation_level: int
    verify_crc: bool
    min_bytes: int
    max_bytes: int
    partition_max_bytes: int
    max_wait_ms: int
    timeout_s: float

    @classmethod
    def from_options(cls, options: SourceOptions) -> FetchSettings:
        config = options.consumer_config_dict()
        max_bytes = int(config.get("fetch.max.bytes", 52_428_800))
        return cls(
            client_id=config.get("client.id", "spark-odradek-source"),
            # As librdkafka (and so the source before this reader): read_committed unless told otherwise.
            isolation_level=READ_UNCOMMITTED
            if config.get("isolation.level") == "read_uncommitted"
            else READ_COMMITTED,
            verify_crc=config.get("check.crcs", "true").lower() != "false",
            min_bytes=int(config.get("fetch.min.bytes", 1)),
            max_bytes=max_bytes,
            partition_max_bytes=int(
                config.get(
                    "max.partition.fetch.bytes", min(max_bytes, DEFAULT_PARTITION_FETCH_BYTES)
                )
            ),
            max_wait_ms=int(config.get("fetch.wait.max.ms", config.get("fetch.max.wait.ms", 500))),
            timeout_s=int(config.get("request.timeout.ms", config.get("socket.timeout.ms", 30_000)))
            / 1000,
        )


def fetch(
    connection: BrokerConnection, settings: FetchSettings, topic: str, partition: int, offset: int
) -> Any:
    """One Fetch of one partition from ``offset``, without a fetch session; its partition response."""
    version = connection.version(FETCH, MIN_FETCH_VERSION, MAX_FETCH_VERSION)
    module = load_payload_module(FETCH, version, EntityType.request)
    request = schemas.build(
        module.FetchRequest,
        max_wait=settings.max_wait_ms,
        min_bytes=settings.min_bytes,
        max_bytes=settings.max_bytes,
        isolation_level=settings.isolation_level,
        session_id=0,
        session_epoch=-1,
        forgotten_topics_data=(),
        topics=(
            schemas.build(
                module.FetchTopic,
                topic=topic,
                partitions=(
                    schemas.build(
                        module.FetchPartition,
                        partition=partition,
                        fetch_offset=offset,
                        partition_max_bytes=settings.partition_max_bytes,
                    ),
                ),
            ),
        ),
    )
    response = connection.request(request)
    if response.error_code != ErrorCode.none:
        raise BrokerError(response.error_code, f"Fetch of {topic}-{partition}")
    return response.responses[0].partitions[0]
