"""`odradek transactions list|describe|abort`: transactions and hanging ones, as Kafka's
kafka-transactions.sh.

confluent-kafka's AdminClient has no transaction calls, so this tool speaks the wire
protocol itself, one blocking connection per broker (``wire_calls``, over the project's
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

from odradek.cli import wire_calls
from odradek.cli.client_options import add_connection_args
from odradek.cli.client_security import WireSecurity
from odradek.cli.errors import ToolError
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.spark.connection import BrokerConnection

CLIENT_ID = "odradek-transactions"
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


def _brokers(bootstrap: str, security: WireSecurity) -> dict[int, str]:
    """node id -> host:port of every broker the cluster lists."""
    last: ToolError | None = None
    for address in bootstrap.split(","):
        try:
            with wire_calls.connect(address.strip(), security, CLIENT_ID) as c:
                response = wire_calls.call(
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
    security = wire_calls.security(args)
    for node_id, address in sorted(_brokers(args.bootstrap_server, security).items()):
        with wire_calls.connect(address, security, CLIENT_ID) as c:
            response = wire_calls.call(
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
    security = wire_calls.security(args)
    brokers = _brokers(args.bootstrap_server, security)
    with wire_calls.connect(next(iter(brokers.values())), security, CLIENT_ID) as c:
        found = wire_calls.call(
            c, ApiKey.FIND_COORDINATOR, 4, key_type=KEY_TYPE_TRANSACTION, coordinator_keys=(tid,)
        ).coordinators[0]
    if found.error_code != ErrorCode.none:
        raise _failed(found.error_code, f"finding the coordinator of {tid}")
    with wire_calls.connect(f"{found.host}:{found.port}", security, CLIENT_ID) as c:
        (state,) = wire_calls.call(
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
        with wire_calls.connect(address.strip(), security, CLIENT_ID) as c:
            request_topic = schemas.request_module(ApiKey.METADATA, 12).MetadataRequestTopic
            response = wire_calls.call(
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
    security = wire_calls.security(args)
    leader = _leader(args.bootstrap_server, args.topic, args.partition, security)
    with wire_calls.connect(leader, security, CLIENT_ID) as c:
        if by_producer:
            producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
        else:
            producer = _producer_at(c, args.topic, args.partition, args.start_offset)
        pid, epoch, coordinator_epoch = producer
        module = schemas.request_module(
            ApiKey.WRITE_TXN_MARKERS, wire_calls.version(c, ApiKey.WRITE_TXN_MARKERS, 1, 1)
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
    response = wire_calls.call(
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
