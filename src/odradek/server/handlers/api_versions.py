"""ApiVersions: the APIs and version ranges (generated from the API table) and the features.

The features (supported ranges, finalized levels, their epoch) come from
``metadata.features``, which explains the levels chosen; ZkMigrationReady is
false, as on every Kafka 4 broker (Kafka 4 has no ZooKeeper migration).
"""

from __future__ import annotations

from odradek.metadata.features import FINALIZED_FEATURES_EPOCH, finalized_on_wire, supported_on_wire
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.apis import API_TABLE, ApiSpec
from odradek.server.context import RequestContext


def api_versions_response(
    api_version: int, table: dict[int, ApiSpec], error_code: ErrorCode = ErrorCode.none
):
    """The ApiVersions response of ``api_version`` advertising every entry of ``table``."""
    cls = schemas.response_schema(ApiKey.API_VERSIONS, api_version)
    module = schemas.response_module(ApiKey.API_VERSIONS, api_version)
    keys = tuple(
        module.ApiVersion(
            api_key=spec.api_key, min_version=spec.min_version, max_version=spec.max_version
        )
        for spec in sorted(table.values(), key=lambda s: s.api_key)
    )
    features = {}
    if hasattr(module, "SupportedFeatureKey"):  # v3+
        features = {
            "supported_features": tuple(
                module.SupportedFeatureKey(name=name, min_version=low, max_version=high)
                for name, (low, high) in supported_on_wire(api_version).items()
            ),
            "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
            "finalized_features": tuple(
                module.FinalizedFeatureKey(
                    name=name, max_version_level=level, min_version_level=level
                )
                for name, level in finalized_on_wire().items()
            ),
            "zk_migration_ready": False,
        }
    return schemas.build(cls, error_code=error_code, api_keys=keys, throttle_time=0, **features)


async def handle(ctx: RequestContext, request) -> object:
    return api_versions_response(ctx.api_version, API_TABLE)
