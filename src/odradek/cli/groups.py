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

from odradek.cli.client_options import add_connection_args, client_config

TIMEOUT_S = 30


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
    p.add_argument("--group", required=True)
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("delete", help="delete groups with no members (and their offsets)")
    add_connection_args(p)
    p.add_argument("--group", action="append", required=True, help="repeatable")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser(
        "reset-offsets", help="move a group's committed offsets (dry run unless --execute)"
    )
    add_connection_args(p)
    p.add_argument("--group", required=True)
    p.add_argument(
        "--topic",
        action="append",
        required=True,
        help="TOPIC or TOPIC:P1,P2 (repeatable); all partitions when none are named",
    )
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int)
    target.add_argument("--to-datetime", help="ISO 8601, e.g. 2024-01-31T12:00:00+00:00")
    p.add_argument(
        "--execute", action="store_true", help="commit the new offsets (default: dry run)"
    )
    p.set_defaults(func=cmd_reset_offsets)


def _admin(args: argparse.Namespace) -> AdminClient:
    return AdminClient(client_config(args))


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


def _state_name(state) -> str:
    return next((kafka for kafka, enum in _STATE_NAMES.items() if enum == state.name), state.name)


def cmd_list(args: argparse.Namespace) -> int:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType

    admin = _admin(args)
    lowered = {k.lower(): v for k, v in _STATE_NAMES.items()}
    try:
        states = {ConsumerGroupState[lowered[s.lower()]] for s in args.state}
    except KeyError as exc:
        print(f"unknown state {exc.args[0]}; one of {', '.join(_STATE_NAMES)}", file=sys.stderr)
        return 2
    # ListGroups v5 (KIP-848): classic or consumer protocol groups.
    types = {ConsumerGroupType[t.upper()] for t in args.type}
    result = admin.list_consumer_groups(
        states=states, types=types, request_timeout=TIMEOUT_S
    ).result()
    rows = [["GROUP", "TYPE", "STATE"]] + sorted(
        [g.group_id, g.type.name.lower(), _state_name(g.state)] for g in result.valid
    )
    print(_table(rows))
    return 0


def _end_offsets(
    admin: AdminClient, partitions: list[TopicPartition], spec
) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets(
        {TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
        request_timeout=TIMEOUT_S,
    )
    return {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}


def committed_offsets(admin: AdminClient, group: str) -> list[TopicPartition]:
    future = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S
    )
    return sorted(future[group].result().topic_partitions, key=lambda tp: (tp.topic, tp.partition))


def cmd_describe(args: argparse.Namespace) -> int:
    admin = _admin(args)
    description = admin.describe_consumer_groups([args.group], request_timeout=TIMEOUT_S)[
        args.group
    ].result()
    owners = {}
    for member in description.members:
        for tp in member.assignment.topic_partitions if member.assignment else []:
            owners[(tp.topic, tp.partition)] = member
    committed = [tp for tp in committed_offsets(admin, args.group) if tp.offset >= 0]
    ends = _end_offsets(admin, committed, OffsetSpec.latest())
    print(
        f"Group {args.group} is {_state_name(description.state)} with {len(description.members)} member(s)."
    )
    rows = [
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
    admin = _admin(args)
    status = 0
    for group, future in admin.delete_consumer_groups(
        args.group, request_timeout=TIMEOUT_S
    ).items():
        try:
            future.result()
            print(f"Deleted group {group}.")
        except KafkaException as exc:
            print(f"Could not delete group {group}: {exc.args[0].str()}", file=sys.stderr)
            status = 1
    return status


def _partitions(admin: AdminClient, topics: list[str]) -> list[TopicPartition]:
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    out = []
    for item in topics:
        name, _, parts = item.partition(":")
        if name not in metadata.topics or metadata.topics[name].error is not None:
            raise SystemExit(f"unknown topic {name}")
        numbers = (
            [int(p) for p in parts.split(",")]
            if parts
            else sorted(metadata.topics[name].partitions)
        )
        out += [TopicPartition(name, p) for p in numbers]
    return out


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    admin = _admin(args)
    partitions = _partitions(admin, args.topic)
    earliest = _end_offsets(admin, partitions, OffsetSpec.earliest())
    latest = _end_offsets(admin, partitions, OffsetSpec.latest())
    if args.to_earliest:
        targets = earliest
    elif args.to_latest:
        targets = latest
    elif args.to_datetime is not None:
        ms = int(datetime.fromisoformat(args.to_datetime).timestamp() * 1000)
        by_time = _end_offsets(admin, partitions, OffsetSpec.for_timestamp(ms))
        # No record at or after the time: the end of the log, as Kafka's tool does.
        targets = {k: (v if v >= 0 else latest[k]) for k, v in by_time.items()}
    else:
        # A given offset is clamped into the partition's current range.
        targets = {k: min(max(args.to_offset, earliest[k]), latest[k]) for k in latest}
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
    rows += [[args.group, t, p, targets[(t, p)]] for t, p in sorted(targets)]
    print(_table(rows))
    if not args.execute:
        print("Dry run: nothing committed (use --execute).")
        return 0
    request = ConsumerGroupTopicPartitions(
        args.group, [TopicPartition(t, p, o) for (t, p), o in targets.items()]
    )
    try:
        admin.alter_consumer_group_offsets([request], request_timeout=TIMEOUT_S)[
            args.group
        ].result()
    except KafkaException as exc:
        print(
            f"Could not reset offsets of {args.group} (is the group empty?): {exc.args[0].str()}",
            file=sys.stderr,
        )
        return 1
    return 0
