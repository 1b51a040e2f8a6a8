"""Blocking calls to a cluster's transaction and group coordinators, for the exactly-once sink.

The sink needs what no Python Kafka client offers: KIP-939's InitProducerId v6 flags
(librdkafka does not send them), and a producer whose prepared transaction another
process ends. So it speaks the requests itself, over the same blocking BrokerConnection as
the source's Fetch and the sink's Produce, at pinned versions every Kafka 4 broker serves.

Each call finds its coordinator with FindCoordinator and goes to it, and retries what Kafka
clients retry: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS
(the coordinator moved or is loading: find it again), CONCURRENT_TRANSACTIONS (a previous
transaction's markers are being written), and a broken connection, until
``timeout_s`` passes. Any other error raises BrokerError with Kafka's error name.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.spark.connection import BrokerConnection, BrokerError

#: FindCoordinator key types.
GROUP, TRANSACTION = 0, 1
#: The versions sent: v4 FindCoordinator takes a list of keys; v6 InitProducerId has KIP-939's
#: flags; AddPartitionsToTxn v3 is the last client form; EndTxn v4 the last before
#: transaction version 2; OffsetCommit/OffsetFetch v8 the first with groups in one request.
VERSIONS = {
    ApiKey.FIND_COORDINATOR: 4,
    ApiKey.INIT_PRODUCER_ID: 6,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.END_TXN: 4,
    ApiKey.OFFSET_COMMIT: 8,
    ApiKey.OFFSET_FETCH: 8,
    ApiKey.LIST_TRANSACTIONS: 1,
    ApiKey.METADATA: 12,
}
#: Errors after which the coordinator is looked up again.
_MOVED = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
    }
)
_RETRY = _MOVED | {ErrorCode.concurrent_transactions}
RETRY_BACKOFF_S = 0.05


@dataclass(frozen=True)
class ProducerIdentity:
    """What InitProducerId granted, and (KeepPreparedTxn) the kept transaction's own identity."""

    producer_id: int
    producer_epoch: int
    ongoing_producer_id: int = -1
    ongoing_producer_epoch: int = -1

    @property
    def kept(self) -> tuple[int, int] | None:
        """The kept prepared transaction's (producer id, epoch), None when none was open."""
        if self.ongoing_producer_id < 0:
            return None
        return self.ongoing_producer_id, self.ongoing_producer_epoch


