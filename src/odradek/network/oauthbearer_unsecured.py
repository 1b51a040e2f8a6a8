"""Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: unsigned JWS tokens, for development.

The default OAUTHBEARER validator of a Kafka broker: the token is a JWS compact
serialization with ``{"alg":"none"}`` and no signature (what librdkafka makes with
``enable.sasl.oauthbearer.unsecure.jwt`` and Kafka's unsecured login module), so anyone
can claim any principal; it exists so that OAUTHBEARER can be tried without an identity
provider. Its options are the listener's OAuthBearerLoginModule JAAS options, as Kafka's:

- ``unsecuredValidatorPrincipalClaimName`` (default ``sub``): the claim naming the principal;
- ``unsecuredValidatorScopeClaimName`` (default ``scope``): a string or a list of strings;
- ``unsecuredValidatorRequiredScope``: space-separated scope every token must have;
- ``unsecuredValidatorAllowableClockSkewMs`` (default 0).

The checks and their messages are Kafka's: the principal claim is a non-blank string,
``exp`` is present, ``iat`` (when present) is not in the future, the token has not
expired, ``exp`` is after ``iat``, and the required scope is held. Sans-I/O: the time
comes from the ``clock`` given (ms since the epoch).

``UnsecuredLogin`` is the other end, Kafka's unsecured login callback handler: the unsigned
token a client sends (as librdkafka's ``sasl.oauthbearer.config``), made afresh for each
exchange so that its ``iat`` and ``exp`` count from that login.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from odradek.network.sasl_oauthbearer import (
    MECHANISM,
    InvalidToken,
    OAuthBearerSaslClient,
    OAuthBearerToken,
)

PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
ALLOWABLE_CLOCK_SKEW_MS_OPTION = "unsecuredValidatorAllowableClockSkewMs"
#: Kafka's class name for it (the default of listener.name.<l>.oauthbearer.sasl.server.callback.handler.class).
UNSECURED_VALIDATOR_CLASS = (
    "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
    "OAuthBearerUnsecuredValidatorCallbackHandler"
)


class OAuthBearerConfigError(ValueError):
    """A validator option is invalid (stops start-up)."""


def _now_ms() -> float:
    return time.time() * 1000


def _is_scope_item(item: str) -> bool:
    """RFC 6749's scope-token characters: %x21 / %x23-5B / %x5D-7E."""
    return all(c == "\x21" or "\x23" <= c <= "\x5b" or "\x5d" <= c <= "\x7e" for c in item)


def parse_scope(text: str) -> tuple[str, ...]:
    """A space-separated scope, as Kafka's OAuthBearerScopeUtils.parseScope."""
    items = tuple(item for item in text.split(" ") if item)
    for item in items:
        if not _is_scope_item(item):
            raise OAuthBearerConfigError(f"Invalid scope value: {item}")
    return items


