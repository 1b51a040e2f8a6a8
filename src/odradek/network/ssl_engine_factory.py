"""A TLS listener's ``ssl.SSLContext``, built from Kafka's ``ssl.*`` configs (DefaultSslEngineFactory).

Odradek serves TLS through Python's ``ssl`` module (OpenSSL), which reads PEM
only, so the key store and trust store must be PEM, as Kafka's
``ssl.keystore.type=PEM``: either a file (``ssl.keystore.location``, the
private key and the certificate chain in one file) or the PEM text in the
config (``ssl.keystore.key`` and ``ssl.keystore.certificate.chain``), the key
optionally encrypted with ``ssl.key.password``. The trust store, which checks
client certificates, is ``ssl.truststore.location`` or
``ssl.truststore.certificates`` (PEM CA certificates); without one, the
system's CAs are used, as Kafka then uses the JVM's. A JKS or PKCS12 store is
refused at start-up with a message saying so; the combinations Kafka refuses
(a key store password with PEM, a key without a chain, a file and inline PEM
together) are refused with Kafka's messages.

Inline PEM keys are given to OpenSSL through a private temporary file that is
removed as soon as it is read: ``SSLContext.load_cert_chain`` reads files only.
An encrypted key without ``ssl.key.password`` is an error here, never an
OpenSSL prompt on the terminal.

``ssl.enabled.protocols`` (default TLSv1.2,TLSv1.3, as Kafka 4) sets the
context's version range; a set with a gap (TLSv1.1 and TLSv1.3 without
TLSv1.2) cannot be expressed as a range and is refused. ``ssl.protocol`` names
the Java SSLContext algorithm and is only checked to be a TLS name: the
versions served are the enabled protocols. ``ssl.cipher.suites`` takes Java's
(IANA) names, as Kafka users write them, or OpenSSL's; TLS 1.2 suites are
given to OpenSSL. OpenSSL's TLS 1.3 suites cannot be narrowed through Python's
``ssl``: a list naming no TLS 1.3 suite disables TLS 1.3 (as it makes Java's
TLS 1.3 handshakes fail), and one naming some of them leaves all three enabled,
with a warning. ``ssl.client.auth`` is ``none`` (no client certificate asked
for), ``requested`` (asked for, optional) or ``required`` (a client without a
certificate the trust store accepts is refused in the handshake).

The broker is a TLS client too, of the other brokers' inter-broker listener
(``create_client_context``), with that listener's own configs, as Kafka's
inter-broker channel uses them: the key store is the certificate it presents
when the server asks for one (optional for a client), the trust store checks the
server's certificate (always: a client never trusts a peer unverified), and
``ssl.endpoint.identification.algorithm`` (default ``https``) makes it check that
the certificate names the host it connected to (an IP address against an IP
subjectAltName); an empty value turns that check off, as in Kafka, and any other
value is refused, Java having no other algorithm Kafka users set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

PEM = "PEM"

CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_ORDER = list(_VERSIONS)

#: SSLContext algorithm names Java accepts for ssl.protocol.
SSL_PROTOCOLS = frozenset({"TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3"})

#: OpenSSL's TLS 1.3 suites (their IANA and OpenSSL names are the same).
_TLS13_SUITES = frozenset(
    {"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"}
)

#: IANA (Java) name -> OpenSSL name of the TLS 1.2 certificate suites OpenSSL 3 offers by
#: default (``openssl ciphers -stdname DEFAULT``, PSK and SRP suites left out).
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}


class SslConfigError(ValueError):
    """The listener's ssl.* configs cannot make a TLS context; the message says which and why."""


@dataclass(frozen=True, slots=True)
class SslConfig:
    """One listener's ssl.* configs (its listener.name.<name>. overrides already applied)."""

    keystore_type: str = "JKS"
    keystore_location: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    keystore_certificate_chain: str | None = None
    keystore_key: str | None = None
    truststore_type: str = "JKS"
    truststore_location: str | None = None
    truststore_password: str | None = None
    truststore_certificates: str | None = None
    protocol: str = "TLSv1.3"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()
    client_auth: str = "none"
    principal_mapping_rules: str = "DEFAULT"
    endpoint_identification_algorithm: str | None = "https"

    @classmethod
    def from_configs(cls, values: Mapping[str, Any]) -> SslConfig:
        """From parsed configs under Kafka's names (``ssl.keystore.location``...); absent ones default."""
        fields: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            key = "ssl." + name.replace("_", ".")
            if values.get(key) is not None:
                value = values[key]
                fields[name] = tuple(value) if isinstance(value, list) else value
        return cls(**fields)


