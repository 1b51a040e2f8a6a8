"""OAUTHBEARER's sans-I/O parts: the client message, the exchange, both validators, the session."""

from __future__ import annotations

import base64
import json
import string
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import given
from hypothesis import strategies as st
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from kio.schema.sasl_handshake.v1 import request as handshake_v1
from sasl_frames import answer, authenticate, frame

from odradek.network.oauthbearer_jwks import JwksKeys, parse_jwks
from odradek.network.oauthbearer_jwt import JwtValidator
from odradek.network.oauthbearer_unsecured import OAuthBearerConfigError, UnsecuredJwsValidator
from odradek.network.sasl_authenticator import SaslServerAuthenticator
from odradek.network.sasl_mechanism import InvalidCredentials, SaslAuthenticationError
from odradek.network.sasl_oauthbearer import (
    InvalidToken,
    OAuthBearerSaslServer,
    OAuthBearerToken,
    parse_client_initial_response,
)

NOW_S = 1_700_000_000
NOW_MS = NOW_S * 1000


def unsecured(header: dict[str, Any] | None = None, **claims: Any) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    body = {"sub": "alice", "iat": NOW_S, "exp": NOW_S + 60, **claims}
    body = {k: v for k, v in body.items() if v is not None}
    return f"{part(header or {'alg': 'none'})}.{part(body)}."


def validator(**options: str) -> UnsecuredJwsValidator:
    return UnsecuredJwsValidator(options, clock=lambda: NOW_MS)


# ---- the client message -----------------------------------------------------------------------

_KEYS = st.text(string.ascii_letters, min_size=1, max_size=8).filter(lambda k: k != "auth")
_VALUES = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E) | st.sampled_from(" \t\r\n"),
    min_size=1,
    max_size=20,
)
_TOKENS = st.from_regex(r"[-_~+/.a-zA-Z0-9]+=*", fullmatch=True)
_AUTHZIDS = st.text(
    st.characters(min_codepoint=1, max_codepoint=0x7F).filter(lambda c: c not in ",="),
    max_size=10,
)


@given(_TOKENS, _AUTHZIDS, st.dictionaries(_KEYS, _VALUES, max_size=4))
def test_client_message_round_trips(token: str, authzid: str, extensions: dict[str, str]) -> None:
    """What Kafka's OAuthBearerClientInitialResponse.toBytes writes, parsed back."""
    pairs = "".join(f"\x01{k}={v}" for k, v in extensions.items())
    gs2 = f"n,a={authzid}," if authzid else "n,,"
    message = f"{gs2}\x01auth=Bearer {token}{pairs}\x01\x01".encode()
    parsed = parse_client_initial_response(message)
    assert (parsed.token, parsed.authorization_id, parsed.extensions) == (
        token,
        authzid,
        extensions,
    )


@given(st.binary(max_size=64))
def test_any_bytes_parse_or_fail_with_invalid_credentials(message: bytes) -> None:
    try:
        parse_client_initial_response(message)
    except InvalidCredentials:
        pass


def test_the_scheme_is_case_insensitive() -> None:
    assert parse_client_initial_response(b"n,,\x01auth=BEARER t.o.k\x01\x01").token == "t.o.k"


# ---- the exchange -----------------------------------------------------------------------------


class Fixed:
    """A validator with a fixed verdict."""

    def __init__(self, outcome: OAuthBearerToken | InvalidToken) -> None:
        self.outcome = outcome

    def validate(self, token_value: str) -> OAuthBearerToken:
        if isinstance(self.outcome, InvalidToken):
            raise self.outcome
        return self.outcome

    def close(self) -> None:
        pass


TOKEN = OAuthBearerToken("t", "alice", frozenset(), NOW_MS + 30_000, NOW_MS)
MESSAGE = b"n,,\x01auth=Bearer t\x01\x01"


def test_a_valid_token_completes_with_its_principal_and_expiry() -> None:
    server = OAuthBearerSaslServer(Fixed(TOKEN))
    assert server.evaluate(MESSAGE) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expiration_ms == NOW_MS + 30_000
    with pytest.raises(SaslAuthenticationError, match="already completed"):
        server.evaluate(MESSAGE)


def test_a_refused_token_is_challenged_then_a_new_message_is_a_new_attempt() -> None:
    verdict = Fixed(InvalidToken("no good"))
    server = OAuthBearerSaslServer(verdict)
    assert json.loads(server.evaluate(MESSAGE)) == {"status": "invalid_token"}
    verdict.outcome = TOKEN  # Kafka lets the client send another message instead of \x01
    assert server.evaluate(MESSAGE) == b"" and server.complete


