"""Client quotas applied to requests: record what a request did, answer the throttle time.

Kafka's RequestHandlerHelper.sendResponseMaybeThrottle and the Produce handler's quota
calls, done once a request's handler has returned (``RequestChannel`` calls ``throttle``):

- Produce records the request's size against ``producer_byte_rate`` after the append,
  acks=0 too (Kafka's ``request.sizeInBytes``);
- every request that is not exempt records the time its handler ran against
  ``request_percentage`` (percent of one handler's time: seconds * 100), its throttle
  bounded by one quota window as ClientRequestQuotaManager bounds it. Exempt, as Kafka's
  ``sendResponseExemptThrottle``: followers' fetches, WriteTxnMarkers (broker to broker),
  SASL exchanges, Produce with acks=0;
- Fetch has done its own ``consumer_byte_rate`` part in its handler (it must send no data
  when throttled), and CreateTopics, CreatePartitions and DeleteTopics their
  ``controller_mutation_rate`` part (``controller_mutation_quota``: a strict quota refuses
  topics); their throttle is on the response already.

A client of a version from before KIP-219 (``CLIENT_THROTTLES_FROM``, Kafka's
``shouldClientThrottle``) does not hold back by itself: its response is sent when the
mute is over instead of before it.

The longer throttle wins, and that quota's ``throttle-time`` sensor counts it (Kafka's
``throttle(quotaManager, ...)``). The response carries it as throttle_time_ms and
``mute_ms``, so the connection reads nothing for that long after sending it; a Produce
with acks=0 gets a ``silent`` response that only mutes. The user is the connection's
principal name (``ANONYMOUS`` before any authentication), the client id the header's.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from typing import Any

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.response import EncodedResponse
from odradek.quota.manager import ClientQuotas, ControllerMutationQuota
from odradek.server.context import RequestContext
from odradek.server.handlers.fetch import replica

#: Never measured against request_percentage: broker-to-broker requests and SASL.
EXEMPT_APIS = frozenset({ApiKey.WRITE_TXN_MARKERS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


#: The first version of each API whose client throttles itself on throttle_time_ms
#: (Kafka's AbstractResponse.shouldClientThrottle); an API not named never does.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
    ApiKey.ELECT_LEADERS: 0,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 0,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: 0,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: 0,
    ApiKey.OFFSET_DELETE: 0,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: 0,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: 0,
}


def mute_first(api_key: int, api_version: int) -> bool:
    """Whether a throttled response of this version is sent after the mute (before KIP-219)."""
    return api_version < CLIENT_THROTTLES_FROM.get(api_key, 1 << 15)


def active(quotas: ClientQuotas) -> bool:
    """Whether ``throttle`` has anything to do: a produce, request or controller mutation
    quota is configured (a fetch's throttle is on its EncodedResponse, muted without it)."""
    return quotas.produce.enabled or quotas.request.enabled or quotas.controller_mutation.enabled


def controller_mutation_quota(
    ctx: RequestContext, strict_since: int
) -> ControllerMutationQuota | None:
    """The request's controller mutation quota, strict from API version ``strict_since``;
    None while no controller_mutation_rate is configured."""
    manager = ctx.broker.client_quotas.controller_mutation
    if not manager.enabled:
        return None
    user, client_id = ctx.connection.principal.name, ctx.header.client_id or ""
    return ControllerMutationQuota(manager, user, client_id, ctx.api_version >= strict_since)


def mutation_throttle_ms(ctx: RequestContext, quota: ControllerMutationQuota | None) -> int:
    """The throttle time a mutating request answers with, counted in its sensor."""
    if quota is None:
        return 0
    now_ms = int(time.time() * 1000)
    throttle_ms = quota.throttle_time_ms(now_ms)
    if throttle_ms:
        user, client_id = ctx.connection.principal.name, ctx.header.client_id or ""
        ctx.broker.client_quotas.controller_mutation.throttled(user, client_id, throttle_ms, now_ms)
    return throttle_ms


def _held_ms(response: Any) -> int:
    """The throttle a handler already put on its response."""
    if isinstance(response, EncodedResponse):
        return response.mute_ms
    held = getattr(response, "throttle_time", None)
    return int(held.total_seconds() * 1000) if held else 0


def _exempt(api_key: int, request: Any) -> bool:
    if api_key in EXEMPT_APIS:
        return True
    if api_key == ApiKey.PRODUCE:
        return bool(request.acks == 0)
    return api_key == ApiKey.FETCH and replica(request)[0] >= 0


def throttle(
    ctx: RequestContext,
    quotas: ClientQuotas,
    request: Any,
    response: Any,
    handler_seconds: float,
    request_size: int,
) -> tuple[Any, int]:
    """(the response, with its throttle time if throttled, and how long to mute)."""
    api_key = ctx.header.api_key
    user, client_id = ctx.connection.principal.name, ctx.header.client_id or ""
    now_ms = int(time.time() * 1000)
    produced = 0
    if api_key == ApiKey.PRODUCE and quotas.produce.enabled:
        produced = quotas.produce.record(user, client_id, request_size, now_ms)
    requested = 0
    if quotas.request.enabled and not _exempt(api_key, request):
        requested = quotas.request.record(user, client_id, handler_seconds * 100, now_ms)
    held = _held_ms(response)
    throttle_ms = max(produced, requested)
    if throttle_ms <= held:
        return response, held
    manager = quotas.produce if produced > requested else quotas.request
    manager.throttled(user, client_id, throttle_ms, now_ms)
    if response is None:  # acks=0: no answer, but the connection is muted all the same
        return EncodedResponse(silent=True, mute_ms=throttle_ms), throttle_ms
    if isinstance(response, EncodedResponse):
        response.set_throttle_time(throttle_ms)
        response.mute_ms = throttle_ms
        return response, throttle_ms
    if hasattr(response, "throttle_time"):
        delay = datetime.timedelta(milliseconds=throttle_ms)
        response = dataclasses.replace(response, throttle_time=delay)
    return response, throttle_ms
