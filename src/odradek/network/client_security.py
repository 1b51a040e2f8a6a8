"""How this broker secures the connections it opens to other brokers (Kafka's inter-broker
channel builder, client mode).

The security protocol is the inter-broker listener's: TLS with a client context made
from that listener's ssl.* configs (``ssl_engine_factory.create_client_context``), SASL
with ``sasl.mechanism.inter.broker.protocol`` and the ``username``/``password`` options
of the listener's JAAS entry for that mechanism
(``listener.name.<l>.<mechanism>.sasl.jaas.config``), the entry Kafka's broker logs in
with. The broker config builds one ``ClientSecurity`` at start-up; every broker-to-broker
connection (follower fetchers, transaction markers) uses it. ``SaslClientLogin`` is also
the PLAIN and SCRAM login of the tools that speak the protocol themselves
(``cli.client_security``).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from odradek.network.jaas_config import LoginModuleEntry
from odradek.network.sasl_client import SaslClient
from odradek.network.sasl_plain import MECHANISM as PLAIN
from odradek.network.sasl_plain import PLAIN_LOGIN_MODULE, PlainSaslClient
from odradek.network.scram import SCRAM_LOGIN_MODULE, SCRAM_MECHANISMS
from odradek.network.scram_client import ScramSaslClient

#: The login module each client mechanism takes its credentials from.
LOGIN_MODULES = {PLAIN: PLAIN_LOGIN_MODULE} | dict.fromkeys(SCRAM_MECHANISMS, SCRAM_LOGIN_MODULE)


class ClientLoginError(ValueError):
    """The JAAS entry cannot log a client in; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class SaslClientLogin:
    """A password mechanism (PLAIN, SCRAM) and the credentials to authenticate with: a
    ``sasl_client.SaslLogin``."""

    mechanism: str
    username: str
    password: str

    @classmethod
    def from_jaas(cls, mechanism: str, entry: LoginModuleEntry, source: str) -> SaslClientLogin:
        """From a login module entry's ``username`` and ``password`` options."""
        expected = LOGIN_MODULES.get(mechanism)
        if expected is None:
            raise ClientLoginError(f"SASL mechanism {mechanism} has no client in this broker")
        if entry.login_module != expected:
            raise ClientLoginError(
                f"{source}: login module {entry.login_module} is not {expected}, "
                f"which {mechanism} logs in with"
            )
        missing = [o for o in ("username", "password") if not entry.options.get(o)]
        if missing:
            raise ClientLoginError(
                f"{source}: the {mechanism} login needs the option(s) {', '.join(missing)} "
                "(the credentials this broker authenticates to the other brokers with)"
            )
        return cls(mechanism, entry.options["username"], entry.options["password"])

    def new_client(self) -> SaslClient:
        if self.mechanism == PLAIN:
            return PlainSaslClient(self.username, self.password)
        return ScramSaslClient(SCRAM_MECHANISMS[self.mechanism], self.username, self.password)

    def __repr__(self) -> str:  # never the password, in a log or a traceback
        return f"SaslClientLogin({self.mechanism}, {self.username})"


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """The inter-broker listener's security protocol, as a client speaks it."""

    security_protocol: str = "PLAINTEXT"
    #: The TLS client context (SSL and SASL_SSL), None for plaintext.
    ssl_context: ssl.SSLContext | None = None
    #: The SASL login (SASL_PLAINTEXT and SASL_SSL), None without SASL.
    sasl: SaslClientLogin | None = None


PLAINTEXT = ClientSecurity()
