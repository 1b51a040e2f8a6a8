"""Which OAUTHBEARER validator a listener uses, from Kafka's callback handler class name.

Kafka picks the server side of OAUTHBEARER by ``listener.name.<l>.oauthbearer.sasl.server.
callback.handler.class``: unset, it is OAuthBearerUnsecuredValidatorCallbackHandler
(unsigned tokens, options from the JAAS entry); Kafka's OAuthBearerValidatorCallbackHandler
validates signed JWTs against a JWKS (``sasl.oauthbearer.*``). No Java class can be loaded
here, so any other name stops start-up with the two that can be served.

``check_settings`` runs with the broker's config checks (no I/O, a bad value is a start-up
message); ``new_validator`` builds the validator when the listener is made, which for a
JWKS means reading the file or fetching the endpoint (PyJWT is imported only then).
"""

from __future__ import annotations

import importlib.util
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.network.oauthbearer_unsecured import (
    UNSECURED_VALIDATOR_CLASS,
    OAuthBearerConfigError,
    UnsecuredJwsValidator,
)
from odradek.network.sasl_oauthbearer import TokenValidator

#: Kafka's class names of the JWT validator (the second is its pre-3.x package, still accepted).
JWT_VALIDATOR_CLASSES = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
JWKS_ENDPOINT_URL = "sasl.oauthbearer.jwks.endpoint.url"


@dataclass(frozen=True, slots=True)
class OAuthBearerSettings:
    """A listener's OAUTHBEARER configuration, as the broker's configs give it."""

    #: listener.name.<l>.oauthbearer.sasl.server.callback.handler.class (None: unset).
    handler_class: str | None
    #: The options of the listener's OAuthBearerLoginModule JAAS entry.
    jaas_options: Mapping[str, str]
    #: sasl.oauthbearer.* for the listener, parsed, with Kafka's defaults.
    configs: Mapping[str, Any]


def uses_jwks(handler_class: str | None) -> bool:
    """Whether the class name selects JWT validation against a JWKS (else unsecured tokens)."""
    if handler_class is None or handler_class.strip() in ("", UNSECURED_VALIDATOR_CLASS):
        return False
    if handler_class.strip() in JWT_VALIDATOR_CLASSES:
        return True
    raise OAuthBearerConfigError(
        f"callback handler class {handler_class} cannot be loaded: OAUTHBEARER is served by "
        f"{JWT_VALIDATOR_CLASSES[0]} (JWTs checked against a JWKS) or, when unset, by "
        f"{UNSECURED_VALIDATOR_CLASS}"
    )


def check_settings(
    handler_class: str | None, jaas_options: Mapping[str, str], configs: Mapping[str, Any]
) -> None:
    """The checks that need no I/O; OAuthBearerConfigError names the problem."""
    if not uses_jwks(handler_class):
        UnsecuredJwsValidator(jaas_options)
        return
    if importlib.util.find_spec("jwt") is None:
        raise OAuthBearerConfigError(
            f"{JWT_VALIDATOR_CLASSES[0]} checks signatures with PyJWT, which is not installed: "
            "pip install 'odradek[oauth]'"
        )
    url = (configs.get(JWKS_ENDPOINT_URL) or "").strip()
    if not url:
        raise OAuthBearerConfigError(
            f"{JWT_VALIDATOR_CLASSES[0]} needs {JWKS_ENDPOINT_URL} (a file: or https: URL of "
            "the identity provider's JSON Web Key Set)"
        )
    for name in (
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    ):
        if configs[name] <= 0:
            raise OAuthBearerConfigError(f"The OAuth configuration option {name} must be above 0")
    scheme = urllib.parse.urlparse(url).scheme.lower()
    if scheme not in ("file", "http", "https"):
        raise OAuthBearerConfigError(
            f"The OAuth configuration option {JWKS_ENDPOINT_URL} contains a URL ({url}) that "
            f'contains an invalid protocol ({scheme}); only "http", "https", and "file" '
            "protocol are supported"
        )


def new_validator(settings: OAuthBearerSettings) -> TokenValidator:
    """The listener's validator; OAuthBearerConfigError when its key set cannot be loaded."""
    jaas_options, configs = settings.jaas_options, settings.configs
    if not uses_jwks(settings.handler_class):
        return UnsecuredJwsValidator(jaas_options)
    from odradek.network.oauthbearer_jwks import jwks_keys
    from odradek.network.oauthbearer_jwt import JwtValidator

    return JwtValidator(
        jwks_keys(configs, jaas_options),
        expected_audience=configs.get("sasl.oauthbearer.expected.audience") or (),
        expected_issuer=(configs.get("sasl.oauthbearer.expected.issuer") or "").strip() or None,
        clock_skew_seconds=configs["sasl.oauthbearer.clock.skew.seconds"],
        sub_claim_name=configs["sasl.oauthbearer.sub.claim.name"].strip(),
        scope_claim_name=configs["sasl.oauthbearer.scope.claim.name"].strip(),
    )