class TransactionClient:
    """Coordinator calls over connections opened on demand (one per broker) and closed by ``close``."""

    def __init__(self, bootstrap_servers: str, client_id: str, timeout_s: float = 60.0) -> None:
        self.bootstrap = [_host_port(s) for s in bootstrap_servers.split(",") if s.strip()]
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._connections: dict[tuple[str, int], BrokerConnection] = {}

    def close(self) -> None:
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()

    def __enter__(self) -> TransactionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- connections -------------------------------------------------------------------------
    def _connection(self, address: tuple[str, int]) -> BrokerConnection:
        connection = self._connections.get(address)
        if connection is None:
            connection = BrokerConnection(*address, self.client_id, self.timeout_s)
            self._connections[address] = connection
        return connection

    def _any_broker(self) -> BrokerConnection:
        failure: Exception | None = None
        for address in self.bootstrap:
            try:
                return self._connection(address)
            except OSError as exc:
                failure = exc
        raise ConnectionError(f"no bootstrap server reachable: {failure}")

    def _send(self, connection: BrokerConnection, api_key: ApiKey, **fields: Any) -> Any:
        version = connection.version(api_key, VERSIONS[api_key], VERSIONS[api_key])
        return connection.request(schemas.build(schemas.request_schema(api_key, version), **fields))

    def _forget(self, connection: BrokerConnection) -> None:
        for address, cached in list(self._connections.items()):
            if cached is connection:
                del self._connections[address]
        connection.close()

    def _retrying(self, what: str, attempt: Callable[[], ErrorCode | tuple[ErrorCode, Any]]) -> Any:
        """Run ``attempt`` until it answers no retriable error; its result (after the code)."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                answer = attempt()
            except (OSError, ConnectionError) as exc:
                if time.monotonic() > deadline:
                    raise ConnectionError(f"{what}: {exc}") from exc
                self.close()
                time.sleep(RETRY_BACKOFF_S)
                continue
            code, result = answer if isinstance(answer, tuple) else (answer, None)
            if code == ErrorCode.none:
                return result
            if code not in _RETRY or time.monotonic() > deadline:
                raise BrokerError(code, what)
            if code in _MOVED:
                self.close()
            time.sleep(RETRY_BACKOFF_S)

    def coordinator(self, key: str, key_type: int) -> BrokerConnection:
        """A connection to the coordinator of a transactional id or a group."""

        def attempt() -> tuple[ErrorCode, BrokerConnection]:
            response = self._send(
                self._any_broker(),
                ApiKey.FIND_COORDINATOR,
                key_type=key_type,
                coordinator_keys=(key,),
            )
            (found,) = response.coordinators
            if found.error_code != ErrorCode.none:
                return ErrorCode(found.error_code), None  # type: ignore[return-value]
            return ErrorCode.none, self._connection((found.host, int(found.port)))

        return self._retrying(f"FindCoordinator for {key}", attempt)

    def cluster(self, topic: str | None) -> tuple[list[tuple[str, int]], int]:
        """Every broker's address, and the partition count of ``topic`` (0 when it has none)."""

        def attempt() -> tuple[ErrorCode, tuple[list[tuple[str, int]], int]]:
            module = schemas.request_module(ApiKey.METADATA, 12)
            response = self._send(
                self._any_broker(),
                ApiKey.METADATA,
                topics=(schemas.build(module.MetadataRequestTopic, topic_id=None, name=topic),)
                if topic is not None
                else (),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            brokers = [(b.host, int(b.port)) for b in response.brokers]
            counts = [len(t.partitions) for t in response.topics if t.error_code == ErrorCode.none]
            return ErrorCode.none, (brokers, counts[0] if counts else 0)

        return self._retrying(f"Metadata of {topic}", attempt)

    # -- transactions ------------------------------------------------------------------------
    def init_producer_id(self, transactional_id: str, *, keep_prepared: bool) -> ProducerIdentity:
        """InitProducerId with Enable2Pc. Without ``keep_prepared`` an open transaction of the
        id is aborted first (the call waits while its markers are written)."""

        def attempt() -> tuple[ErrorCode, ProducerIdentity]:
            connection = self.coordinator(transactional_id, TRANSACTION)
            r = self._send(
                connection,
                ApiKey.INIT_PRODUCER_ID,
                transactional_id=transactional_id,
                transaction_timeout=60_000,  # not applied to a two-phase commit transaction
                producer_id=-1,
                producer_epoch=-1,
                enable2_pc=True,
                keep_prepared_txn=keep_prepared,
            )
            identity = ProducerIdentity(
                int(r.producer_id),
                int(r.producer_epoch),
                int(r.ongoing_txn_producer_id),
                int(r.ongoing_txn_producer_epoch),
            )
            return ErrorCode(r.error_code), identity

        return self._retrying(f"InitProducerId for {transactional_id}", attempt)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        topic: str,
        partitions: Iterable[int],
    ) -> None:
        """AddPartitionsToTxn: the partitions join the producer's transaction."""
        parts = tuple(sorted(set(partitions)))

        def attempt() -> ErrorCode:
            connection = self.coordinator(transactional_id, TRANSACTION)
            module = schemas.request_module(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
            response = self._send(
                connection,
                ApiKey.ADD_PARTITIONS_TO_TXN,
                v3_and_below_transactional_id=transactional_id,
                v3_and_below_producer_id=producer_id,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(
                    schemas.build(module.AddPartitionsToTxnTopic, name=topic, partitions=parts),
                ),
            )
            # OPERATION_NOT_ATTEMPTED accompanies the error of another partition.
            return _first_error(
                ErrorCode(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
                if p.partition_error_code != ErrorCode.operation_not_attempted
            )

        self._retrying(f"AddPartitionsToTxn {topic}{list(parts)} for {transactional_id}", attempt)

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        """EndTxn: commit or abort; answered once the decision is written, markers follow."""

        def attempt() -> ErrorCode:
            connection = self.coordinator(transactional_id, TRANSACTION)
            response = self._send(
                connection,
                ApiKey.END_TXN,
                transactional_id=transactional_id,
                producer_id=producer_id,
                producer_epoch=epoch,
                committed=commit,
            )
            return ErrorCode(response.error_code)

        verb = "commit" if commit else "abort"
        self._retrying(f"EndTxn ({verb}) for {transactional_id}", attempt)

    def ongoing_transactions(self, brokers: Iterable[tuple[str, int]]) -> list[str]:
        """The transactional ids with an Ongoing transaction, from ListTransactions to every broker
        (each answers for the ids it coordinates)."""
        found: list[str] = []
        for address in brokers:

            def attempt(address: tuple[str, int] = address) -> tuple[ErrorCode, list[str]]:
                response = self._send(
                    self._connection(address),
                    ApiKey.LIST_TRANSACTIONS,
                    state_filters=("Ongoing",),
                    producer_id_filters=(),
                )
                ids = [s.transactional_id for s in response.transaction_states]
                return ErrorCode(response.error_code), ids

            found += self._retrying(f"ListTransactions on {address[0]}:{address[1]}", attempt)
        return found

    # -- group offsets -----------------------------------------------------------------------
    def commit_offsets(
        self, group_id: str, topic: str, entries: dict[int, tuple[int, str]]
    ) -> None:
        """One OffsetCommit (one record batch, so all or nothing) of ``partition: (offset,
        metadata)`` for a group with no members (generation -1)."""

        def attempt() -> ErrorCode:
            connection = self.coordinator(group_id, GROUP)
            module = schemas.request_module(ApiKey.OFFSET_COMMIT, 8)
            response = self._send(
                connection,
                ApiKey.OFFSET_COMMIT,
                group_id=group_id,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                topics=(
                    schemas.build(
                        module.OffsetCommitRequestTopic,
                        name=topic,
                        partitions=tuple(
                            schemas.build(
                                module.OffsetCommitRequestPartition,
                                partition_index=p,
                                committed_offset=offset,
                                committed_leader_epoch=-1,
                                committed_metadata=metadata,
                            )
                            for p, (offset, metadata) in sorted(entries.items())
                        ),
                    ),
                ),
            )
            return _first_error(
                ErrorCode(p.error_code) for t in response.topics for p in t.partitions
            )

        self._retrying(f"OffsetCommit for group {group_id}", attempt)

    def fetch_offsets(self, group_id: str) -> list[tuple[str, int, int, str | None]]:
        """Every committed offset of a group: (topic, partition, offset, metadata), stable only
        (RequireStable: a commit of an open transaction is waited for)."""

        def attempt() -> tuple[ErrorCode, list[tuple[str, int, int, str | None]]]:
            connection = self.coordinator(group_id, GROUP)
            module = schemas.request_module(ApiKey.OFFSET_FETCH, 8)
            response = self._send(
                connection,
                ApiKey.OFFSET_FETCH,
                groups=(
                    schemas.build(module.OffsetFetchRequestGroup, group_id=group_id, topics=None),
                ),
                require_stable=True,
            )
            (group,) = response.groups
            rows = [
                (t.name, int(p.partition_index), int(p.committed_offset), p.metadata)
                for t in group.topics
                for p in t.partitions
                if p.error_code == ErrorCode.none and p.committed_offset >= 0
            ]
            code = ErrorCode(group.error_code)
            if code == ErrorCode.group_id_not_found:
                return ErrorCode.none, []
            unstable = any(
                p.error_code == ErrorCode.unstable_offset_commit
                for t in group.topics
                for p in t.partitions
            )
            return (ErrorCode.concurrent_transactions if unstable else code), rows

        return self._retrying(f"OffsetFetch for group {group_id}", attempt)


def _first_error(codes: Iterable[ErrorCode]) -> ErrorCode:
    """The first error among per-partition codes, NONE when there is none."""
    return next((c for c in codes if c != ErrorCode.none), ErrorCode.none)


def _host_port(server: str) -> tuple[str, int]:
    host, _, port = server.strip().rpartition(":")
    return host.strip("[]"), int(port)
