"""What a TLS listener gives each connection: the TLS context and the principal of its peer.

Kafka's SslChannelBuilder in small: ``SslChannel.from_config`` builds both from
one listener's ssl.* configs, so a bad key store and a bad mapping rule are
refused together at start-up (or when a dynamic update is validated). The
listener swaps its SslChannel when its key store is altered; connections keep
the one they were accepted with, as Kafka's do.

The principal is ``User:ANONYMOUS`` when the client sent no certificate
(``ssl.client.auth`` none, or requested and not given), else the name
``ssl.principal.mapping.rules`` makes of the certificate's subject.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from odradek.network.distinguished_name import subject_rfc2253
from odradek.network.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from odradek.network.ssl_engine_factory import SslConfig, SslConfigError, create_server_context
from odradek.network.ssl_principal_mapper import InvalidRule, SslPrincipalMapper


@dataclass(frozen=True, slots=True)
class SslChannel:
    context: ssl.SSLContext
    mapper: SslPrincipalMapper

    @classmethod
    def from_config(cls, config: SslConfig) -> SslChannel:
        try:
            mapper = SslPrincipalMapper(config.principal_mapping_rules)
        except InvalidRule as e:
            raise SslConfigError(
                f"Invalid value {config.principal_mapping_rules} for configuration "
                f"ssl.principal.mapping.rules: {e}"
            ) from None
        return cls(create_server_context(config), mapper)

    def principal(self, ssl_object: ssl.SSLObject) -> KafkaPrincipal:
        """The peer's principal once the handshake is done (NoMatchingRule: it has none)."""
        certificate = ssl_object.getpeercert(binary_form=True)
        if not certificate:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.mapper.name(subject_rfc2253(certificate)))