def create_server_context(config: SslConfig) -> ssl.SSLContext:
    """A server context for the listener; SslConfigError names what is wrong."""
    if config.protocol not in SSL_PROTOCOLS:
        raise SslConfigError(f"Unsupported ssl.protocol {config.protocol}")
    if config.client_auth not in CLIENT_AUTH:
        raise SslConfigError(
            f"Invalid value {config.client_auth} for configuration ssl.client.auth: "
            f"String must be one of: {', '.join(CLIENT_AUTH)}"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version, context.maximum_version = _version_range(config.enabled_protocols)
    if config.cipher_suites:
        _set_cipher_suites(context, config.cipher_suites)
    _load_keystore(context, config)
    _load_truststore(context, config, ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = CLIENT_AUTH[config.client_auth]
    return context


def create_client_context(config: SslConfig) -> ssl.SSLContext:
    """A client context for connecting to a listener with these configs (the inter-broker one)."""
    if config.protocol not in SSL_PROTOCOLS:
        raise SslConfigError(f"Unsupported ssl.protocol {config.protocol}")
    algorithm = (config.endpoint_identification_algorithm or "").lower()
    if algorithm not in ("", "https"):
        raise SslConfigError(
            f"Invalid value {config.endpoint_identification_algorithm} for configuration "
            "ssl.endpoint.identification.algorithm: expected https, or empty for no host name "
            "check"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version, context.maximum_version = _version_range(config.enabled_protocols)
    if config.cipher_suites:
        _set_cipher_suites(context, config.cipher_suites)
    keystore = (config.keystore_location, config.keystore_key, config.keystore_certificate_chain)
    if any(part is not None for part in keystore):
        _load_keystore(context, config)
    _load_truststore(context, config, ssl.Purpose.SERVER_AUTH)
    context.check_hostname = algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _version_range(enabled: tuple[str, ...]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    unknown = [p for p in enabled if p not in _VERSIONS]
    if unknown or not enabled:
        raise SslConfigError(
            f"Unsupported ssl.enabled.protocols {','.join(unknown) or '(none)'}: "
            f"expected some of {', '.join(_VERSIONS)}"
        )
    indexes = sorted({_ORDER.index(p) for p in enabled})
    if indexes != list(range(indexes[0], indexes[-1] + 1)):
        raise SslConfigError(
            f"ssl.enabled.protocols {','.join(enabled)} leaves out a version between its "
            "lowest and highest; OpenSSL serves a range of versions"
        )
    return _VERSIONS[_ORDER[indexes[0]]], _VERSIONS[_ORDER[indexes[-1]]]


def _set_cipher_suites(context: ssl.SSLContext, suites: tuple[str, ...]) -> None:
    tls13 = [s for s in suites if s in _TLS13_SUITES]
    tls12 = [_IANA_TO_OPENSSL.get(s, s) for s in suites if s not in _TLS13_SUITES]
    if tls12:
        try:
            context.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise SslConfigError(
                f"ssl.cipher.suites {','.join(suites)}: no TLS 1.2 cipher suite OpenSSL knows"
            ) from None
    elif context.minimum_version < ssl.TLSVersion.TLSv1_3:
        context.minimum_version = ssl.TLSVersion.TLSv1_3  # no TLS 1.2 suite: TLS 1.2 cannot work
    if not tls13:
        if context.maximum_version == ssl.TLSVersion.TLSv1_3:
            context.maximum_version = ssl.TLSVersion.TLSv1_2
    elif set(tls13) != _TLS13_SUITES:
        log.warning(
            "ssl.cipher.suites names %s: Python's ssl cannot narrow TLS 1.3 suites, "
            "so all of %s stay enabled",
            ",".join(tls13),
            ",".join(sorted(_TLS13_SUITES)),
        )
    if context.minimum_version > context.maximum_version:
        raise SslConfigError(
            f"ssl.cipher.suites {','.join(suites)} has no suite for the enabled protocols"
        )


def _load_keystore(context: ssl.SSLContext, c: SslConfig) -> None:
    if c.keystore_key is not None:
        if c.keystore_type != PEM:
            raise SslConfigError(
                "SSL private key can be specified only for PEM, but key store type is "
                f"{c.keystore_type}."
            )
        if c.keystore_certificate_chain is None:
            raise SslConfigError(
                "SSL private key is specified, but certificate chain is not specified."
            )
        if c.keystore_location is not None:
            raise SslConfigError(
                "Both SSL key store location and separate private key are specified."
            )
        if c.keystore_password is not None:
            raise SslConfigError(
                "SSL key store password cannot be specified with PEM format, only key password "
                "may be specified."
            )
        with _private_file(c.keystore_certificate_chain + "\n" + c.keystore_key) as path:
            _load_cert_chain(context, path, c.key_password, "ssl.keystore.key")
        return
    if c.keystore_certificate_chain is not None:
        raise SslConfigError("SSL certificate chain is specified, but private key is not specified")
    if c.keystore_location is None:
        raise SslConfigError(
            "an SSL listener needs a key store: set ssl.keystore.type=PEM with "
            "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key"
        )
    if c.keystore_type != PEM:
        raise SslConfigError(
            f"ssl.keystore.type {c.keystore_type} is not supported: only PEM key stores are "
            "(set ssl.keystore.type=PEM; convert a JKS or PKCS12 store with keytool or openssl)"
        )
    if c.keystore_password is not None:
        raise SslConfigError(
            "SSL key store password cannot be specified with PEM format, only key password may "
            "be specified"
        )
    _load_cert_chain(context, c.keystore_location, c.key_password, c.keystore_location)


def _load_cert_chain(context: ssl.SSLContext, path: str, password: str | None, source: str) -> None:
    def no_password() -> str:
        raise SslConfigError(f"the private key in {source} is encrypted: set ssl.key.password")

    try:
        context.load_cert_chain(path, password=password if password is not None else no_password)
    except SslConfigError:
        raise
    except (OSError, ssl.SSLError) as e:
        hint = " (a wrong ssl.key.password?)" if password is not None else ""
        raise SslConfigError(f"Failed to load PEM SSL keystore {source}: {e}{hint}") from None


def _load_truststore(context: ssl.SSLContext, c: SslConfig, purpose: ssl.Purpose) -> None:
    """``purpose``: what the system's CAs are loaded for when no trust store is configured."""
    if c.truststore_certificates is not None:
        if c.truststore_type != PEM:
            raise SslConfigError(
                "SSL trust store certs can be specified only for PEM, but trust store type is "
                f"{c.truststore_type}."
            )
        if c.truststore_location is not None:
            raise SslConfigError(
                "Both SSL trust store location and separate trust certificates are specified."
            )
        if c.truststore_password is not None:
            raise SslConfigError("SSL trust store password cannot be specified for PEM format.")
        try:
            context.load_verify_locations(cadata=c.truststore_certificates)
        except (ssl.SSLError, ValueError) as e:
            raise SslConfigError(f"Invalid PEM truststore configs: {e}") from None
        return
    if c.truststore_location is None:
        if c.truststore_password is not None:
            raise SslConfigError(
                "SSL trust store is not specified, but trust store password is specified."
            )
        context.load_default_certs(purpose)
        return
    if c.truststore_type != PEM:
        raise SslConfigError(
            f"ssl.truststore.type {c.truststore_type} is not supported: only PEM trust stores "
            "are (set ssl.truststore.type=PEM)"
        )
    if c.truststore_password is not None:
        raise SslConfigError("SSL trust store password cannot be specified for PEM format.")
    try:
        context.load_verify_locations(cafile=c.truststore_location)
    except (OSError, ssl.SSLError) as e:
        raise SslConfigError(
            f"Failed to load PEM SSL truststore {c.truststore_location}: {e}"
        ) from None


@contextlib.contextmanager
def _private_file(text: str) -> Iterator[str]:
    """A file only this user can read, holding ``text``, removed on exit."""
    fd, path = tempfile.mkstemp(prefix="odradek-ssl-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        yield path
    finally:
        os.unlink(path)
