"""Authorized operations: the bit sets Kafka reports to clients that ask for them.

Metadata, DescribeCluster, DescribeGroups, ConsumerGroupDescribe and
DescribeTopicPartitions can ask which operations the caller may perform on a
resource. Kafka answers with a 32-bit field, bit n set for the AclOperation of
code n, over the operations that apply to the resource type (its
AclEntry.supportedOperations); an authorizer filters that set, and with no
authorizer configured every applicable operation is reported. Not asking is
answered with Int32.MIN_VALUE.

This module is the one place that decision is made: handlers call
``authorized_operations`` and a future authorizer (``authorizer.class.name``)
plugs in as ``Broker.authorizer`` without touching them.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import IntEnum
from typing import Protocol

from odradek.network.listener import ConnectionInfo

#: What Kafka answers when the client did not ask for authorized operations.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (the bit positions of the authorized-operations field)."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(IntEnum):
    """Kafka's ResourceType codes for the resources whose operations clients ask about."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4


#: The name Kafka gives the single CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"

_Op = AclOperation

#: Kafka's AclEntry.supportedOperations per resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            _Op.READ,
            _Op.WRITE,
            _Op.CREATE,
            _Op.DESCRIBE,
            _Op.DELETE,
            _Op.ALTER,
            _Op.DESCRIBE_CONFIGS,
            _Op.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            _Op.CREATE,
            _Op.CLUSTER_ACTION,
            _Op.DESCRIBE_CONFIGS,
            _Op.ALTER_CONFIGS,
            _Op.IDEMPOTENT_WRITE,
            _Op.ALTER,
            _Op.DESCRIBE,
        }
    ),
}


class Authorizer(Protocol):
    """What the broker asks an authorizer (Kafka's Authorizer.authorize, one resource at a time)."""

    def authorized(
        self,
        connection: ConnectionInfo,
        resource_type: ResourceType,
        name: str,
        operations: Collection[AclOperation],
    ) -> Collection[AclOperation]:
        """The subset of ``operations`` the connection's principal may perform on the resource
        (the connection carries what Kafka's AuthorizableRequestContext does: listener, address)."""


def to_bit_field(operations: Collection[AclOperation]) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation."""
    field = 0
    for op in operations:
        field |= 1 << op
    return field


class _Broker(Protocol):
    @property
    def authorizer(self) -> Authorizer | None: ...


class _Request(Protocol):
    """The parts of a RequestContext used here (naming the class would close an import circle:
    the context names the Authorizer)."""

    @property
    def broker(self) -> _Broker: ...

    @property
    def connection(self) -> ConnectionInfo: ...


def authorized_operations(
    ctx: _Request, resource_type: ResourceType, name: str, requested: bool = True
) -> int:
    """The authorized-operations field for one resource, or the "not requested" marker."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer: Authorizer | None = ctx.broker.authorizer
    if authorizer is None:
        return to_bit_field(supported)
    return to_bit_field(authorizer.authorized(ctx.connection, resource_type, name, supported))
