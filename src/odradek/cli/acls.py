"""``odradek acls add|list|remove``: kafka-acls.sh over the Admin API of any Kafka-compatible broker.

The options are kafka-acls.sh's (AclCommand): resources by ``--topic``, ``--group``,
``--cluster``, ``--transactional-id`` (each repeatable), ``--resource-pattern-type``,
principals by ``--allow-principal`` / ``--deny-principal`` with ``--allow-host`` /
``--deny-host`` ("*" when a principal is given without hosts), ``--operation`` (repeatable,
All by default), and the ``--producer`` / ``--consumer`` shortcuts that grant what a
producer (WRITE, DESCRIBE, CREATE on topics; IDEMPOTENT_WRITE with ``--idempotent``; WRITE,
DESCRIBE on a transactional id) or a consumer (READ, DESCRIBE on topics, READ on the group)
needs. As kafka-acls.sh, an operation the resource type does not have is refused before
anything is sent. ``remove`` removes at once (kafka-acls.sh asks first unless ``--force``;
``--force`` is accepted). ``list`` prints in kafka-acls.sh's format.

The calls are confluent-kafka's create_acls, describe_acls and delete_acls.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from enum import Enum

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from odradek.cli.broker_calls import admin_client
from odradek.cli.client_options import add_connection_args
from odradek.cli.errors import ToolError

CLUSTER_NAME = "kafka-cluster"
#: AclEntry.supportedOperations, by confluent-kafka's resource type (BROKER is Kafka's CLUSTER).
SUPPORTED = {
    ResourceType.TOPIC: {"READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER"}
    | {"DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    ResourceType.GROUP: {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"},
    ResourceType.BROKER: {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
    | {"IDEMPOTENT_WRITE", "ALTER", "DESCRIBE"},
    ResourceType.TRANSACTIONAL_ID: {"DESCRIBE", "WRITE"},
}
#: kafka-acls.sh's names for resource types in its output.
TYPE_NAMES = {
    ResourceType.TOPIC: "TOPIC",
    ResourceType.GROUP: "GROUP",
    ResourceType.BROKER: "CLUSTER",
    ResourceType.TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("acls", help="add, list and remove ACLs (kafka-acls.sh)")
    actions = parser.add_subparsers(dest="acls_action", required=True)
    add = actions.add_parser("add", help="create ACLs (CreateAcls)")
    _add_args(add, listing=False)
    add.set_defaults(func=_add)
    listing = actions.add_parser("list", help="show ACLs (DescribeAcls)")
    _add_args(listing, listing=True)
    listing.set_defaults(func=_list)
    remove = actions.add_parser("remove", help="delete ACLs (DeleteAcls)")
    _add_args(remove, listing=False)
    remove.add_argument("--force", action="store_true", help="accepted; nothing is asked")
    remove.set_defaults(func=_remove)


def _add_args(parser: argparse.ArgumentParser, listing: bool) -> None:
    add_connection_args(parser)
    parser.add_argument("--topic", action="append", default=[], help="a topic (repeatable)")
    parser.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster resource")
    parser.add_argument(
        "--transactional-id", action="append", default=[], help="a transactional id (repeatable)"
    )
    choices = ["literal", "prefixed", "any", "match"]  # add refuses the last two itself
    parser.add_argument(
        "--resource-pattern-type",
        choices=choices,
        default="any" if listing else None,
        help="how resource names match: literal (default for add), prefixed; any or match "
        "to select (list, remove)",
    )
    if listing:
        parser.add_argument("--principal", help="only ACLs of this principal")
        return
    for kind in ("allow", "deny"):
        parser.add_argument(
            f"--{kind}-principal",
            action="append",
            default=[],
            help=f"principal to {kind} (User:name; repeatable)",
        )
        parser.add_argument(
            f"--{kind}-host",
            action="append",
            default=[],
            help=f"host to {kind} from (default * with a principal; repeatable)",
        )
    parser.add_argument(
        "--operation",
        action="append",
        default=[],
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, All (repeatable; default All)",
    )
    parser.add_argument("--producer", action="store_true", help="a producer's ACLs")
    parser.add_argument("--consumer", action="store_true", help="a consumer's ACLs")
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE"
    )


def _operation(name: str) -> AclOperation:
    """``Read``, ``READ``, ``ClusterAction``, ``cluster_action`` -> the operation."""
    wanted = name.replace("_", "").replace("-", "").upper()
    for op in AclOperation:
        if op.name.replace("_", "") == wanted and op not in (
            AclOperation.UNKNOWN,
            AclOperation.ANY,
        ):
            return op
    raise ToolError(f"unknown operation {name!r}")


def _pattern_type(args: argparse.Namespace, default: str) -> ResourcePatternType:
    return ResourcePatternType[(args.resource_pattern_type or default).upper()]


def _resources(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, name) for name in args.topic]
    resources += [(ResourceType.GROUP, name) for name in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    if args.cluster:
        resources.append((ResourceType.BROKER, CLUSTER_NAME))
    return resources


def _operations_by_resource(args: argparse.Namespace) -> dict[tuple, set[AclOperation]]:
    """What each resource is granted or denied: --producer/--consumer, else --operation."""
    resources = _resources(args)
    if not resources:
        raise ToolError("give a resource: --topic, --group, --cluster or --transactional-id")
    wanted: dict[tuple, set[AclOperation]] = {}
    if args.producer or args.consumer:
        topics = [r for r in resources if r[0] == ResourceType.TOPIC]
        if not topics:
            raise ToolError("--producer and --consumer need --topic")
        for resource in topics:
            ops = wanted.setdefault(resource, set())
            if args.producer:
                ops |= {AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE}
            if args.consumer:
                ops |= {AclOperation.READ, AclOperation.DESCRIBE}
        for resource in resources:
            if resource[0] == ResourceType.GROUP and args.consumer:
                wanted[resource] = {AclOperation.READ}
            if resource[0] == ResourceType.TRANSACTIONAL_ID and args.producer:
                wanted[resource] = {AclOperation.WRITE, AclOperation.DESCRIBE}
        if args.consumer and not any(r[0] == ResourceType.GROUP for r in resources):
            raise ToolError("--consumer needs --group")
        if args.producer and args.idempotent:
            wanted[(ResourceType.BROKER, CLUSTER_NAME)] = {AclOperation.IDEMPOTENT_WRITE}
        return wanted
    ops = {_operation(name) for name in args.operation} or {AclOperation.ALL}
    for resource_type, name in resources:
        unsupported = sorted(
            op.name
            for op in ops
            if op != AclOperation.ALL and op.name not in SUPPORTED[resource_type]
        )
        if unsupported:
            raise ToolError(
                f"ResourceType {TYPE_NAMES[resource_type]} only supports operations "
                f"{', '.join(sorted(SUPPORTED[resource_type]))}; not {', '.join(unsupported)}"
            )
        wanted[(resource_type, name)] = set(ops)
    return wanted


def _entries(args: argparse.Namespace) -> list[tuple[str, str, AclPermissionType]]:
    """(principal, host, permission) from --allow-/--deny-principal and their hosts."""
    entries: list[tuple[str, str, AclPermissionType]] = []
    for kind, permission in (("allow", AclPermissionType.ALLOW), ("deny", AclPermissionType.DENY)):
        principals = getattr(args, f"{kind}_principal")
        hosts = getattr(args, f"{kind}_host") or ["*"]
        if getattr(args, f"{kind}_host") and not principals:
            raise ToolError(f"--{kind}-host needs --{kind}-principal")
        for principal in principals:
            if ":" not in principal:
                raise ToolError(f"principal {principal!r} is not of the form Type:name")
            entries.extend((principal, host, permission) for host in hosts)
    return entries


def _add(args: argparse.Namespace) -> int:
    pattern_type = _pattern_type(args, "literal")
    if pattern_type not in (ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED):
        raise ToolError("--resource-pattern-type must be literal or prefixed when adding")
    entries = _entries(args)
    if not entries:
        raise ToolError("give --allow-principal or --deny-principal")
    bindings = [
        AclBinding(resource_type, name, pattern_type, principal, host, op, permission)
        for (resource_type, name), ops in _operations_by_resource(args).items()
        for op in sorted(ops, key=lambda o: o.value)
        for principal, host, permission in entries
    ]
    bindings = list(dict.fromkeys(bindings))  # confluent-kafka refuses duplicates
    admin, watch = admin_client(args)
    for binding, future in admin.create_acls(bindings).items():
        watch.result(admin, future, f"creating {_describe_binding(binding)}")
    print(f"Adding ACLs for {len(bindings)} binding(s):")
    _print(bindings)
    return 0


def _remove(args: argparse.Namespace) -> int:
    pattern_type = _pattern_type(args, "literal")
    entries = _entries(args)
    principal_filters: Iterable[tuple[str | None, str | None, AclPermissionType]] = entries or [
        (None, None, AclPermissionType.ANY)
    ]
    operations = {_operation(name) for name in args.operation} if args.operation else None
    # A filter's None matches any value (confluent-kafka's documented use; its annotation says str).
    filters = [
        AclBindingFilter(resource_type, name, pattern_type, principal, host, op, permission)  # type: ignore[arg-type]
        for (resource_type, name), ops in _operations_by_resource(args).items()
        for op in (
            sorted(ops, key=lambda o: o.value)
            if operations is not None or args.producer or args.consumer
            else [AclOperation.ANY]
        )
        for principal, host, permission in principal_filters
    ]
    admin, watch = admin_client(args)
    removed: list[AclBinding] = []
    for selection, future in admin.delete_acls(list(dict.fromkeys(filters))).items():
        removed += watch.result(admin, future, f"removing ACLs matching {selection}")
    print(f"Removed {len(removed)} ACL(s):")
    _print(removed)
    return 0


def _list(args: argparse.Namespace) -> int:
    pattern_type = _pattern_type(args, "any")
    resources: list[tuple[ResourceType, str | None]] = [*_resources(args)] or [
        (ResourceType.ANY, None)
    ]
    admin, watch = admin_client(args)
    found: list[AclBinding] = []
    for resource_type, name in resources:
        selection = AclBindingFilter(  # None matches any value, as in _remove
            resource_type,
            name,  # type: ignore[arg-type]
            pattern_type,
            args.principal,
            None,  # type: ignore[arg-type]
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        future = admin.describe_acls(selection)
        found += watch.result(admin, future, "the ACLs")
    _print(found)
    return 0


def _name(value: object) -> str:
    """An AclBinding field's name (confluent-kafka types its fields as enum, str or int)."""
    return value.name if isinstance(value, Enum) else str(value)


