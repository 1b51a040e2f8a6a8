"""The client side of SASL: one interface for every mechanism and every caller.

The mechanisms are Kafka's SaslClient (``SaslClient``): PLAIN (``sasl_plain``),
SCRAM-SHA-256/512 (``scram_client``) and OAUTHBEARER (``sasl_oauthbearer``). A
``SaslLogin`` holds the credentials and makes a new client for every exchange, as a SCRAM
nonce and proof are good for one: ``SaslClientLogin`` (``client_security``, a user name
and password) and ``UnsecuredLogin`` (``oauthbearer_unsecured``, an unsigned token). The
broker's connections to the other brokers (``network.client``) and the tools' blocking kio
connections (``spark.connection``) drive them: SaslHandshake v1 naming the mechanism, then
SaslAuthenticate with the mechanism's tokens until it is complete.
"""

from __future__ import annotations

from typing import Protocol


class SaslClient(Protocol):
    """One mechanism's side of one exchange. The client speaks first (``initial_response``);
    each server token gets its next one (``evaluate_challenge``: None when it has nothing
    more to send, SaslAuthenticationError for an unacceptable token) until it has accepted
    the server's last one (SCRAM's server signature) and is ``complete``."""

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, token: bytes) -> bytes | None: ...


class SaslLogin(Protocol):
    """A mechanism and the credentials of ``username``: a new client for each exchange."""

    @property
    def mechanism(self) -> str: ...

    @property
    def username(self) -> str: ...

    def new_client(self) -> SaslClient: ...