class UnsecuredJwsValidator:
    """Validates unsigned JWS tokens with the options of the listener's JAAS entry."""

    def __init__(self, options: Mapping[str, str], clock: Callable[[], float] = _now_ms) -> None:
        self.principal_claim_name = options.get(PRINCIPAL_CLAIM_NAME_OPTION, "").strip() or "sub"
        self.scope_claim_name = options.get(SCOPE_CLAIM_NAME_OPTION, "").strip() or "scope"
        self.required_scope = parse_scope(options.get(REQUIRED_SCOPE_OPTION, "").strip())
        skew = options.get(ALLOWABLE_CLOCK_SKEW_MS_OPTION, "").strip() or "0"
        try:
            self.allowable_clock_skew_ms = int(skew)
        except ValueError:
            raise OAuthBearerConfigError(
                f"{ALLOWABLE_CLOCK_SKEW_MS_OPTION} is not a number: {skew}"
            ) from None
        if self.allowable_clock_skew_ms < 0:
            raise OAuthBearerConfigError(
                f"Allowable clock skew millis must not be negative: {skew}"
            )
        self._clock = clock

    def close(self) -> None:
        """Nothing to release."""

    def validate(self, token_value: str) -> OAuthBearerToken:
        header, claims = _unsecured_jws(token_value)
        if header.get("alg") != "none":
            raise InvalidToken("Unsecured JWS must have 'none' for an algorithm")
        principal = claims.get(self.principal_claim_name)
        if principal is None:
            raise InvalidToken(f"Required claim missing: {self.principal_claim_name}")
        if not isinstance(principal, str):
            raise InvalidToken(
                f"The {self.principal_claim_name} claim had the incorrect type: "
                f"{type(principal).__name__}"
            )
        if not principal.strip():
            raise InvalidToken(f"No principal name in JWT claim: {self.principal_claim_name}")
        expiration = _number_claim(claims, "exp")
        if expiration is None:
            raise InvalidToken("No expiration time in JWT")
        issued_at = _number_claim(claims, "iat")
        now = self._clock()
        skew = self.allowable_clock_skew_ms
        if issued_at is not None and 1000 * issued_at > now + skew:
            raise InvalidToken(
                f"The Issued At value ({issued_at:f} seconds) was after the indicated time "
                f"({int(now)} ms) plus allowable clock skew ({skew} ms)"
            )
        if now - skew >= 1000 * expiration:
            raise InvalidToken(
                f"The indicated time ({int(now)} ms) minus allowable clock skew ({skew} ms) was "
                f"on or after the Expiration Time value ({expiration:f} seconds)"
            )
        if issued_at is not None and expiration <= issued_at:
            raise InvalidToken(
                f"The Expiration Time time ({expiration:f} seconds) was not after the Issued At "
                f"time ({issued_at:f} seconds)"
            )
        scope = _scope(claims, self.scope_claim_name)
        for required in self.required_scope:
            if required not in scope:
                raise InvalidToken(
                    f"The provided scope ({sorted(scope)}) was missing a required scope "
                    f"({required}).  All required scope elements: {list(self.required_scope)}",
                    scope=" ".join(self.required_scope),
                )
        return OAuthBearerToken(
            token_value,
            principal,
            scope,
            round(expiration * 1000),
            None if issued_at is None else round(issued_at * 1000),
        )


@dataclass(frozen=True, slots=True)
class UnsecuredLogin:
    """A client's OAUTHBEARER login with an unsigned token."""

    mechanism: ClassVar[str] = MECHANISM
    #: The principal the token names.
    username: str
    scope: tuple[str, ...] = ()
    lifetime_s: float = 3600
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    #: SASL extensions sent with the token (Kafka's ``unsecuredLoginExtension_<name>``).
    extensions: Mapping[str, str] = field(default_factory=dict)

    def new_client(self) -> OAuthBearerSaslClient:
        """A client with an unsigned JWS (``alg`` none) valid from now for ``lifetime_s``."""

        def part(value: dict[str, object]) -> str:
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

        now = time.time()
        claims: dict[str, object] = {self.principal_claim: self.username, "iat": now}
        claims["exp"] = now + self.lifetime_s
        if self.scope:
            claims[self.scope_claim] = list(self.scope)
        token = f"{part({'alg': 'none'})}.{part(claims)}."
        return OAuthBearerSaslClient(token, self.extensions)


def _unsecured_jws(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a JWS compact serialization with an empty signature."""
    if ".." in token:
        raise InvalidToken("Malformed compact serialization contains '..'")
    parts = token.split(".")
    if len(parts) != 3:
        raise InvalidToken(
            "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
            "values"
        )
    if parts[2]:
        raise InvalidToken("Unsecured JWS must not contain a digital signature")
    return _json_object(parts[0]), _json_object(parts[1])


def _json_object(part: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(part + "=" * (-len(part) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidToken("malformed Base64 URL encoded value") from None
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise InvalidToken("malformed JSON") from None
    if not isinstance(value, dict):
        raise InvalidToken("malformed JSON")
    return value


def _number_claim(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidToken(f"The '{name}' claim was not of type Number: {type(value).__name__}")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """A scope claim that is a string (one item, as Kafka reads it) or a list of strings."""
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    if value is None:
        return frozenset()
    if not isinstance(value, list):
        raise InvalidToken(f"The '{name}' claim was not of type List: {type(value).__name__}")
    return frozenset(str(item).strip() for item in value if str(item).strip())
