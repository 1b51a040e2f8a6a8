"""CreateAcls (API 30), DescribeAcls (API 29) and DeleteAcls (API 31), as Kafka's AclApis.

Versions 1 to 3, as Kafka 4 serves them (v0, without pattern types, is gone, KIP-896).
Describe needs DESCRIBE on the CLUSTER, create and delete need ALTER there; refused, the
request gets CLUSTER_AUTHORIZATION_FAILED. Without an authorizer every answer carries
SECURITY_DISABLED. Each creation is checked on its own (``security.acl.binding_problem``:
INVALID_REQUEST with Kafka's message) and the valid ones are stored; each deletion filter
gets the bindings it matched and removed, or INVALID_REQUEST for a filter with UNKNOWN
parts. Codes a client sends that Kafka does not define read as UNKNOWN, as Kafka's
``fromCode`` reads them.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TypeVar

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    binding_problem,
)
from odradek.server.authorization import authorize_cluster, denied
from odradek.server.context import RequestContext

E = TypeVar("E", bound=IntEnum)

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _code(enum: type[E], value: int) -> E:
    """The member of code ``value``, or UNKNOWN (Kafka's fromCode)."""
    try:
        return enum(value)
    except ValueError:
        return enum["UNKNOWN"]


def _filter(item) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter, read as an AclBindingFilter."""
    return AclBindingFilter(
        ResourcePatternFilter(
            _code(ResourceType, item.resource_type_filter),
            item.resource_name_filter,
            _code(PatternType, item.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            item.principal_filter,
            item.host_filter,
            _code(AclOperation, item.operation),
            _code(AclPermissionType, item.permission_type),
        ),
    )


def _refusal(ctx: RequestContext) -> tuple[ErrorCode, str | None] | None:
    """Why CreateAcls or DeleteAcls cannot change anything: no ALTER on the cluster, or no
    authorizer; None when they can."""
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    if ctx.broker.authorizer is None:
        return ErrorCode.security_disabled, "No Authorizer is configured."
    return None


async def handle_describe_acls(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DESCRIBE_ACLS, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)
    authorizer = ctx.broker.authorizer
    error, message, resources = ErrorCode.none, None, ()
    selection = _filter(request)
    if authorizer is None:
        error, message = ErrorCode.security_disabled, _NO_AUTHORIZER
    elif (problem := selection.unknown_element()) is not None:
        error, message = ErrorCode.invalid_request, problem
    else:
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in authorizer.acls(selection):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        resources = tuple(
            schemas.build(
                module.DescribeAclsResource,
                resource_type=pattern.resource_type,
                resource_name=pattern.name,
                pattern_type=pattern.pattern_type,
                acls=tuple(
                    schemas.build(
                        module.AclDescription,
                        principal=e.principal,
                        host=e.host,
                        operation=e.operation,
                        permission_type=e.permission_type,
                    )
                    for e in entries
                ),
            )
            for pattern, entries in by_pattern.items()
        )
    return schemas.build(
        module.DescribeAclsResponse,
        throttle_time=0,
        error_code=error,
        error_message=message,
        resources=resources,
    )


def _create_response(module, results: list[tuple[ErrorCode, str | None]]) -> object:
    return schemas.build(
        module.CreateAclsResponse,
        throttle_time=0,
        results=tuple(
            schemas.build(module.AclCreationResult, error_code=code, error_message=message)
            for code, message in results
        ),
    )


async def handle_create_acls(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.CREATE_ACLS, ctx.api_version)
    refused = _refusal(ctx)
    if refused is not None:  # every creation answered with it, as getErrorResponse does
        return _create_response(module, [refused] * len(request.creations))
    authorizer = ctx.broker.authorizer
    assert authorizer is not None
    results, valid = [], []
    for creation in request.creations:
        binding = AclBinding(
            ResourcePattern(
                _code(ResourceType, creation.resource_type),
                creation.resource_name,
                _code(PatternType, creation.resource_pattern_type),
            ),
            AccessControlEntry(
                creation.principal,
                creation.host,
                _code(AclOperation, creation.operation),
                _code(AclPermissionType, creation.permission_type),
            ),
        )
        problem = binding_problem(binding)
        if problem is None:
            valid.append(binding)
        results.append(problem)
    authorizer.create_acls(valid)
    return _create_response(
        module,
        [
            (ErrorCode.none, None) if problem is None else (ErrorCode.invalid_request, problem)
            for problem in results
        ],
    )


async def handle_delete_acls(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DELETE_ACLS, ctx.api_version)
    refused = _refusal(ctx)
    authorizer = ctx.broker.authorizer
    filter_results = []
    for item in request.filters:
        selection = _filter(item)
        deleted: list[AclBinding] = []
        if refused is not None:
            error, message = refused
        elif (problem := selection.unknown_element()) is not None:
            error, message = ErrorCode.invalid_request, problem
        else:
            assert authorizer is not None
            error, message = ErrorCode.none, None
            deleted = authorizer.delete_acls(selection)
        filter_results.append(
            schemas.build(
                module.DeleteAclsFilterResult,
                error_code=error,
                error_message=message,
                matching_acls=tuple(
                    schemas.build(
                        module.DeleteAclsMatchingAcl,
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=b.pattern.resource_type,
                        resource_name=b.pattern.name,
                        pattern_type=b.pattern.pattern_type,
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=b.entry.operation,
                        permission_type=b.entry.permission_type,
                    )
                    for b in deleted
                ),
            )
        )
    return schemas.build(
        module.DeleteAclsResponse, throttle_time=0, filter_results=tuple(filter_results)
    )
