"""`odradek groups list|describe|delete|reset-offsets`: consumer groups, their lag and offsets.

Modelled on Kafka's kafka-consumer-groups.sh and speaking to any Kafka-compatible
broker through confluent-kafka's AdminClient. reset-offsets is a dry run unless
``--execute`` is given, and (as in Kafka) only works on a group with no members.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.cli.broker_calls import TIMEOUT_S, BrokerWatch, admin_client, error_text
from odradek.cli.client_options import add_connection_args
from odradek.cli.errors import ToolError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "groups", help="list, describe, delete consumer groups and reset their offsets"
    )
    sub = parser.add_subparsers(dest="groups_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help="list consumer groups")
    add_connection_args(p)
    p.add_argument(
        "--state", action="append", default=[], help="only groups in this state (repeatable)"
    )
    p.add_argument(
        "--type",
        action="append",
        default=[],
        choices=["classic", "consumer"],
        help="only groups of this protocol type (repeatable)",
    )
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("describe", help="members, committed offsets and lag per partition")
    add_connection_args(p)
    p.add_argument("--group", required=True, help="the group to describe")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("delete", help="delete groups with no members (and their offsets)")
    add_connection_args(p)
    p.add_argument("--group", action="append", required=True, help="repeatable")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "reset-offsets", help="move a group's committed offsets (dry run unless --execute)"
    )
    add_connection_args(p)
    p.add_argument("--group", required=True, help="the group whose offsets move")
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        help="TOPIC or TOPIC:P1,P2 (repeatable); all partitions when none are named",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="to the log start offset")
    target.add_argument("--to-latest", action="store_true", help="to the log end offset")
    target.add_argument(
        "--to-offset", type=int, help="to this offset (clamped to the partition's range)"
    )
    target.add_argument("--to-datetime", help="ISO 8601, e.g. 2024-01-31T12:00:00+00:00")
    p.add_argument(
        "--execute", action="store_true", help="commit the new offsets (default: dry run)"
    )
    p.set_defaults(func=cmd_reset_offsets)


def _table(rows: list[list[object]]) -> str:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows
    )


#: Kafka's group state names and confluent-kafka's enum names for them.
_STATE_NAMES = {
    "PreparingRebalance": "PREPARING_REBALANCING",
    "CompletingRebalance": "COMPLETING_REBALANCING",
    "Stable": "STABLE",
    "Dead": "DEAD",
    "Empty": "EMPTY",
}


def state_name(state) -> str:
    """Kafka's name of a confluent-kafka ConsumerGroupState (\"PreparingRebalance\")."""
    return next((kafka for kafka, enum in _STATE_NAMES.items() if enum == state.name), state.name)


