"""SaslHandshake and SaslAuthenticate once a connection needs no authentication.

On SASL listeners the network layer's authenticator answers these requests until the
connection is authenticated, and again when a session with a lifetime is renewed
(KIP-368, ``connections.max.reauth.ms``). What reaches the broker's handlers is a repeat
on a connection whose session does not expire, or one sent on a PLAINTEXT or SSL
listener; Kafka's KafkaApis answers both with ILLEGAL_SASL_STATE, and so do these. The rows in the API table also make ApiVersions advertise the versions the
authenticator serves, as Kafka's does on every listener.
"""

from __future__ import annotations

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.server.context import RequestContext


async def handle_sasl_handshake(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.SASL_HANDSHAKE, ctx.api_version)
    return schemas.build(
        module.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=()
    )


async def handle_sasl_authenticate(ctx: RequestContext, request) -> object:
    module = schemas.response_module(ApiKey.SASL_AUTHENTICATE, ctx.api_version)
    return schemas.build(
        module.SaslAuthenticateResponse,
        error_code=ErrorCode.illegal_sasl_state,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
        session_lifetime=0,
    )
