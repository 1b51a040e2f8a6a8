"""``odradek configs describe|alter``: kafka-configs.sh for topics and brokers on any Kafka-compatible broker.

A broker's configs can only be asked of that broker: a client sends the request to the node
the resource names and waits for it to appear in the metadata, so a broker id the cluster does
not have would wait the whole timeout. As kafka-configs.sh, the name must be an integer; and
the tool first checks the cluster's brokers, so an unknown id is one line at once. A config
without a value (``log.flush.interval.ms`` by default) prints as ``null``, as kafka-configs.sh
prints it.
"""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from odradek.cli.broker_calls import BrokerWatch, admin_client
from odradek.cli.client_options import add_connection_args
from odradek.cli.errors import ToolError

ENTITY_TYPES = {"topics": ResourceType.TOPIC, "brokers": ResourceType.BROKER}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("configs", help="describe and alter topic and broker configs")
    actions = parser.add_subparsers(dest="configs_action", required=True)

    describe = actions.add_parser("describe", help="show configs (only overrides unless --all)")
    _add_entity_args(describe)
    describe.add_argument("--all", action="store_true", help="every config, with its source")
    describe.set_defaults(func=_describe)

    alter = actions.add_parser(
        "alter", help="set or remove dynamic configs (IncrementalAlterConfigs)"
    )
    _add_entity_args(alter)
    alter.add_argument("--add-config", default="", metavar="K1=V1,K2=V2", help="configs to set")
    alter.add_argument("--delete-config", default="", metavar="K1,K2", help="configs to remove")
    alter.set_defaults(func=_alter)


def _add_entity_args(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser)
    parser.add_argument(
        "--entity-type",
        choices=sorted(ENTITY_TYPES),
        required=True,
        help="kind of resource: a topic or a broker",
    )
    parser.add_argument(
        "--entity-name",
        required=True,
        help="topic name or broker id",
    )


def parse_config_list(text: str) -> dict[str, str]:
    """``k1=v1,k2=[a,b]``: like kafka-configs, square brackets protect commas in a value."""
    configs: dict[str, str] = {}
    item, depth = "", 0
    for ch in text + ",":
        if ch == "," and depth == 0:
            if item.strip():
                key, sep, value = item.partition("=")
                if not sep:
                    raise ValueError(f"expected key=value in --add-config, got {item!r}")
                configs[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
            item = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        item += ch
    return configs


def _resource(
    args: argparse.Namespace, incremental_configs: list[ConfigEntry] | None = None
) -> ConfigResource:
    """The resource to describe or alter; ToolError for an empty name, which librdkafka refuses.

    Kafka's cluster-wide default broker resource is named "", and librdkafka (hence
    confluent-kafka) will not build a resource without a name, so this tool cannot reach it:
    the broker serves it to other admin clients (kafka-configs.sh --entity-default).
    """
    if not args.entity_name:
        raise ToolError(
            "--entity-name is empty: librdkafka cannot address the cluster-wide default; "
            "use another Kafka admin client (kafka-configs.sh --entity-default)"
        )
    return ConfigResource(
        ENTITY_TYPES[args.entity_type], args.entity_name, incremental_configs=incremental_configs
    )


def _entity(args: argparse.Namespace) -> str:
    return f"{args.entity_type[:-1]} {args.entity_name}"


def _check_broker(admin, watch: BrokerWatch, args: argparse.Namespace) -> None:
    """ToolError unless a brokers entity names a broker of the cluster (see the module docstring)."""
    if args.entity_type != "brokers" or args.entity_name == "":
        return
    try:
        broker_id = int(args.entity_name)
    except ValueError:
        raise ToolError(
            f"The entity name for brokers must be a valid integer broker id, found: {args.entity_name}"
        ) from None
    brokers = watch.metadata(admin).brokers
    if broker_id not in brokers:
        known = ", ".join(str(b) for b in sorted(brokers))
        raise ToolError(f"broker {broker_id} is not in the cluster (its brokers: {known})")


def _describe(args: argparse.Namespace) -> int:
    admin, watch = admin_client(args)
    _check_broker(admin, watch, args)
    (future,) = admin.describe_configs([_resource(args)]).values()
    entries = watch.result(admin, future, f"the configs of {_entity(args)}")
    overrides = {ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG}
    print(f"Configs for {_entity(args)}:")
    for entry in sorted(entries.values(), key=lambda e: e.name):
        source = ConfigSource(entry.source)
        if args.all or source in overrides:
            print(f"  {_format_entry(entry)} source={source.name}")
    return 0


def _format_entry(entry: ConfigEntry) -> str:
    value = "<sensitive>" if entry.is_sensitive else "null" if entry.value is None else entry.value
    return f"{entry.name}={value}"


def _alter(args: argparse.Namespace) -> int:
    try:
        to_set = parse_config_list(args.add_config)
    except ValueError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    to_delete = [k.strip() for k in args.delete_config.split(",") if k.strip()]
    if not to_set and not to_delete:
        print("Error: give --add-config and/or --delete-config", file=sys.stderr)
        return 2
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in to_set.items()
    ] + [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in to_delete]
    resource = _resource(args, entries)
    admin, watch = admin_client(args)
    _check_broker(admin, watch, args)
    (future,) = admin.incremental_alter_configs([resource]).values()
    watch.result(admin, future, f"altering the configs of {_entity(args)}")
    print(f"Completed updating config for {_entity(args)}.")
    return 0
