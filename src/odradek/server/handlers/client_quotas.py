"""DescribeClientQuotas (API 48) and AlterClientQuotas (API 49): client quotas of users and
client ids, as Kafka's broker serves them (ZkAdminManager, KafkaApis).

Describe takes filter components, one per entity type at most: ``user`` or ``client-id``
matched exactly (match type 0, a name), as the default (1) or as any name (2); an entity
type without a component is accepted only when the filter is not ``strict``. The answer is
every entity with quotas that matches, with its quota values. ``ip`` components are
accepted (alone) and match nothing: this broker keeps no connection rate quotas. A
duplicate component, an empty or unknown entity type, a match type outside 0..2 or a match
string where it makes no sense is INVALID_REQUEST for the whole request.

Alter takes entries of an entity (user, client id, or both; a null name is the default) and
operations setting or removing quota keys: ``producer_byte_rate`` and
``consumer_byte_rate`` (integers), ``request_percentage``, ``controller_mutation_rate``.
An unknown key, a value that is not a positive number (or not an integer where one is
needed), or an entity that is not one of those three shapes is INVALID_REQUEST for that
entry alone; ``validate_only`` checks and writes nothing. Each entity's quotas are written
as one update of the metadata store (durably, and on every broker of a cluster).

Describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS; refused, the
request gets CLUSTER_AUTHORIZATION_FAILED (every entry of an Alter carries it), as in Kafka.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.quota.entity import (
    CLIENT_ID,
    DEFAULT,
    USER,
    EntityName,
    InvalidQuota,
    QuotaEntity,
    validate_value,
)
from odradek.server.authorization import AclOperation, authorize_cluster, denied
from odradek.server.context import RequestContext

IP = "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2

#: A filter component: the match type and, for an exact match, the name.
Component = tuple[int, str | None]


def _filter(components: Any) -> dict[str, Component]:
    """Entity type -> component; InvalidQuota for what Kafka answers INVALID_REQUEST."""
    wanted: dict[str, Component] = {}
    for c in components:
        if not c.entity_type:
            raise InvalidQuota("Unexpected empty filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidQuota(f"Custom entity type '{c.entity_type}' not supported")
        if c.entity_type in wanted:
            raise InvalidQuota(f"Duplicate {c.entity_type} filter component entity type")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise InvalidQuota("Request specified MATCH_TYPE_EXACT, but set match string to null")
        if c.match_type in (MATCH_DEFAULT, MATCH_ANY) and c.match is not None:
            raise InvalidQuota("Request specified MATCH_TYPE_DEFAULT or ANY with a match string")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise InvalidQuota(f"Unexpected match type {c.match_type}")
        wanted[c.entity_type] = (c.match_type, c.match)
    if IP in wanted and len(wanted) > 1:
        raise InvalidQuota(
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component."
        )
    return wanted


def _matches(component: Component | None, name: EntityName | None, strict: bool) -> bool:
    if component is None:
        return name is None or not strict
    match_type, match = component
    if match_type == MATCH_EXACT:
        return name == match
    if match_type == MATCH_DEFAULT:
        return name is DEFAULT
    return name is not None


async def handle_describe_client_quotas(ctx: RequestContext, request: Any) -> object:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return denied(ctx, request, ErrorCode.cluster_authorization_failed)
    module = schemas.response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, ctx.api_version)
    try:
        wanted = _filter(request.components)
    except InvalidQuota as e:
        return schemas.build(
            module.DescribeClientQuotasResponse,
            throttle_time=0,
            error_code=ErrorCode.invalid_request,
            error_message=str(e),
            entries=None,
        )
    entries = []
    if IP not in wanted:
        for entity, values in ctx.broker.metadata.client_quotas().items():
            if not (
                _matches(wanted.get(USER), entity.user, request.strict)
                and _matches(wanted.get(CLIENT_ID), entity.client_id, request.strict)
            ):
                continue
            parts = tuple(
                schemas.build(module.EntityData, entity_type=kind, entity_name=name)
                for kind, name in entity.to_wire().items()
            )
            quota_values = tuple(
                schemas.build(module.ValueData, key=key, value=value)
                for key, value in sorted(values.items())
            )
            entries.append(schemas.build(module.EntryData, entity=parts, values=quota_values))
    return schemas.build(
        module.DescribeClientQuotasResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        entries=tuple(entries),
    )


def _entity(parts: Any) -> QuotaEntity:
    named: dict[str, str | None] = {}
    for part in parts:
        if part.entity_type in named:
            raise InvalidQuota(f"Duplicate {part.entity_type} entity type in quota entity")
        named[part.entity_type] = part.entity_name
    return QuotaEntity.from_wire(named)


def _altered(held: dict[str, float], ops: Any) -> dict[str, float]:
    """``held`` after the operations; InvalidQuota for a bad key or value."""
    after = dict(held)
    for op in ops:
        if op.remove:
            after.pop(op.key, None)
        else:
            after[op.key] = validate_value(op.key, op.value)
    return after


async def handle_alter_client_quotas(ctx: RequestContext, request: Any) -> object:
    module = schemas.response_module(ApiKey.ALTER_CLIENT_QUOTAS, ctx.api_version)
    allowed = authorize_cluster(ctx, AclOperation.ALTER_CONFIGS)
    metadata = ctx.broker.metadata
    results = []
    for entry in request.entries:
        error, message = ErrorCode.none, None
        if not allowed:
            error = ErrorCode.cluster_authorization_failed
        else:
            try:
                entity = _entity(entry.entity)
                held = metadata.client_quotas().get(entity, {})
                after = _altered(held, entry.ops)
            except InvalidQuota as e:
                error, message = ErrorCode.invalid_request, str(e)
            else:
                if not request.validate_only and after != held:
                    metadata.set_client_quotas(entity, after)
        results.append(
            schemas.build(
                module.EntryData,
                error_code=error,
                error_message=message,
                entity=tuple(
                    schemas.build(
                        module.EntityData, entity_type=p.entity_type, entity_name=p.entity_name
                    )
                    for p in entry.entity
                ),
            )
        )
    return schemas.build(module.AlterClientQuotasResponse, throttle_time=0, entries=tuple(results))
