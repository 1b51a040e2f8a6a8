"""What handlers ask about authorization: Kafka's AuthHelper, over ``Broker.authorizer``.

Without ``authorizer.class.name`` the broker has no authorizer and every question is
answered yes, as Kafka's ``authorizer.forall``. With one, each question names the caller's
principal and address (``ctx.connection``) and a literal resource; the decision is the
authorizer's (``security.authorizer``, StandardAuthorizer's rules).

Authorized operations: Metadata, DescribeCluster, DescribeGroups, ConsumerGroupDescribe
and DescribeTopicPartitions can ask which operations the caller may perform on a
resource. Kafka answers with a 32-bit field, bit n set for the AclOperation of code n,
over the operations that apply to the resource type (AclEntry.supportedOperations)
the authorizer allows; not asking is answered with Int32.MIN_VALUE.

A request refused as a whole (a CLUSTER operation, a group, a transactional id) gets the
response Kafka's getErrorResponse builds, with the error in every error field
(``denied``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, Protocol

from odradek.network.listener import ConnectionInfo
from odradek.protocol import schemas
from odradek.protocol.error_response import error_response
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourceType,
)

__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "CLUSTER_NAME",
    "AclOperation",
    "Authorizer",
    "ResourceType",
    "authorize",
    "authorize_by_resource_type",
    "authorized_operations",
    "denied",
    "filter_authorized",
    "group_refusal",
    "refusal",
]

#: What Kafka answers when the client did not ask for authorized operations.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


class Authorizer(Protocol):
    """What the broker asks an authorizer (Kafka's Authorizer, one literal resource at a time)."""

    def authorize(
        self,
        connection: ConnectionInfo,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        """Whether the connection's principal, from its address, may perform the operation
        (a denial is audit-logged unless ``log_denied`` is false)."""

    def authorize_by_resource_type(
        self, connection: ConnectionInfo, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type may allow the operation (authorizeByResourceType)."""

    def acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        """The stored bindings ``selection`` matches (DescribeAcls)."""

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Store valid bindings durably (CreateAcls)."""

    def delete_acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        """Remove the bindings ``selection`` matches and return them (DeleteAcls)."""


def to_bit_field(operations: Iterable[AclOperation]) -> int:
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

    @property
    def api_version(self) -> int: ...

    @property
    def header(self) -> Any: ...


def authorize(
    ctx: _Request,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    log_denied: bool = True,
) -> bool:
    """AuthHelper.authorize: one operation on one literal resource."""
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize(
        ctx.connection, operation, resource_type, name, log_denied
    )


def authorize_cluster(ctx: _Request, operation: AclOperation, log_denied: bool = True) -> bool:
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied)


def filter_authorized(
    ctx: _Request,
    operation: AclOperation,
    resource_type: ResourceType,
    names: Iterable[str],
    log_denied: bool = True,
) -> set[str]:
    """AuthHelper.filterByAuthorized: the names the operation is allowed on (each asked once)."""
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return set(names)
    connection = ctx.connection
    return {
        name
        for name in set(names)
        if authorizer.authorize(connection, operation, resource_type, name, log_denied)
    }


def authorize_by_resource_type(
    ctx: _Request, operation: AclOperation, resource_type: ResourceType
) -> bool:
    authorizer = ctx.broker.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(
        ctx.connection, operation, resource_type
    )


def authorized_operations(
    ctx: _Request, resource_type: ResourceType, name: str, requested: bool = True
) -> int:
    """The authorized-operations field for one resource, or the "not requested" marker."""
    if not requested:
        return AUTHORIZED_OPERATIONS_OMITTED
    supported: Collection[AclOperation] = SUPPORTED_OPERATIONS[resource_type]
    return to_bit_field(
        op for op in supported if authorize(ctx, op, resource_type, name, log_denied=False)
    )


def cluster_authorized_operations(ctx: _Request, requested: bool) -> int:
    """The cluster's authorized operations (Metadata, DescribeCluster): 0 without DESCRIBE on
    it, as AuthHelper.computeDescribeClusterResponse answers."""
    if requested and not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME, requested)


def refusal(
    ctx: _Request,
    request: Any,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
    error_code: ErrorCode,
) -> Any | None:
    """None if the operation is allowed, else the request's error response with ``error_code``
    (a handler returns it at once: the request is refused as a whole)."""
    if authorize(ctx, operation, resource_type, name):
        return None
    return denied(ctx, request, error_code)


def group_refusal(ctx: _Request, request: Any, operation: AclOperation) -> Any | None:
    """``refusal`` for the group the request names (``request.group_id``)."""
    return refusal(
        ctx,
        request,
        operation,
        ResourceType.GROUP,
        request.group_id,
        ErrorCode.group_authorization_failed,
    )


def denied(ctx: _Request, request: Any, error_code: ErrorCode) -> Any:
    """The whole request refused with ``error_code``, as Kafka's getErrorResponse answers."""
    response_schema = schemas.response_schema(ctx.header.api_key, ctx.api_version)
    return error_response(response_schema, request, error_code)
