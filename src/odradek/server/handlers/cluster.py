"""DescribeCluster: the cluster id, the controller and the live brokers (KIP-700).

Brokers are given by their endpoint on the listener the request came in on;
a broker not advertised on it is left out, as in Kafka. DescribeCluster needs no ACL (as
in Kafka); its cluster authorized operations are 0 without DESCRIBE on the cluster.
"""

from __future__ import annotations

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.authorization import (
    AUTHORIZED_OPERATIONS_OMITTED,
    cluster_authorized_operations,
)
from odradek.server.context import RequestContext

BROKERS_ENDPOINT = 1


async def handle_describe_cluster(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.DESCRIBE_CLUSTER, ctx.api_version)
    metadata = ctx.broker.metadata
    endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
    if endpoint_type != BROKERS_ENDPOINT:
        return schemas.build(
            module.DescribeClusterResponse,
            throttle_time=0,
            error_code=ErrorCode.unsupported_endpoint_type,
            error_message=f"Endpoint type {endpoint_type} is not supported by a broker",
            endpoint_type=endpoint_type,
            cluster_id=metadata.cluster_id,
            controller_id=-1,
            brokers=(),
            cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
        )
    listener = ctx.connection.listener_name
    brokers = tuple(
        schemas.build(
            module.DescribeClusterBroker,
            broker_id=b.node_id,
            host=endpoint[0],
            port=endpoint[1],
            rack=b.rack,
            is_fenced=False,
        )
        for b in metadata.brokers()
        if (endpoint := b.endpoint(listener)) is not None
    )
    return schemas.build(
        module.DescribeClusterResponse,
        throttle_time=0,
        error_code=ErrorCode.none,
        error_message=None,
        endpoint_type=BROKERS_ENDPOINT,
        cluster_id=metadata.cluster_id,
        controller_id=metadata.controller_id,
        brokers=brokers,
        cluster_authorized_operations=cluster_authorized_operations(
            ctx, request.include_cluster_authorized_operations
        ),
    )
