"""ListConfigResources (KIP-1142): the resources whose configs DescribeConfigs can be asked for.

v0 is the former ListClientMetricsResources: it lists client-metrics
subscriptions only. This broker keeps none (client metrics, KIP-714, are not
implemented), so v0 answers an empty list, which is what Kafka answers when
no subscription is configured.

v1 takes resource types (empty: every type the broker lists) and answers, as
Kafka: every topic (TOPIC, 2), every broker by node id (BROKER, 4), every
group (GROUP, 32) and the client-metrics subscriptions (CLIENT_METRICS, 16,
none here). A type the broker does not list answers UNSUPPORTED_VERSION for
the whole request, as Kafka does; BROKER_LOGGER (8) is one of them here,
because DescribeConfigs does not serve broker loggers. Either version needs DESCRIBE_CONFIGS
on the cluster, else CLUSTER_AUTHORIZATION_FAILED, as Kafka's handler checks.
"""

from __future__ import annotations

from enum import IntEnum

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import AclOperation, authorize_cluster
from odradek.server.context import RequestContext


class ConfigResourceType(IntEnum):
    """Kafka's ConfigResource.Type codes."""

    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


LISTED_TYPES = (
    ConfigResourceType.TOPIC,
    ConfigResourceType.BROKER,
    ConfigResourceType.CLIENT_METRICS,
    ConfigResourceType.GROUP,
)


def _names(ctx: RequestContext, resource_type: ConfigResourceType) -> list[str]:
    if resource_type == ConfigResourceType.TOPIC:
        return sorted(ctx.broker.metadata.topics())
    if resource_type == ConfigResourceType.BROKER:
        return [str(b.node_id) for b in ctx.broker.metadata.brokers()]
    if resource_type == ConfigResourceType.GROUP:
        groups = ctx.broker.components["group_coordinator"].core.list_groups()
        return sorted(group_id for group_id, *_ in groups)
    return []  # CLIENT_METRICS: no subscriptions


async def handle_list_config_resources(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.LIST_CONFIG_RESOURCES, ctx.api_version)
    cls = schemas.response_schema(ApiKey.LIST_CONFIG_RESOURCES, ctx.api_version)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return schemas.build(
            cls,
            throttle_time=0,
            error_code=ErrorCode.cluster_authorization_failed,
            config_resources=(),
        )
    if ctx.api_version == 0:
        return schemas.build(cls, throttle_time=0, error_code=ErrorCode.none, config_resources=())
    requested = set(request.resource_types) or set(LISTED_TYPES)
    if not requested <= set(LISTED_TYPES):
        return schemas.build(
            cls, throttle_time=0, error_code=ErrorCode.unsupported_version, config_resources=()
        )
    resources = tuple(
        schemas.build(module.ConfigResource, resource_name=name, resource_type=resource_type)
        for resource_type in LISTED_TYPES
        if resource_type in requested
        for name in _names(ctx, resource_type)
    )
    return schemas.build(
        cls, throttle_time=0, error_code=ErrorCode.none, config_resources=resources
    )
