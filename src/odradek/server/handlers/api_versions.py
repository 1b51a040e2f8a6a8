"""ApiVersions: the list of APIs and version ranges, generated from the API table."""

from __future__ import annotations

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
    return schemas.build(cls, error_code=error_code, api_keys=keys, throttle_time=0)


async def handle(ctx: RequestContext, request) -> object:
    return api_versions_response(ctx.api_version, API_TABLE)