def test_the_acknowledged_refusal_carries_the_reason_and_the_scope() -> None:
    server = OAuthBearerSaslServer(Fixed(InvalidToken("needs more", scope="a b")))
    assert json.loads(server.evaluate(MESSAGE)) == {"status": "insufficient_scope", "scope": "a b"}
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(b"\x01")
    assert str(failure.value) == 'needs more {"status":"insufficient_scope","scope":"a b"}'


def test_a_lone_separator_before_any_refusal_is_malformed() -> None:
    with pytest.raises(InvalidCredentials):
        OAuthBearerSaslServer(Fixed(TOKEN)).evaluate(b"\x01")


# ---- the unsecured validator -------------------------------------------------------------------


def test_unsecured_token_with_kafkas_defaults() -> None:
    token = validator().validate(unsecured(scope=["read", " write ", ""]))
    assert token.principal_name == "alice"
    assert token.scope == {"read", "write"}
    assert (token.lifetime_ms, token.start_time_ms) == (NOW_MS + 60_000, NOW_MS)


def test_unsecured_options_name_the_claims() -> None:
    options = {
        "unsecuredValidatorPrincipalClaimName": "client",
        "unsecuredValidatorScopeClaimName": "roles",
        "unsecuredValidatorRequiredScope": "admin",
    }
    token = validator(**options).validate(unsecured(client="svc", roles="admin"))
    assert (token.principal_name, token.scope) == ("svc", {"admin"})


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (unsecured({"alg": "HS256"}), "must have 'none' for an algorithm"),
        (unsecured(sub=None), "Required claim missing: sub"),
        (unsecured(sub=7), "The sub claim had the incorrect type: int"),
        (unsecured(sub="  "), "No principal name in JWT claim: sub"),
        (unsecured(exp=None), "No expiration time in JWT"),
        (unsecured(exp="soon"), "The 'exp' claim was not of type Number"),
        (unsecured(exp=NOW_S), "was on or after the Expiration Time"),
        (unsecured(iat=NOW_S + 1), "was after the indicated time"),
        (unsecured(iat=NOW_S - 10, exp=NOW_S - 20), "was on or after the Expiration Time"),
        (unsecured(scope={"a": 1}), "was not of type List"),
        ("a.b", "must have 3 dot-separated"),
        ("a..", "contains '..'"),
        (unsecured() + "sig", "must not contain a digital signature"),
        ("!!!.e30.", "malformed Base64 URL encoded value"),
        ("bm90IGpzb24.e30.", "malformed JSON"),
        ("WzFd.e30.", "malformed JSON"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else None,
)
def test_unsecured_refusals(token: str, reason: str) -> None:
    with pytest.raises(InvalidToken, match=reason):
        validator().validate(token)


def test_unsecured_clock_skew_allows_a_just_expired_token() -> None:
    skewed = validator(unsecuredValidatorAllowableClockSkewMs="1000")
    assert skewed.validate(unsecured(iat=NOW_S - 9, exp=NOW_S)).principal_name == "alice"
    with pytest.raises(InvalidToken, match="on or after the Expiration Time"):
        skewed.validate(unsecured(iat=NOW_S - 9, exp=NOW_S - 1))


def test_unsecured_required_scope_is_insufficient_scope() -> None:
    strict = validator(unsecuredValidatorRequiredScope="read write")
    with pytest.raises(InvalidToken) as refused:
        strict.validate(unsecured(scope="read"))
    assert refused.value.scope == "read write"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "must not be negative"),
        ({"unsecuredValidatorAllowableClockSkewMs": "x"}, "is not a number"),
        ({"unsecuredValidatorRequiredScope": 'a "b"'}, "Invalid scope value"),
    ],
)
def test_unsecured_option_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(OAuthBearerConfigError, match=message):
        UnsecuredJwsValidator(options)


# ---- the JWT validator --------------------------------------------------------------------------

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def jwk(key: Any, **fields: Any) -> dict[str, Any]:
    algorithm = RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else ECAlgorithm
    return {**json.loads(algorithm.to_jwk(key.public_key())), **fields}


def keys(*entries: dict[str, Any]) -> JwksKeys:
    return JwksKeys(parse_jwks(json.dumps({"keys": list(entries)}), "test"))


def signed(key: Any = RSA_KEY, algorithm: str = "RS256", kid: str | None = None, **claims: Any):
    import time

    now = int(time.time())
    payload = {"sub": "bob", "iat": now, "exp": now + 60, **claims}
    headers = {"kid": kid} if kid else None
    return jwt.encode(payload, key, algorithm=algorithm, headers=headers)