def _kind(restype: object) -> str:
    """kafka-acls.sh's name of a resource type."""
    return (
        TYPE_NAMES.get(restype, restype.name)
        if isinstance(restype, ResourceType)
        else _name(restype)
    )


def _code(value: object) -> int:
    """What an AclBinding field sorts by: its enum's code (describe_acls answers enums)."""
    return int(value.value) if isinstance(value, Enum) else -1


def _describe_binding(binding: AclBinding) -> str:
    return (
        f"{_name(binding.permission_type)} {binding.principal} {_name(binding.operation)} on "
        f"{_kind(binding.restype)}:{binding.name}"
    )


def _print(bindings: Iterable[AclBinding]) -> None:
    """kafka-acls.sh's listing: each resource pattern, then its entries."""
    by_resource: dict[tuple[object, str, object], list[AclBinding]] = {}
    for b in bindings:
        by_resource.setdefault((b.restype, b.name, b.resource_pattern_type), []).append(b)
    for (resource_type, name, pattern_type), entries in sorted(
        by_resource.items(),
        key=lambda item: (_code(item[0][0]), item[0][1], _code(item[0][2])),
    ):
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType={_kind(resource_type)}, "
            f"name={name}, patternType={_name(pattern_type)})`: "
        )
        for e in sorted(entries, key=lambda e: (e.principal, e.host, _code(e.operation))):
            print(
                f" \t(principal={e.principal}, host={e.host}, operation={_name(e.operation)}, "
                f"permissionType={_name(e.permission_type)})"
            )
        print()
