"""What a SASL listener gives each connection: its mechanisms and where users are found.

Kafka's SaslChannelBuilder in small, built once per listener from its configs:
``sasl.enabled.mechanisms`` (Kafka's listener-prefixed form overrides it),
``connections.max.reauth.ms`` per mechanism, the PLAIN
users of the listener's PlainLoginModule JAAS entry, the lookup of stored SCRAM
credentials (the broker's metadata store, read on every login so an altered
credential applies to the next connection), and OAUTHBEARER's token validator (Kafka's
server callback handler for it, one per listener).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from odradek.network.sasl_authenticator import SaslServerAuthenticator
from odradek.network.sasl_mechanism import SaslServer
from odradek.network.sasl_oauthbearer import MECHANISM as OAUTHBEARER
from odradek.network.sasl_oauthbearer import OAuthBearerSaslServer, TokenValidator
from odradek.network.sasl_plain import MECHANISM as PLAIN
from odradek.network.sasl_plain import PlainSaslServer
from odradek.network.scram import SCRAM_MECHANISMS
from odradek.network.scram_server import CredentialLookup, ScramSaslServer

#: The mechanisms this broker implements.
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)


def _no_credentials(mechanism: str, user: str) -> None:
    return None


@dataclass(frozen=True, slots=True)
class SaslChannel:
    enabled_mechanisms: tuple[str, ...]
    #: PLAIN's users: name -> password (from the JAAS config; empty without PLAIN).
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_credentials: CredentialLookup = _no_credentials
    #: connections.max.reauth.ms per mechanism (KIP-368); 0 or absent: sessions do not expire.
    max_reauth_ms: Mapping[str, int] = field(default_factory=dict)
    #: OAUTHBEARER's validator (None without OAUTHBEARER).
    oauthbearer_validator: TokenValidator | None = None

    def __post_init__(self) -> None:
        unknown = [m for m in self.enabled_mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown or not self.enabled_mechanisms:
            raise ValueError(
                f"SASL mechanisms {unknown or '(none)'} cannot be served; supported: "
                + ", ".join(SUPPORTED_MECHANISMS)
            )
        if (OAUTHBEARER in self.enabled_mechanisms) != (self.oauthbearer_validator is not None):
            raise ValueError("a token validator is needed for OAUTHBEARER and only for it")

    def close(self) -> None:
        """The listener stopped: release the token validator's resources."""
        if self.oauthbearer_validator is not None:
            self.oauthbearer_validator.close()

    def authenticator(self) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(
            self.enabled_mechanisms, self._server, lambda m: self.max_reauth_ms.get(m, 0)
        )

    def _server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(self.plain_users)
        if mechanism == OAUTHBEARER:
            assert self.oauthbearer_validator is not None
            return OAuthBearerSaslServer(self.oauthbearer_validator)
        return ScramSaslServer(SCRAM_MECHANISMS[mechanism], self.scram_credentials)
