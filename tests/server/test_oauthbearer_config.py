"""OAUTHBEARER's broker configs: Kafka's names and precedence, and start-up messages for bad ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from odradek.network.oauthbearer_jwt import JwtValidator
from odradek.network.oauthbearer_unsecured import OAuthBearerConfigError, UnsecuredJwsValidator
from odradek.network.oauthbearer_validators import new_validator
from odradek.server.config import BrokerConfig, ConfigError

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
BASE = {
    "listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9093",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{MODULE} required;",
}
RSA_JWK = json.loads(
    RSAAlgorithm.to_jwk(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key())
)


def settings(**extra: str):
    return BrokerConfig({**BASE, **extra}).oauthbearer_settings("SASL_PLAINTEXT")


def test_default_is_kafkas_unsecured_validator_with_the_jaas_options() -> None:
    jaas = f'{MODULE} required unsecuredValidatorPrincipalClaimName="azp";'
    chosen = settings(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas})
    assert chosen.handler_class is None
    validator = new_validator(chosen)
    assert isinstance(validator, UnsecuredJwsValidator)
    assert validator.principal_claim_name == "azp"


def test_the_most_specific_form_of_a_config_wins(tmp_path: Path) -> None:
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [RSA_JWK]}))
    chosen = settings(
        **{
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                VALIDATOR
            ),
            "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
            "sasl.oauthbearer.clock.skew.seconds": "5",
            "listener.name.sasl_plaintext.sasl.oauthbearer.clock.skew.seconds": "6",
            "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "7",
            "listener.name.sasl_plaintext.sasl.oauthbearer.expected.audience": "a, b",
        }
    )
    assert chosen.configs["sasl.oauthbearer.clock.skew.seconds"] == 7
    assert chosen.configs["sasl.oauthbearer.expected.audience"] == ["a", "b"]
    assert chosen.configs["sasl.oauthbearer.sub.claim.name"] == "sub"
    validator = new_validator(chosen)
    assert isinstance(validator, JwtValidator)
    validator.close()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": None},
            "enables SASL mechanism OAUTHBEARER but "
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config is not set",
        ),
        (
            {
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required;"
                )
            },
            f"is not {MODULE}",
        ),
        (
            {
                "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                    f'{MODULE} required unsecuredValidatorAllowableClockSkewMs="-5";'
                )
            },
            "Allowable clock skew millis must not be negative",
        ),
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "x.Y"},
            "callback handler class x.Y cannot be loaded",
        ),
        (
            {"sasl.server.callback.handler.class": VALIDATOR},
            "needs sasl.oauthbearer.jwks.endpoint.url",
        ),
        (
            {
                "sasl.server.callback.handler.class": VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": "ftp://keys.example/jwks.json",
            },
            "contains an invalid protocol (ftp)",
        ),
        (
            {
                "sasl.server.callback.handler.class": VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": "https://keys.example/jwks.json",
                "sasl.oauthbearer.jwks.endpoint.refresh.ms": "0",
            },
            "sasl.oauthbearer.jwks.endpoint.refresh.ms must be above 0",
        ),
        (
            {"sasl.oauthbearer.clock.skew.seconds": "soon"},
            "Invalid value soon for configuration sasl.oauthbearer.clock.skew.seconds",
        ),
    ],
    ids=[
        "no-jaas",
        "other-module",
        "bad-option",
        "unknown-class",
        "no-url",
        "bad-scheme",
        "no-refresh",
        "bad-number",
    ],
)
def test_bad_settings_stop_start_up(extra: dict[str, str | None], message: str) -> None:
    props = {**BASE, **extra}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        BrokerConfig({k: v for k, v in props.items() if v is not None})


def test_a_jwks_file_that_cannot_be_used(tmp_path: Path) -> None:
    props = {
        **BASE,
        "sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "missing.json").as_uri(),
    }
    with pytest.raises(OAuthBearerConfigError, match="doesn't exist"):
        new_validator(BrokerConfig(props).oauthbearer_settings("SASL_PLAINTEXT"))
    (tmp_path / "missing.json").write_text('{"keys": "no"}')
    with pytest.raises(OAuthBearerConfigError, match="not a JSON Web Key Set"):
        new_validator(BrokerConfig(props).oauthbearer_settings("SASL_PLAINTEXT"))


def test_an_unreachable_jwks_endpoint_stops_start_up() -> None:
    props = {
        **BASE,
        "sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.jwks.endpoint.url": "http://127.0.0.1:9/jwks.json",
    }
    with pytest.raises(OAuthBearerConfigError, match="could not fetch the JWKS"):
        new_validator(BrokerConfig(props).oauthbearer_settings("SASL_PLAINTEXT"))
