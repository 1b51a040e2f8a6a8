"""The server side of a SCRAM-SHA-256/512 exchange, as Kafka's ScramSaslServer.

Two rounds: the client-first message (``n,,n=user,r=cnonce[,ext=value...]``) gets the
server-first message (``r=cnonce+snonce,s=salt,i=iterations``); the client-final
message (``c=biws,r=nonce,p=proof``) is checked against the stored credential and
gets ``v=ServerSignature``. Only the stored credential is consulted
(``credentials(mechanism, user)``, from the cluster metadata), never a password.

As Kafka's: channel binding is refused (a ``p=`` GS2 header is not a valid message);
an authorization id must equal the user name; the ``tokenauth`` extension asks for
delegation-token authentication, which this broker has no tokens for, so it fails as
an unknown token does in Kafka; other extensions are accepted and ignored. Messages
for a malformed exchange, an unknown user or a wrong proof deliberately say no more
than Kafka's generic "invalid credentials" (``InvalidCredentials``),
so a client cannot learn which users exist.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Callable

from odradek.network.sasl_mechanism import InvalidCredentials, SaslAuthenticationError
from odradek.network.scram import (
    ScramCredential,
    ScramMechanism,
    attributes,
    decode_message,
    decode_saslname,
    new_nonce,
)

#: Looks up the stored credential of (mechanism name, user name); None when there is none.
CredentialLookup = Callable[[str, str], ScramCredential | None]

_SASLNAME = r"(?:[\x21-\x2b\x2d-\x3c\x3e-\x7e]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>[ny],(?:a=(?P<authzid>{_SASLNAME}))?,)"
    rf"n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?:{_EXTENSIONS}),p=(?P<proof>{_BASE64})"
)
#: Kafka's ScramLoginModule.TOKEN_AUTH_CONFIG: the extension naming a delegation token login.
TOKEN_AUTH_EXTENSION = "tokenauth"


class ScramSaslServer:
    """One SCRAM exchange on one connection (states: client-first, client-final, complete)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: CredentialLookup,
        server_nonce: Callable[[], str] = new_nonce,
    ) -> None:
        self._scram = mechanism
        self._credentials = credentials
        #: Makes the server's part of the nonce (fixed in tests of RFC examples).
        self._server_nonce = server_nonce
        self._state = "client-first"
        self._username = ""
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce = ""

    @property
    def mechanism(self) -> str:
        return self._scram.name

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        if not self.complete:
            raise RuntimeError("Authentication exchange has not completed")
        return self._username

    #: A password does not expire (KIP-368 sessions then last connections.max.reauth.ms).
    credential_expiration_ms = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "client-first":
                return self._client_first(token)
            if self._state == "client-final":
                return self._client_final(token)
            raise InvalidCredentials(f"Unexpected challenge in Sasl server state {self._state}")
        except BaseException:
            self._state = "failed"
            raise

    def _client_first(self, token: bytes) -> bytes:
        message = decode_message(token, InvalidCredentials)
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise InvalidCredentials(f"Invalid SCRAM client first message: {message!r}")
        extensions = attributes(match["extensions"])
        self._username = decode_saslname(match["saslname"])
        if extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true":
            raise InvalidCredentials(
                f"Token Authentication failed: Invalid tokenId : {self._username}"
            )
        credential = self._credentials(self._scram.name, self._username)
        if credential is None:
            raise InvalidCredentials("Authentication failed: Invalid user credentials")
        authzid = match["authzid"]
        if authzid is not None and decode_saslname(authzid) != self._username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        if credential.iterations < self._scram.min_iterations:
            raise InvalidCredentials(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self._scram.min_iterations} for {self._scram.name}"
            )
        self._credential = credential
        self._gs2_header = match["gs2"]
        self._client_first_bare = message[len(self._gs2_header) :]
        self._nonce = match["nonce"] + self._server_nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        message = decode_message(token, InvalidCredentials)
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise InvalidCredentials("Authentication failed: Invalid client final message")
        if match["nonce"] != self._nonce:
            raise InvalidCredentials("Invalid client nonce in the final client message.")
        try:
            channel = base64.b64decode(match["channel"], validate=True)
            proof = base64.b64decode(match["proof"], validate=True)
        except binascii.Error:
            raise InvalidCredentials(
                "Authentication failed: Invalid client final message"
            ) from None
        if channel != self._gs2_header.encode():
            raise InvalidCredentials("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        without_proof = message[: message.rindex(",p=")]
        auth = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            client_key = self._scram.proof(proof, credential.stored_key, auth)
        except ValueError:  # a proof of another length
            raise InvalidCredentials("Invalid client credentials") from None
        if not hmac.compare_digest(self._scram.hash(client_key), credential.stored_key):
            raise InvalidCredentials("Invalid client credentials")
        self._state = "complete"
        return b"v=" + base64.b64encode(self._scram.hmac(credential.server_key, auth))
