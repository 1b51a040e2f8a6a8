"""Kafka's OAuthBearerValidatorCallbackHandler: signed JWTs checked against a JWKS.

Selected by ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` =
``org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler``.
What Kafka's ValidatorAccessTokenValidator asks of jose4j, PyJWT (with cryptography)
checks here, no cryptography of our own:

- the signature, with the key the JWS header's ``kid`` names in the key set (without a
  ``kid``, the one key of the algorithm's type); ``alg`` ``none`` and HMAC algorithms are
  refused (a key set holds public keys);
- ``exp`` and ``iat`` are required, ``exp``/``nbf`` are checked with
  ``sasl.oauthbearer.clock.skew.seconds`` of leeway (default 30);
- ``aud`` holds one of ``sasl.oauthbearer.expected.audience`` when that is set (and a
  token with an ``aud`` is refused when it is not, as jose4j does);
- ``iss`` is ``sasl.oauthbearer.expected.issuer`` when that is set;
- the principal is ``sasl.oauthbearer.sub.claim.name`` (default ``sub``), a non-blank
  string; the scope is ``sasl.oauthbearer.scope.claim.name`` (default ``scope``), a string
  (one item, as Kafka reads it) or a list without duplicates.

A refusal's reason is PyJWT's message behind Kafka's "Could not validate the access
token", logged with the client's address by the authenticator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jwt

from odradek.network.oauthbearer_jwks import JwksKeys, VerificationKey
from odradek.network.sasl_oauthbearer import InvalidToken, OAuthBearerToken

#: Signature algorithms of public keys, by the JWK key type that verifies them.
_KEY_TYPES = {
    **{f"RS{n}": "RSA" for n in (256, 384, 512)},
    **{f"PS{n}": "RSA" for n in (256, 384, 512)},
    **{f"ES{n}": "EC" for n in (256, 384, 512)},
    "ES256K": "EC",
    "EdDSA": "OKP",
}


class JwtValidator:
    """Validates signed JWTs with the keys of ``keys`` and the listener's sasl.oauthbearer.*."""

    def __init__(
        self,
        keys: JwksKeys,
        *,
        expected_audience: Sequence[str] = (),
        expected_issuer: str | None = None,
        clock_skew_seconds: int = 30,
        sub_claim_name: str = "sub",
        scope_claim_name: str = "scope",
    ) -> None:
        self._keys = keys
        self._audience = list(expected_audience) or None
        self._issuer = expected_issuer
        self._leeway = clock_skew_seconds
        self._sub_claim = sub_claim_name
        self._scope_claim = scope_claim_name

    def close(self) -> None:
        self._keys.close()

    def validate(self, token_value: str) -> OAuthBearerToken:
        if token_value.count(".") != 2 or not all(token_value.split(".")):
            raise InvalidToken(
                "Malformed JWT provided; expected three sections (header, payload, and signature)"
            )
        try:
            header = jwt.get_unverified_header(token_value)
            key = self._key(header)
            claims = jwt.decode(
                token_value,
                key.jwk.key,
                algorithms=[header["alg"]],
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway,
                options={"require": ["exp", "iat"], "verify_sub": False},
            )
        except jwt.PyJWTError as e:
            raise InvalidToken(f"Could not validate the access token: {e}") from None
        return OAuthBearerToken(
            token_value,
            self._subject(claims),
            self._scope(claims),
            _millis(claims, "exp"),
            _millis(claims, "iat"),
        )

    def _key(self, header: Mapping[str, Any]) -> VerificationKey:
        """The key set's key for this header (jose4j's JwksVerificationKeyResolver)."""
        algorithm = header.get("alg")
        key_type = _KEY_TYPES.get(algorithm) if isinstance(algorithm, str) else None
        if key_type is None:
            raise InvalidToken(
                f"Could not validate the access token: the JWS algorithm {algorithm!r} is not "
                "one of a public key (" + ", ".join(_KEY_TYPES) + ")"
            )
        key_id = header.get("kid")
        candidates = [
            key
            for key in self._keys.current()
            if key.jwk.key_type == key_type
            and (key_id is None or key.jwk.key_id == key_id)
            and key.jwk.public_key_use in (None, "sig")
            and key.algorithm in (None, algorithm)
        ]
        if len(candidates) != 1:
            if key_id is not None and not candidates:
                self._keys.missing(str(key_id))
            raise InvalidToken(
                "Could not validate the access token: Unable to find a suitable verification key "
                f"for JWS w/ header {dict(header)} from {len(candidates)} candidate keys"
            )
        return candidates[0]

    def _subject(self, claims: Mapping[str, Any]) -> str:
        subject = claims.get(self._sub_claim)
        if subject is None:
            raise InvalidToken(f"{self._sub_claim} value must be non-null")
        if not isinstance(subject, str):
            raise InvalidToken(
                f"Could not extract the '{self._sub_claim}' claim from the access token"
            )
        if not subject.strip():
            raise InvalidToken(f"{self._sub_claim} value must not contain only whitespace")
        return subject.strip()

    def _scope(self, claims: Mapping[str, Any]) -> frozenset[str]:
        raw = claims.get(self._scope_claim)
        items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        scope: set[str] = set()
        for item in items:
            text = str(item).strip()
            if not text:
                continue
            if text in scope:
                raise InvalidToken(
                    f"{self._scope_claim} value must not contain duplicates - {text} already "
                    "present"
                )
            scope.add(text)
        return frozenset(scope)


def _millis(claims: Mapping[str, Any], name: str) -> int:
    """A NumericDate claim (PyJWT checked it is a number) in ms since the epoch."""
    return round(float(claims[name]) * 1000)
