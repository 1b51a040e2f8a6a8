"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka keeps them: never the password.

A credential is what the server needs to check a client's proof and prove itself:
salt, iterations, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"), with SaltedPassword = PBKDF2(password, salt,
iterations). Kafka stores it per user and mechanism as the text
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``
(ScramCredentialUtils; ZooKeeper's ``/config/users/<user>`` holds it under the
mechanism's name), and so does this broker's metadata store. AlterUserScramCredentials
sends the salted password, never the password, and the broker derives the two keys.

The mechanisms are Kafka's two, with its iteration bounds: at least 4096 (RFC 7677's
minimum, Kafka's ScramMechanism.minIterations) and, for credentials altered through
the Admin API, at most 16384 (Kafka's ScramMechanism max).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

#: The login module Kafka's SCRAM mechanisms are configured with.
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


class ScramMechanismType(IntEnum):
    """The mechanism numbers of Describe/AlterUserScramCredentials (Kafka's ScramMechanism)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str
    hash_name: str
    type: ScramMechanismType
    min_iterations: int = 4096
    max_iterations: int = 16384

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi(password, salt, i) of RFC 5802: PBKDF2 with this mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        """ClientKey = HMAC(SaltedPassword, "Client Key"): what the client's proof hides."""
        return self.hmac(salted_password, b"Client Key")

    def credential(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        return ScramCredential(
            salt=salt,
            stored_key=self.hash(self.client_key(salted_password)),
            server_key=self.hmac(salted_password, b"Server Key"),
            iterations=iterations,
        )

    def proof(self, key: bytes, stored_key: bytes, auth_message: bytes) -> bytes:
        """ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage); XOR undoes itself, so the
        server gets the ClientKey back from a proof the same way (ValueError: wrong length)."""
        signature = self.hmac(stored_key, auth_message)
        return bytes(a ^ b for a, b in zip(key, signature, strict=True))


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", ScramMechanismType.SCRAM_SHA_256)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", ScramMechanismType.SCRAM_SHA_512)
#: Mechanism name -> mechanism.
SCRAM_MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
SCRAM_BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in SCRAM_MECHANISMS.values()}


class InvalidCredential(ValueError):
    """A stored credential text that is not Kafka's four fields."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's ScramCredentialUtils.credentialToString."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Kafka's ScramCredentialUtils.credentialFromString (InvalidCredential when malformed)."""
        props = dict(item.partition("=")[::2] for item in text.split(","))
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise InvalidCredential(f"Credentials not valid: {text}")
        try:
            return cls(
                salt=base64.b64decode(props["salt"], validate=True),
                stored_key=base64.b64decode(props["stored_key"], validate=True),
                server_key=base64.b64decode(props["server_key"], validate=True),
                iterations=int(props["iterations"]),
            )
        except ValueError as e:
            raise InvalidCredential(f"Credentials not valid: {e}") from None


def attributes(message: str) -> dict[str, str]:
    """``a=x,b=y`` -> {"a": "x", "b": "y"} (values may hold ``=``: base64 padding)."""
    return dict(item.partition("=")[::2] for item in message.split(",") if item)


def decode_message(token: bytes, error: Callable[[str], Exception]) -> str:
    """A SCRAM message as text; ``error`` (the side's own failure) when it is not UTF-8."""
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise error("SCRAM message is not UTF-8") from None


def new_nonce() -> str:
    """A nonce part: printable, without ``,``: 32 random URL-safe characters (192 bits)."""
    return secrets.token_urlsafe(24)


def encode_saslname(username: str) -> str:
    """RFC 5802's saslname encoding: ``=`` as ``=3D`` and ``,`` as ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(saslname: str) -> str:
    """RFC 5802's saslname decoding: ``=2C`` is ``,`` and ``=3D`` is ``=``."""
    return saslname.replace("=2C", ",").replace("=3D", "=")
