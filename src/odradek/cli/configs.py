"""``odradek configs describe|alter``: kafka-configs.sh for topics and brokers on any Kafka-compatible broker."""

from __future__ import annotations

import argparse
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from odradek.cli.client_options import add_connection_args, client_config

TIMEOUT_S = 30.0
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
    parser.add_argument("--entity-type", choices=sorted(ENTITY_TYPES), required=True)
    parser.add_argument("--entity-name", required=True, help="topic name or broker id")


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


def _resource(args: argparse.Namespace) -> ConfigResource:
    return ConfigResource(ENTITY_TYPES[args.entity_type], args.entity_name)


def _describe(args: argparse.Namespace) -> int:
    admin = AdminClient(client_config(args))
    (future,) = admin.describe_configs([_resource(args)]).values()
    try:
        entries = future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        print(f"Error: {exc.args[0].str()}", file=sys.stderr)
        return 1
    overrides = {ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG}
    print(f"Configs for {args.entity_type[:-1]} {args.entity_name}:")
    for entry in sorted(entries.values(), key=lambda e: e.name):
        source = ConfigSource(entry.source)
        if args.all or source in overrides:
            print(f"  {_format_entry(entry)} source={source.name}")
    return 0


def _format_entry(entry: ConfigEntry) -> str:
    value = "<sensitive>" if entry.is_sensitive else entry.value
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
    resource = ConfigResource(
        ENTITY_TYPES[args.entity_type], args.entity_name, incremental_configs=entries
    )
    admin = AdminClient(client_config(args))
    (future,) = admin.incremental_alter_configs([resource]).values()
    try:
        future.result(timeout=TIMEOUT_S)
    except KafkaException as exc:
        print(f"Error: {exc.args[0].str()}", file=sys.stderr)
        return 1
    print(f"Completed updating config for {args.entity_type[:-1]} {args.entity_name}.")
    return 0
