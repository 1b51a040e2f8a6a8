"""`odradek transactions list|describe|abort`: transactions and hanging ones, as Kafka's
kafka-transactions.sh.

confluent-kafka's AdminClient has no transaction calls, so this tool speaks the wire
protocol itself, one blocking connection per broker (``spark.connection``, the project's
kio client): ListTransactions to every broker (each lists the ids it coordinates),
FindCoordinator then DescribeTransactions for one id, and for ``abort`` DescribeProducers
on the partition's leader to find the producer whose open transaction starts at
``--start-offset``, then WriteTxnMarkers to that leader with an ABORT marker for it (or,
as Kafka's tool also allows, for the producer id, epoch and coordinator epoch given). The
abort is for a hanging transaction (its coordinator lost it); a transaction its
coordinator knows is ended by the coordinator. Its connections take the same
``--command-config`` and ``-X`` settings as the other tools (``client_security.wire_security``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from odradek.cli.client_options import add_connection_args, client_config
from odradek.cli.client_security import WireSecurity, wire_security
from odradek.cli.errors import ToolError
from odradek.network.sasl_client import SaslExchangeError
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.spark.connection import BrokerConnection, BrokerError

TIMEOUT_S = 30.0
KEY_TYPE_TRANSACTION = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "transactions", help="list and describe transactions, abort hanging ones"
    )
    sub = parser.add_subparsers(dest="transactions_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help="every transactional id the brokers coordinate")
    add_connection_args(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("describe", help="the state of one transactional id")
    add_connection_args(p)
    p.add_argument("--transactional-id", required=True, help="the transactional id to describe")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("abort", help="write an ABORT marker for a hanging transaction")
    add_connection_args(p)
    p.add_argument("--topic", required=True, help="topic of the partition the transaction hangs on")
    p.add_argument("--partition", type=int, required=True, help="that partition")
    p.add_argument("--start-offset", type=int, help="first offset of the open transaction to abort")
    p.add_argument("--producer-id", type=int, help="instead of --start-offset")
    p.add_argument("--producer-epoch", type=int, help="with --producer-id")
    p.add_argument("--coordinator-epoch", type=int, help="with --producer-id")
    p.set_defaults(func=cmd_abort)


# ---- connections ----------------------------------------------------------------------------


def _security(args: argparse.Namespace) -> WireSecurity:
    """TLS and SASL from --command-config and -X, read as the confluent-kafka tools read them."""
    return wire_security(client_config(args))


@contextmanager
def _connect(address: str, security: WireSecurity) -> Iterator[BrokerConnection]:
    host, _, port = address.rpartition(":")
    try:
        connection = BrokerConnection(
            host,
            int(port),
            "odradek-transactions",
            TIMEOUT_S,
            security.ssl_context,
            security.sasl,
        )
    except (OSError, SaslExchangeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ToolError(f"cannot connect to {address}: {reason}") from None
    except BrokerError as exc:
        raise ToolError(str(exc)) from None
    try:
        yield connection
    except (OSError, ConnectionError) as exc:
        raise ToolError(f"{address}: {exc}") from None
    finally:
        connection.close()


def _version(connection: BrokerConnection, api_key: int, lowest: int, highest: int) -> int:
    try:
        return connection.version(api_key, lowest, highest)
    except RuntimeError as exc:  # the broker does not serve the versions this tool speaks
        raise ToolError(str(exc)) from None


def _call(connection: BrokerConnection, api_key: int, highest: int, **fields: Any) -> Any:
    version = _version(connection, api_key, 0, highest)
    return connection.request(schemas.build(schemas.request_schema(api_key, version), **fields))


def _brokers(bootstrap: str, security: WireSecurity) -> dict[int, str]:
    """node id -> host:port of every broker the cluster lists."""
    last: ToolError | None = None
    for address in bootstrap.split(","):
        try:
            with _connect(address.strip(), security) as c:
                response = _call(
                    c,
                    ApiKey.METADATA,
                    12,
                    topics=(),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            return {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        except ToolError as exc:
            last = exc
    raise last or ToolError("no bootstrap server given")


def _table(rows: list[list[object]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _failed(code: int, what: str) -> ToolError:
    return ToolError(f"{what}: {ErrorCode(code).name.upper()}")


# ---- list / describe ------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    rows: list[list[object]] = []
    security = _security(args)
    for node_id, address in sorted(_brokers(args.bootstrap_server, security).items()):
        with _connect(address, security) as c:
            response = _call(
                c,
                ApiKey.LIST_TRANSACTIONS,
                1,
                state_filters=(),
                producer_id_filters=(),
                duration_filter=-1,
            )
        if response.error_code != ErrorCode.none:
            raise _failed(response.error_code, f"ListTransactions on broker {node_id}")
        rows += [
            [s.transactional_id, node_id, s.producer_id, s.transaction_state]
            for s in response.transaction_states
        ]
    header: list[list[object]] = [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    ]
    print(_table(header + sorted(rows, key=lambda r: str(r[0]))))
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    tid = args.transactional_id
    security = _security(args)
    brokers = _brokers(args.bootstrap_server, security)
    with _connect(next(iter(brokers.values())), security) as c:
        found = _call(
            c, ApiKey.FIND_COORDINATOR, 4, key_type=KEY_TYPE_TRANSACTION, coordinator_keys=(tid,)
        ).coordinators[0]
    if found.error_code != ErrorCode.none:
        raise _failed(found.error_code, f"finding the coordinator of {tid}")
    with _connect(f"{found.host}:{found.port}", security) as c:
        (state,) = _call(
            c, ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=(tid,)
        ).transaction_states
    if state.error_code != ErrorCode.none:
        raise _failed(state.error_code, f"describing {tid}")
    start_ms = int(state.transaction_start_time.timestamp() * 1000)
    open_ = state.transaction_state == "Ongoing"
    partitions = ",".join(f"{t.topic}-{p}" for t in state.topics for p in t.partitions)
    rows = [
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [
            found.node_id,
            tid,
            state.producer_id,
            state.producer_epoch,
            state.transaction_state,
            int(state.transaction_timeout.total_seconds() * 1000),
            start_ms if open_ else "None",
            int(time.time() * 1000) - start_ms if open_ else "None",
            partitions or "None",
        ],
    ]
    print(_table(rows))
    return 0


# ---- abort ----------------------------------------------------------------------------------


def _leader(bootstrap: str, topic: str, partition: int, security: WireSecurity) -> str:
    for address in bootstrap.split(","):
        with _connect(address.strip(), security) as c:
            request_topic = schemas.request_module(ApiKey.METADATA, 12).MetadataRequestTopic
            response = _call(
                c,
                ApiKey.METADATA,
                12,
                topics=(schemas.build(request_topic, topic_id=None, name=topic),),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        (t,) = response.topics
        if t.error_code != ErrorCode.none:
            raise _failed(t.error_code, f"topic {topic}")
        for p in t.partitions:
            if p.partition_index == partition:
                if p.leader_id not in brokers:
                    raise ToolError(f"{topic}-{partition} has no leader")
                return brokers[p.leader_id]
        raise ToolError(f"{topic} has no partition {partition}")
    raise ToolError("no bootstrap server given")


def cmd_abort(args: argparse.Namespace) -> int:
    tp = f"{args.topic}-{args.partition}"
    by_producer = args.producer_id is not None
    if by_producer == (args.start_offset is not None):
        raise ToolError("give --start-offset, or --producer-id with its epochs")
    if by_producer and (args.producer_epoch is None or args.coordinator_epoch is None):
        raise ToolError("--producer-id needs --producer-epoch and --coordinator-epoch")
    security = _security(args)
    leader = _leader(args.bootstrap_server, args.topic, args.partition, security)
    with _connect(leader, security) as c:
        if by_producer:
            producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        else:
            producer = _producer_at(c, args.topic, args.partition, args.start_offset)
        pid, epoch, coordinator_epoch = producer
        module = schemas.request_module(
            ApiKey.WRITE_TXN_MARKERS, _version(c, ApiKey.WRITE_TXN_MARKERS, 1, 1)
        )
        marker = schemas.build(
            module.WritableTxnMarker,
            producer_id=pid,
            producer_epoch=epoch,
            transaction_result=False,
            topics=(
                schemas.build(
                    module.WritableTxnMarkerTopic,
                    name=args.topic,
                    partition_indexes=(args.partition,),
                ),
            ),
            coordinator_epoch=coordinator_epoch,
        )
        response = c.request(schemas.build(module.WriteTxnMarkersRequest, markers=(marker,)))
    for result in response.markers:
        for topic in result.topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.none:
                    raise _failed(p.error_code, f"writing the ABORT marker to {tp}")
    print(f"Aborted the transaction of producer {pid} (epoch {epoch}) on {tp}")
    return 0


def _producer_at(
    c: BrokerConnection, topic: str, partition: int, start_offset: int
) -> tuple[int, int, int]:
    """(producer id, epoch, coordinator epoch) of the producer whose open transaction on the
    partition starts at ``start_offset``, as DescribeProducers tells."""
    module = schemas.request_module(ApiKey.DESCRIBE_PRODUCERS, 0)
    response = _call(
        c,
        ApiKey.DESCRIBE_PRODUCERS,
        0,
        topics=(schemas.build(module.TopicRequest, name=topic, partition_indexes=(partition,)),),
    )
    (p,) = response.topics[0].partitions
    if p.error_code != ErrorCode.none:
        raise _failed(p.error_code, f"DescribeProducers on {topic}-{partition}")
    for state in p.active_producers:
        if state.current_txn_start_offset == start_offset:
            return state.producer_id, state.producer_epoch, state.coordinator_epoch
    raise ToolError(f"no open transaction on {topic}-{partition} starts at offset {start_offset}")
