"""The table of implemented APIs: api key -> (min version, max version, handler).

This table is the single source of truth for what the broker speaks: the
dispatcher routes by it and ApiVersions advertises exactly its entries, so an API
is advertised if and only if a handler for it is registered here. Handlers are
named as "module:function" and imported when the broker starts, which keeps this
file free of import cycles and lets each room own its handler module.

A handler is ``async def handle(ctx: RequestContext, request) -> response | None``
taking the decoded request (a kio object unless ``decoder`` names a hand-written
codec) and returning a kio response object, an ``EncodedResponse``, or None when
the protocol says no response is sent (Produce with acks=0).
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol.api_keys import ApiKey


@dataclass(frozen=True, slots=True)
class ApiSpec:
    api_key: int
    min_version: int
    max_version: int
    #: "package.module:function" of the async handler.
    handler: str
    #: "package.module:function(api_version, body: memoryview)" replacing kio's decoder.
    decoder: str | None = None


_H = "odradek.server.handlers."

API_SPECS: list[ApiSpec] = [
    ApiSpec(
        ApiKey.PRODUCE,
        3,
        13,
        _H + "produce:handle",
        "odradek.protocol.produce:decode_produce_request",
    ),
    ApiSpec(ApiKey.FETCH, 4, 18, _H + "fetch:handle"),
    ApiSpec(ApiKey.LIST_OFFSETS, 1, 11, _H + "list_offsets:handle"),
    ApiSpec(ApiKey.METADATA, 0, 13, _H + "metadata:handle"),
    ApiSpec(ApiKey.API_VERSIONS, 0, 4, _H + "api_versions:handle"),
    ApiSpec(ApiKey.CREATE_TOPICS, 2, 7, _H + "admin_topics:handle_create_topics"),
    ApiSpec(ApiKey.DELETE_TOPICS, 1, 6, _H + "admin_topics:handle_delete_topics"),
    ApiSpec(ApiKey.CREATE_PARTITIONS, 0, 3, _H + "admin_topics:handle_create_partitions"),
    ApiSpec(ApiKey.DELETE_RECORDS, 0, 2, _H + "log_admin:handle_delete_records"),
    ApiSpec(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, _H + "log_admin:handle_offset_for_leader_epoch"),
    ApiSpec(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, _H + "log_admin:handle_describe_log_dirs"),
    ApiSpec(ApiKey.DESCRIBE_CONFIGS, 1, 4, _H + "configs:handle_describe_configs"),
    ApiSpec(ApiKey.ALTER_CONFIGS, 0, 2, _H + "configs:handle_alter_configs"),
    ApiSpec(
        ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, _H + "configs:handle_incremental_alter_configs"
    ),
    ApiSpec(ApiKey.ELECT_LEADERS, 0, 2, _H + "partition_admin:handle_elect_leaders"),
    ApiSpec(
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        0,
        1,
        _H + "partition_admin:handle_alter_partition_reassignments",
    ),
    ApiSpec(
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        0,
        0,
        _H + "partition_admin:handle_list_partition_reassignments",
    ),
    ApiSpec(ApiKey.DESCRIBE_CLUSTER, 0, 2, _H + "cluster:handle_describe_cluster"),
    ApiSpec(ApiKey.DESCRIBE_PRODUCERS, 0, 0, _H + "describe_producers:handle_describe_producers"),
    ApiSpec(ApiKey.INIT_PRODUCER_ID, 0, 6, _H + "producer_ids:handle_init_producer_id"),
    ApiSpec(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5, _H + "transactions:handle_add_partitions_to_txn"),
    ApiSpec(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4, _H + "transactions:handle_add_offsets_to_txn"),
    ApiSpec(ApiKey.END_TXN, 0, 5, _H + "transactions:handle_end_txn"),
    ApiSpec(ApiKey.TXN_OFFSET_COMMIT, 0, 5, _H + "transactions:handle_txn_offset_commit"),
    ApiSpec(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, _H + "transactions:handle_describe_transactions"),
    ApiSpec(ApiKey.LIST_TRANSACTIONS, 0, 1, _H + "transactions:handle_list_transactions"),
    ApiSpec(ApiKey.WRITE_TXN_MARKERS, 1, 2, _H + "write_txn_markers:handle"),
    ApiSpec(ApiKey.DESCRIBE_ACLS, 1, 3, _H + "acls:handle_describe_acls"),
    ApiSpec(ApiKey.CREATE_ACLS, 1, 3, _H + "acls:handle_create_acls"),
    ApiSpec(ApiKey.DELETE_ACLS, 1, 3, _H + "acls:handle_delete_acls"),
    ApiSpec(ApiKey.FIND_COORDINATOR, 0, 6, _H + "group:handle_find_coordinator"),
    ApiSpec(ApiKey.JOIN_GROUP, 0, 9, _H + "group:handle_join_group"),
    ApiSpec(ApiKey.SYNC_GROUP, 0, 5, _H + "group:handle_sync_group"),
    ApiSpec(ApiKey.HEARTBEAT, 0, 4, _H + "group:handle_heartbeat"),
    ApiSpec(ApiKey.LEAVE_GROUP, 0, 5, _H + "group:handle_leave_group"),
    ApiSpec(ApiKey.OFFSET_COMMIT, 2, 10, _H + "group:handle_offset_commit"),
    ApiSpec(ApiKey.OFFSET_FETCH, 1, 10, _H + "group:handle_offset_fetch"),
    ApiSpec(ApiKey.OFFSET_DELETE, 0, 0, _H + "group:handle_offset_delete"),
    ApiSpec(ApiKey.DESCRIBE_GROUPS, 0, 6, _H + "group:handle_describe_groups"),
    ApiSpec(ApiKey.LIST_GROUPS, 0, 5, _H + "group:handle_list_groups"),
    ApiSpec(ApiKey.DELETE_GROUPS, 0, 2, _H + "group:handle_delete_groups"),
    ApiSpec(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1, _H + "group:handle_consumer_group_heartbeat"),
    ApiSpec(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1, _H + "group:handle_consumer_group_describe"),
    ApiSpec(ApiKey.SASL_HANDSHAKE, 0, 1, _H + "sasl:handle_sasl_handshake"),
    ApiSpec(ApiKey.SASL_AUTHENTICATE, 0, 2, _H + "sasl:handle_sasl_authenticate"),
    ApiSpec(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        0,
        0,
        _H + "scram_credentials:handle_describe_user_scram_credentials",
    ),
    ApiSpec(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        0,
        0,
        _H + "scram_credentials:handle_alter_user_scram_credentials",
    ),
    ApiSpec(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, _H + "client_quotas:handle_describe_client_quotas"
    ),
    ApiSpec(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1, _H + "client_quotas:handle_alter_client_quotas"),
    ApiSpec(
        ApiKey.LIST_CONFIG_RESOURCES, 0, 1, _H + "config_resources:handle_list_config_resources"
    ),
    ApiSpec(
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        0,
        0,
        _H + "describe_topic_partitions:handle_describe_topic_partitions",
    ),
]

API_TABLE: dict[int, ApiSpec] = {spec.api_key: spec for spec in API_SPECS}
