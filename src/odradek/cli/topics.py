"""``odradek topics create|list|describe|alter|delete``: kafka-topics.sh for any Kafka-compatible broker."""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import Future

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from odradek.cli.broker_calls import TIMEOUT_S, BrokerWatch, admin_client, error_text
from odradek.cli.client_options import add_connection_args, add_key_value_arg


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics")
    actions = parser.add_subparsers(dest="topics_action", required=True)

    create = actions.add_parser("create", help="create a topic")
    add_connection_args(create)
    create.add_argument("--topic", required=True, help="name of the new topic")
    create.add_argument(
        "--partitions", type=int, default=-1, help="default: the broker's num.partitions"
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="default: the broker's default.replication.factor",
    )
    add_key_value_arg(
        create, "--config", help="a topic config, e.g. cleanup.policy=compact; repeatable"
    )
    create.add_argument(
        "--if-not-exists", action="store_true", help="succeed when the topic already exists"
    )
    create.add_argument(
        "--validate-only", action="store_true", help="check the request, create nothing"
    )
    create.set_defaults(func=_create)

    listing = actions.add_parser("list", help="list topic names")
    add_connection_args(listing)
    listing.add_argument(
        "--exclude-internal", action="store_true", help="leave out topics whose names start with __"
    )
    listing.set_defaults(func=_list)

    describe = actions.add_parser(
        "describe", help="partitions, leaders, replicas and overridden configs"
    )
    add_connection_args(describe)
    describe.add_argument(
        "--topic", action="append", default=[], help="repeatable; default: all topics"
    )
    describe.add_argument(
        "--exclude-internal", action="store_true", help="leave out topics whose names start with __"
    )
    describe.set_defaults(func=_describe)

    alter = actions.add_parser("alter", help="increase a topic's partition count")
    add_connection_args(alter)
    alter.add_argument("--topic", required=True, help="topic to change")
    alter.add_argument(
        "--partitions", type=int, required=True, help="the new total partition count"
    )
    alter.set_defaults(func=_alter)

    delete = actions.add_parser("delete", help="delete topics")
    add_connection_args(delete)
    delete.add_argument("--topic", action="append", required=True, help="repeatable")
    delete.add_argument(
        "--if-exists", action="store_true", help="succeed when a topic does not exist"
    )
    delete.set_defaults(func=_delete)


def _wait(
    admin: AdminClient,
    watch: BrokerWatch,
    futures: dict[str, Future],
    ignore: frozenset[str] = frozenset(),
) -> int:
    """Print one line per failed topic; return 1 if any failed with an error not in ``ignore``."""
    status = 0
    for name, future in futures.items():
        watch.wait(admin, future, f"topic {name}")
        try:
            future.result()
        except KafkaException as exc:
            if exc.args[0].name() in ignore:
                continue
            print(f"Error for {name}: {error_text(exc)}", file=sys.stderr)
            status = 1
    return status


def _create(args: argparse.Namespace) -> int:
    topic = NewTopic(
        args.topic,
        num_partitions=args.partitions,
        replication_factor=args.replication_factor,
        config=dict(args.config),
    )
    admin, watch = admin_client(args)  # must outlive the futures: a destroyed handle fails them
    futures = admin.create_topics(
        [topic], validate_only=args.validate_only, operation_timeout=TIMEOUT_S
    )
    ignore = frozenset({"TOPIC_ALREADY_EXISTS"}) if args.if_not_exists else frozenset()
    status = _wait(admin, watch, futures, ignore)
    if status == 0:
        verb = "Validated" if args.validate_only else "Created"
        print(f"{verb} topic {args.topic}.")
    return status


def _topic_names(metadata, exclude_internal: bool) -> list[str]:
    names = sorted(metadata.topics)
    if exclude_internal:
        names = [n for n in names if not n.startswith("__")]
    return names


def _list(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    for name in _topic_names(watch.metadata(admin), args.exclude_internal):
        print(name)
    return 0


def _describe(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    metadata = watch.metadata(admin)
    names = args.topic or _topic_names(metadata, args.exclude_internal)
    missing = [n for n in names if n not in metadata.topics or metadata.topics[n].error is not None]
    if missing:
        print(f"Error: topic(s) {', '.join(missing)} do not exist", file=sys.stderr)
        return 1
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    configs = admin.describe_configs(resources) if resources else {}
    overrides = {
        resource.name: watch.result(admin, future, f"the configs of topic {resource.name}")
        for resource, future in configs.items()
    }
    for name in names:
        topic = metadata.topics[name]
        partitions = [topic.partitions[p] for p in sorted(topic.partitions)]
        replication = len(partitions[0].replicas) if partitions else 0
        dynamic = ",".join(
            f"{entry.name}={entry.value}"
            for entry in sorted(overrides[name].values(), key=lambda e: e.name)
            if ConfigSource(entry.source) is ConfigSource.DYNAMIC_TOPIC_CONFIG
        )
        print(
            f"Topic: {name}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {replication}\tConfigs: {dynamic}"
        )
        for p in partitions:
            print(
                f"\tTopic: {name}\tPartition: {p.id}\tLeader: {p.leader}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isrs))}"
            )
    return 0


def _alter(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    futures = admin.create_partitions(
        [NewPartitions(args.topic, args.partitions)], operation_timeout=TIMEOUT_S
    )
    status = _wait(admin, watch, futures)
    if status == 0:
        print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return status


def _delete(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    futures = admin.delete_topics(args.topic, operation_timeout=TIMEOUT_S)
    ignore = frozenset({"UNKNOWN_TOPIC_OR_PART"}) if args.if_exists else frozenset()
    status = _wait(admin, watch, futures, ignore)
    if status == 0:
        print(f"Deleted topic(s) {', '.join(args.topic)}.")
    return status