def cmd_list(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    admin, watch = admin_client(args)
    lowered = {k.lower(): v for k, v in _STATE_NAMES.items()}
    try:
        states = {ConsumerGroupState[lowered[s.lower()]] for s in args.state}
    except KeyError as exc:
        print(f"unknown state {exc.args[0]}; one of {', '.join(_STATE_NAMES)}", file=sys.stderr)
        return 2
    # ListGroups v5 (KIP-848): classic or consumer protocol groups.
    types = {ConsumerGroupType[t.upper()] for t in args.type}
    result = watch.result(
        admin,
        admin.list_consumer_groups(states=states, types=types, request_timeout=TIMEOUT_S),
        "the list of groups",
    )
    if result.errors:  # a broker that did not answer: the list would be incomplete
        raise ToolError(f"listing groups: {'; '.join(e.str() for e in result.errors)}")
    rows = [["GROUP", "TYPE", "STATE"]] + sorted(
        [g.group_id, g.type.name.lower(), state_name(g.state)] for g in result.valid
    )
    print(_table(rows))
    return 0


def _end_offsets(
    admin: AdminClient, watch: BrokerWatch, partitions: list[TopicPartition], spec
) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets(
        {TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
        request_timeout=TIMEOUT_S,
    )
    return {
        (tp.topic, tp.partition): watch.result(admin, f, f"the offsets of {tp.topic}").offset
        for tp, f in futures.items()
    }


def committed_offsets(admin: AdminClient, watch: BrokerWatch, group: str) -> list[TopicPartition]:
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S
    )[group]
    offsets = watch.result(admin, future, f"the offsets of group {group}")
    return sorted(offsets.topic_partitions, key=lambda tp: (tp.topic, tp.partition))


def cmd_describe(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    description = watch.result(
        admin,
        admin.describe_consumer_groups([args.group], request_timeout=TIMEOUT_S)[args.group],
        f"group {args.group}",
    )
    if state_name(description.state) == "Dead":  # Kafka's answer for a group it does not have
        raise ToolError(f"Consumer group '{args.group}' does not exist.")
    owners = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = member
    committed = [tp for tp in committed_offsets(admin, watch, args.group) if tp.offset >= 0]
    ends = _end_offsets(admin, watch, committed, OffsetSpec.latest())
    print(
        f"Group {args.group} is {state_name(description.state)} with {len(description.members)} member(s)."
    )
    rows: list[list[object]] = [
        [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
    ]
    for tp in committed:
        end = ends[(tp.topic, tp.partition)]
        owner = owners.get((tp.topic, tp.partition))
        rows.append(
            [
                args.group,
                tp.topic,
                tp.partition,
                tp.offset,
                end,
                max(end - tp.offset, 0),
                owner.member_id if owner else "-",
                owner.host if owner else "-",
                owner.client_id if owner else "-",
            ]
        )
    print(_table(rows))
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    status = 0
    for group, future in admin.delete_consumer_groups(
        args.group, request_timeout=TIMEOUT_S
    ).items():
        watch.wait(admin, future, f"deleting group {group}")
        try:
            future.result()
            print(f"Deleted group {group}.")
        except KafkaException as exc:
            print(f"Could not delete group {group}: {error_text(exc)}", file=sys.stderr)
            status = 1
    return status


def _partitions(admin: AdminClient, watch: BrokerWatch, topics: list[str]) -> list[TopicPartition]:
    metadata = watch.metadata(admin)
    out = []
    for item in topics:
        name, _, parts = item.partition(":")
        if name not in metadata.topics or metadata.topics[name].error is not None:
            raise ToolError(f"topic {name} does not exist")
        try:
            numbers = (
                [int(p) for p in parts.split(",")]
                if parts
                else sorted(metadata.topics[name].partitions)
            )
        except ValueError:
            raise ToolError(f"--topic {item}: partitions must be numbers, TOPIC:P1,P2") from None
        out += [TopicPartition(name, p) for p in numbers]
    return out


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    partitions = _partitions(admin, watch, args.topic)
    earliest = _end_offsets(admin, watch, partitions, OffsetSpec.earliest())
    latest = _end_offsets(admin, watch, partitions, OffsetSpec.latest())
    if args.to_earliest:
        targets = earliest
    elif args.to_latest:
        targets = latest
    elif args.to_datetime is not None:
        try:
            ms = int(datetime.fromisoformat(args.to_datetime).timestamp() * 1000)
        except ValueError:
            raise ToolError(f"--to-datetime {args.to_datetime}: not an ISO 8601 time") from None
        by_time = _end_offsets(admin, watch, partitions, OffsetSpec.for_timestamp(ms))
        # No record at or after the time: the end of the log, as Kafka's tool does.
        targets = {k: (v if v >= 0 else latest[k]) for k, v in by_time.items()}
    else:
        # A given offset is clamped into the partition's current range.
        targets = {k: min(max(args.to_offset, earliest[k]), latest[k]) for k in latest}
    rows: list[list[object]] = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[args.group, t, p, targets[(t, p)]] for t, p in sorted(targets)]
    print(_table(rows))
    if not args.execute:
        print("Dry run: nothing committed (use --execute).")
        return 0
    request = ConsumerGroupTopicPartitions(
        args.group, [TopicPartition(t, p, o) for (t, p), o in targets.items()]
    )
    future = admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[args.group]
    watch.result(admin, future, f"resetting the offsets of {args.group} (is the group empty?)")
    return 0
