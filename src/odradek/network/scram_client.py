"""The client side of a SCRAM-SHA-256/512 exchange (RFC 5802), as Kafka's ScramSaslClient.

The broker authenticates with it to another broker's SASL inter-broker listener, and the
tools that speak the protocol themselves to a SASL listener (``sasl_client``). Three
messages: client-first ``n,,n=user,r=cnonce``; on the server-first
``r=nonce,s=salt,i=iterations`` the client checks that the nonce starts with its own
and that the iterations are at least the mechanism's minimum (a server asking for fewer
would weaken the proof), then sends ``c=biws,r=nonce,p=proof``; the server-final
``v=signature`` proves the server knew the credential, and a wrong signature fails the
exchange (``e=message`` is the server's refusal). No channel binding, no authorization
id, as Kafka's client.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable

from odradek.network.sasl_mechanism import SaslAuthenticationError
from odradek.network.scram import (
    ScramMechanism,
    attributes,
    decode_message,
    encode_saslname,
    new_nonce,
)

_GS2_HEADER = "n,,"


class ScramSaslClient:
    """One SCRAM exchange (states: first, final, verify, complete)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        username: str,
        password: str,
        client_nonce: Callable[[], str] = new_nonce,
    ) -> None:
        self._scram = mechanism
        self._password = password
        self._nonce = client_nonce()
        self._client_first_bare = f"n={encode_saslname(username)},r={self._nonce}"
        self._server_signature = b""
        self._state = "first"

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def initial_response(self) -> bytes:
        if self._state != "first":
            raise SaslAuthenticationError(f"SCRAM client in state {self._state} cannot start")
        self._state = "final"
        return (_GS2_HEADER + self._client_first_bare).encode()

    def evaluate_challenge(self, token: bytes) -> bytes | None:
        try:
            if self._state == "final":
                return self._client_final(decode_message(token, SaslAuthenticationError))
            if self._state == "verify":
                self._verify(decode_message(token, SaslAuthenticationError))
                return None
            raise SaslAuthenticationError(f"Unexpected SCRAM challenge in state {self._state}")
        except BaseException:
            self._state = "failed"
            raise

    def _client_final(self, server_first: str) -> bytes:
        fields = attributes(server_first)
        nonce, salt_text, iterations_text = fields.get("r"), fields.get("s"), fields.get("i")
        if nonce is None or salt_text is None or iterations_text is None:
            raise SaslAuthenticationError(f"Invalid SCRAM server first message: {server_first!r}")
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise SaslAuthenticationError("Invalid server nonce: does not start with client nonce")
        try:
            salt = base64.b64decode(salt_text, validate=True)
            iterations = int(iterations_text)
        except (binascii.Error, ValueError):
            raise SaslAuthenticationError(
                f"Invalid SCRAM server first message: {server_first!r}"
            ) from None
        if iterations < self._scram.min_iterations:
            raise SaslAuthenticationError(
                f"Requested iterations {iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self._scram.name}"
            )
        salted = self._scram.salted_password(self._password, salt, iterations)
        without_proof = f"c={base64.b64encode(_GS2_HEADER.encode()).decode()},r={nonce}"
        auth = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        credential = self._scram.credential(salted, salt, iterations)
        proof = self._scram.proof(self._scram.client_key(salted), credential.stored_key, auth)
        self._server_signature = self._scram.hmac(credential.server_key, auth)
        self._state = "verify"
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify(self, server_final: str) -> None:
        fields = attributes(server_final)
        if "e" in fields:
            raise SaslAuthenticationError(
                f"Sasl authentication using {self._scram.name} failed with error: {fields['e']}"
            )
        try:
            signature = base64.b64decode(fields.get("v", ""), validate=True)
        except binascii.Error:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslAuthenticationError("Invalid server signature in server final message")
        self._state = "complete"