def test_jwt_without_kid_uses_the_one_key_of_its_type() -> None:
    validator = JwtValidator(keys(jwk(RSA_KEY), jwk(EC_KEY)))
    assert validator.validate(signed()).principal_name == "bob"
    assert validator.validate(signed(EC_KEY, "ES256")).principal_name == "bob"
    assert validator.validate(signed(algorithm="PS384")).principal_name == "bob"


def test_jwt_key_choice_by_kid_use_and_declared_algorithm() -> None:
    validator = JwtValidator(
        keys(jwk(RSA_KEY, kid="a", alg="RS256"), jwk(RSA_KEY, kid="enc", use="enc"))
    )
    assert validator.validate(signed(kid="a")).principal_name == "bob"
    assert validator.validate(signed()).principal_name == "bob"  # the one signing RSA key
    for token in (signed(kid="enc"), signed(kid="a", algorithm="RS512")):
        with pytest.raises(InvalidToken, match="Unable to find a suitable verification key"):
            validator.validate(token)
    two = JwtValidator(keys(jwk(RSA_KEY, kid="a"), jwk(RSA_KEY, kid="b")))
    with pytest.raises(InvalidToken, match="from 2 candidate keys"):
        two.validate(signed())


def test_jwt_claims_as_configured() -> None:
    validator = JwtValidator(
        keys(jwk(RSA_KEY)),
        expected_audience=["x", "y"],
        expected_issuer="me",
        sub_claim_name="azp",
        scope_claim_name="scp",
    )
    token = validator.validate(signed(aud="y", iss="me", azp="svc", scp=["a", "b"]))
    assert (token.principal_name, token.scope) == ("svc", {"a", "b"})
    with pytest.raises(InvalidToken, match="must not contain duplicates"):
        validator.validate(signed(aud="y", iss="me", azp="svc", scp=["a", "a"]))
    with pytest.raises(InvalidToken, match="azp value must be non-null"):
        validator.validate(signed(aud="y", iss="me"))


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"iat": None}, 'Token is missing the "iat" claim'),
        ({"exp": None}, 'Token is missing the "exp" claim'),
        ({"nbf": 4_000_000_000}, "The token is not yet valid"),
        ({"aud": "them"}, "Invalid audience"),
    ],
)
def test_jwt_refusals(claims: dict[str, Any], reason: str) -> None:
    token = signed(**claims) if None not in claims.values() else _without(claims)
    with pytest.raises(InvalidToken, match=reason):
        JwtValidator(keys(jwk(RSA_KEY))).validate(token)


def _without(claims: dict[str, Any]) -> str:
    import time

    now = int(time.time())
    payload = {"sub": "bob", "iat": now, "exp": now + 60}
    for name in claims:
        payload.pop(name)
    return jwt.encode(payload, RSA_KEY, algorithm="RS256")


def test_a_jwks_without_usable_keys_is_refused() -> None:
    with pytest.raises(OAuthBearerConfigError, match="no key that can verify"):
        parse_jwks(json.dumps({"keys": [{"kty": "nope"}]}), "test")
    with pytest.raises(OAuthBearerConfigError, match="not a JSON Web Key Set"):
        parse_jwks("[]", "test")


# ---- the session (KIP-368) ----------------------------------------------------------------------


def session(max_reauth_ms: int, expiration_ms: int) -> SaslServerAuthenticator:
    token = OAuthBearerToken("t", "alice", frozenset(), expiration_ms)
    sasl = SaslServerAuthenticator(
        ("OAUTHBEARER",),
        lambda mechanism: OAuthBearerSaslServer(Fixed(token)),
        lambda mechanism: max_reauth_ms,
        clock=lambda: NOW_S,
    )
    sasl.receive(frame(handshake_v1.SaslHandshakeRequest(mechanism="OAUTHBEARER")))
    request = authenticate(MESSAGE)
    response = answer(request, sasl.receive(frame(request)).response)
    assert response.error_code == 0 and sasl.complete
    assert response.session_lifetime.total_seconds() * 1000 == sasl.session_lifetime_ms
    return sasl


@pytest.mark.parametrize(
    ("max_reauth_ms", "expiration_ms", "lifetime_ms"),
    [
        (0, NOW_MS + 5_000, 5_000),  # no cap: the token's end
        (60_000, NOW_MS + 5_000, 5_000),  # the token ends first
        (3_000, NOW_MS + 5_000, 3_000),  # the cap comes first
        (60_000, NOW_MS - 500, 0),  # expired within the allowed skew: ends at once
    ],
)
def test_session_lifetime_is_the_earlier_of_token_and_cap(
    max_reauth_ms: int, expiration_ms: int, lifetime_ms: int
) -> None:
    sasl = session(max_reauth_ms, expiration_ms)
    assert sasl.session_lifetime_ms == lifetime_ms
    assert sasl.session_expires
