"""`odradek quotas describe|alter`: client quotas, as Kafka's kafka-configs.sh sets them.

``--entity-type users|clients`` with ``--entity-name NAME`` or ``--entity-default``, once
or twice (a user and a client id together), ``--add-config
producer_byte_rate=1048576,request_percentage=50`` and ``--delete-config key,key`` as
kafka-configs.sh takes them. confluent-kafka's AdminClient has no client quota calls, so
the tool sends DescribeClientQuotas and AlterClientQuotas itself (``wire_calls``) to the
first bootstrap server that answers; any broker of a cluster serves both. Describe prints
one line per entity, as kafka-configs.sh does; with entity types given it lists the
entities of exactly those types (a type without a name matches any name), without any it
lists every entity with quotas.
"""

from __future__ import annotations

import argparse
from typing import Any

from odradek.cli import wire_calls
from odradek.cli.client_options import add_connection_args, parse_key_value
from odradek.cli.errors import ToolError
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

CLIENT_ID = "odradek-quotas"
#: kafka-configs.sh's entity types -> the quota entity types of the protocol.
ENTITY_TYPES = {"users": "user", "clients": "client-id"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
#: An entity part of the command line: (protocol entity type, name; None for the default).
Part = tuple[str, str | None]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("quotas", help="describe and alter client quotas")
    sub = parser.add_subparsers(dest="quotas_command", required=True, metavar="ACTION")

    p = sub.add_parser("describe", help="the client quotas of users and client ids")
    _add_entity_args(p)
    add_connection_args(p)
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("alter", help="set or delete client quotas of an entity")
    _add_entity_args(p)
    p.add_argument(
        "--add-config",
        default="",
        metavar="KEY=VALUE,...",
        help="quotas to set: producer_byte_rate, consumer_byte_rate, request_percentage, "
        "controller_mutation_rate",
    )
    p.add_argument("--delete-config", default="", metavar="KEY,...", help="quotas to remove")
    add_connection_args(p)
    p.set_defaults(func=cmd_alter)


def _add_entity_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--entity-type",
        action="append",
        default=[],
        choices=sorted(ENTITY_TYPES),
        dest="entity_types",
        help="users or clients; twice for a user's quotas of one client id",
    )
    parser.add_argument(
        "--entity-name",
        action="append",
        default=[],
        dest="entity_names",
        help="the user or client id of the --entity-type before it",
    )
    parser.add_argument(
        "--entity-default",
        action="append_const",
        const=None,
        dest="entity_names",
        help="the default user or client id instead of --entity-name",
    )


def _parts(args: argparse.Namespace, names_needed: bool) -> list[Part | tuple[str, str]]:
    """The entity types with their names in command-line order (a type without a name is
    ``(type, "*")``: any name, for describe only)."""
    types, names = args.entity_types, args.entity_names
    if len(names) > len(types):
        raise ToolError("each --entity-name or --entity-default needs an --entity-type before it")
    if len(set(types)) != len(types):
        raise ToolError("an --entity-type can be given once")
    if names_needed and (not types or len(names) < len(types)):
        raise ToolError("alter needs --entity-type with --entity-name or --entity-default")
    parts: list[Part | tuple[str, str]] = [
        (ENTITY_TYPES[t], names[i]) if i < len(names) else (ENTITY_TYPES[t], "*")
        for i, t in enumerate(types)
    ]
    return parts


def _describe_entity(entity: Any) -> str:
    words = []
    for part in entity:
        kind = "user-principal" if part.entity_type == "user" else part.entity_type
        name = part.entity_name
        words.append(f"the default {kind}" if name is None else f"{kind} '{name}'")
    return ", ".join(words)


def _number(value: float) -> str:
    return repr(float(value))


def _call_any(args: argparse.Namespace, api_key: int, **fields: Any) -> Any:
    """Version 1 of the request (the nested parts are built from its module) to the first
    bootstrap server that answers."""
    security = wire_calls.security(args)
    last: ToolError | None = None
    for address in args.bootstrap_server.split(","):
        try:
            with wire_calls.connect(address.strip(), security, CLIENT_ID) as c:
                wire_calls.version(c, api_key, 1, 1)
                return c.request(schemas.build(schemas.request_schema(api_key, 1), **fields))
        except ToolError as exc:
            last = exc
    raise last or ToolError("no bootstrap server given")


def cmd_describe(args: argparse.Namespace) -> int:
    components = []
    for entity_type, name in _parts(args, names_needed=False):
        if name == "*":
            components.append({"entity_type": entity_type, "match_type": MATCH_ANY, "match": None})
        elif name is None:
            components.append(
                {"entity_type": entity_type, "match_type": MATCH_DEFAULT, "match": None}
            )
        else:
            components.append(
                {"entity_type": entity_type, "match_type": MATCH_EXACT, "match": name}
            )
    module = schemas.request_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1)
    response = _call_any(
        args,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        components=tuple(schemas.build(module.ComponentData, **c) for c in components),
        strict=bool(components),
    )
    if response.error_code != ErrorCode.none:
        raise ToolError(
            f"describe: {ErrorCode(response.error_code).name.upper()}: {response.error_message}"
        )
    for entry in sorted(response.entries, key=lambda e: _describe_entity(e.entity)):
        values = ", ".join(f"{v.key}={_number(v.value)}" for v in entry.values)
        print(f"Quota configs for {_describe_entity(entry.entity)} are {values}")
    return 0


def _ops(args: argparse.Namespace) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    for item in filter(None, (i.strip() for i in args.add_config.split(","))):
        try:
            key, text = parse_key_value(item)
            value = float(text)
        except (argparse.ArgumentTypeError, ValueError):
            raise ToolError(f"--add-config: expected key=number, got {item!r}") from None
        ops.append({"key": key, "value": value, "remove": False})
    for key in filter(None, (k.strip() for k in args.delete_config.split(","))):
        ops.append({"key": key, "value": 0.0, "remove": True})
    if not ops:
        raise ToolError("alter needs --add-config or --delete-config")
    return ops


def cmd_alter(args: argparse.Namespace) -> int:
    parts = _parts(args, names_needed=True)
    ops = _ops(args)
    module = schemas.request_module(ApiKey.ALTER_CLIENT_QUOTAS, 1)
    entry = schemas.build(
        module.EntryData,
        entity=tuple(
            schemas.build(module.EntityData, entity_type=t, entity_name=n) for t, n in parts
        ),
        ops=tuple(schemas.build(module.OpData, **op) for op in ops),
    )
    response = _call_any(args, ApiKey.ALTER_CLIENT_QUOTAS, entries=(entry,), validate_only=False)
    (result,) = response.entries
    if result.error_code != ErrorCode.none:
        name = ErrorCode(result.error_code).name.upper()
        raise ToolError(f"alter: {name}: {result.error_message}")
    print(f"Completed updating config for {_describe_entity(result.entity)}.")
    return 0
