"""Kafka's Java client security settings, as librdkafka (confluent-kafka) takes them.

``--command-config client.properties`` is the file Kafka's own tools take, written for the
Java client; the tools here are librdkafka clients, whose names for the same settings
differ. ``librdkafka_config`` translates the security settings and passes every other
property through unchanged (so a file may also hold librdkafka's own names, and settings
both clients share, such as ``client.id`` or ``request.timeout.ms``, just work):

| Java client | librdkafka |
|---|---|
| ``security.protocol``, ``sasl.mechanism`` | the same |
| ``ssl.truststore.location`` / ``.certificates`` (PEM) | ``ssl.ca.location`` / ``ssl.ca.pem`` |
| ``ssl.keystore.location`` (PEM: key and chain) | ``ssl.key.location`` and ``ssl.certificate.location`` |
| ``ssl.keystore.location`` (PKCS12) and ``.password`` | ``ssl.keystore.location`` / ``.password`` |
| ``ssl.keystore.key`` / ``.certificate.chain`` | ``ssl.key.pem`` / ``ssl.certificate.pem`` |
| ``ssl.key.password`` | the same |
| ``ssl.endpoint.identification.algorithm`` (empty: none) | the same (``none``) |
| ``sasl.jaas.config`` PlainLoginModule/ScramLoginModule | ``sasl.username``, ``sasl.password`` |
| ``sasl.jaas.config`` OAuthBearerLoginModule ``unsecuredLogin*`` | ``enable.sasl.oauthbearer.unsecure.jwt``, ``sasl.oauthbearer.config`` |
| OAuthBearerLoginModule ``clientId``/``clientSecret``/``scope`` with ``sasl.oauthbearer.token.endpoint.url`` | ``sasl.oauthbearer.method=oidc`` and its ``client.id``, ``client.secret``, ``scope`` |

Java KeyStores (JKS, Java's default store type) cannot be read by librdkafka, so a JKS
trust store or key store is refused with the keytool/openssl command that converts it; a
store whose type is not given is taken as PEM when its file is PEM, as is usual here. The
Java settings with no librdkafka counterpart (``ssl.protocol``, ``ssl.enabled.protocols``,
the JSSE algorithm names) are dropped with a note on stderr: OpenSSL's defaults apply.
``sasl.mechanism`` left out (Java's default is GSSAPI) is taken from a PLAIN or OAUTHBEARER
login module; SCRAM must name its hash.

``wire_security`` reads the translated (librdkafka) settings once more for the one tool
that speaks the protocol itself, ``odradek transactions``: a TLS context and a SASL login
(``network.sasl_client.SaslLogin``, a new exchange on each connection), so every tool
takes the same file.
"""

from __future__ import annotations

import ssl
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek.cli.errors import ToolError
from odradek.network.client_security import SaslClientLogin
from odradek.network.jaas_config import JaasConfigError, LoginModuleEntry, parse_single_module
from odradek.network.oauthbearer_unsecured import UnsecuredLogin
from odradek.network.sasl_client import SaslLogin
from odradek.network.sasl_oauthbearer import OAUTHBEARER_LOGIN_MODULE
from odradek.network.sasl_plain import PLAIN_LOGIN_MODULE
from odradek.network.scram import SCRAM_LOGIN_MODULE, SCRAM_MECHANISMS

#: Java settings librdkafka has no counterpart for; OpenSSL's defaults apply instead.
_DROPPED = (
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.provider",
    "sasl.login.callback.handler.class",
)
_UNSECURED_PREFIX = "unsecuredLogin"
_PEM_MARKER = b"-----BEGIN "


def librdkafka_config(properties: Mapping[str, str]) -> dict[str, str]:
    """``properties`` with the Java client's security settings turned into librdkafka's."""
    config = dict(properties)
    _trust_store(config)
    _key_store(config)
    algorithm = config.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and not algorithm.strip():
        config["ssl.endpoint.identification.algorithm"] = "none"
    jaas = config.pop("sasl.jaas.config", None)
    if jaas is not None:
        _login_module(config, jaas)
    dropped = [name for name in _DROPPED if config.pop(name, None) is not None]
    if dropped:
        print(
            f"note: {', '.join(dropped)}: no librdkafka counterpart, OpenSSL's defaults apply",
            file=sys.stderr,
        )
    return config


def _store_type(config: dict[str, str], store: str, location: str | None) -> str:
    """The store's type: as given, else PEM when its file is PEM, else Java's default JKS."""
    given = config.pop(f"ssl.{store}.type", None)
    if given is not None:
        return given.strip().upper()
    if location is None or _is_pem(location):
        return "PEM"
    return "JKS"


def _is_pem(location: str) -> bool:
    try:
        with open(location, "rb") as file:
            return _PEM_MARKER in file.read(1 << 16)
    except OSError as e:
        raise ToolError(f"cannot read {location}: {e.strerror}") from None


def _trust_store(config: dict[str, str]) -> None:
    location = config.pop("ssl.truststore.location", None)
    certificates = config.pop("ssl.truststore.certificates", None)
    password = config.pop("ssl.truststore.password", None)
    kind = _store_type(config, "truststore", location)
    if location is None and certificates is None:
        return
    if kind != "PEM":
        raise ToolError(
            f"ssl.truststore.type {kind}: librdkafka reads PEM trust stores only; export the CA "
            "certificates to PEM (keytool -exportcert -rfc -keystore FILE -alias ALIAS, or "
            "openssl pkcs12 -in FILE -nokeys) and set ssl.truststore.type=PEM"
        )
    if password is not None:
        raise ToolError("ssl.truststore.password cannot be specified for a PEM trust store")
    if location is not None:
        config["ssl.ca.location"] = location
    if certificates is not None:
        config["ssl.ca.pem"] = certificates


def _key_store(config: dict[str, str]) -> None:
    location = config.pop("ssl.keystore.location", None)
    key = config.pop("ssl.keystore.key", None)
    chain = config.pop("ssl.keystore.certificate.chain", None)
    password = config.pop("ssl.keystore.password", None)
    kind = _store_type(config, "keystore", location)
    if location is None and key is None and chain is None:
        return
    if kind == "PKCS12" and location is not None:
        config["ssl.keystore.location"] = location
        if password is not None:
            config["ssl.keystore.password"] = password
        return
    if kind != "PEM":
        raise ToolError(
            f"ssl.keystore.type {kind}: librdkafka cannot read Java KeyStores; convert it "
            "(keytool -importkeystore -srckeystore FILE -destkeystore FILE.p12 "
            "-deststoretype PKCS12) and set ssl.keystore.type=PKCS12, or use PEM"
        )
    if password is not None:
        raise ToolError(
            "ssl.keystore.password cannot be specified for a PEM key store; an encrypted key's "
            "password is ssl.key.password"
        )
    if location is not None:  # one PEM file with the key and its chain, as Kafka reads it
        config["ssl.key.location"] = location
        config["ssl.certificate.location"] = location
    if key is not None:
        config["ssl.key.pem"] = key
    if chain is not None:
        config["ssl.certificate.pem"] = chain


def _login_module(config: dict[str, str], text: str) -> None:
    try:
        entry = parse_single_module(text, "sasl.jaas.config")
    except JaasConfigError as e:
        raise ToolError(str(e)) from None
    if entry.login_module in (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE):
        _password_login(config, entry)
    elif entry.login_module == OAUTHBEARER_LOGIN_MODULE:
        config.setdefault("sasl.mechanism", "OAUTHBEARER")
        if any(name.startswith(_UNSECURED_PREFIX) for name in entry.options):
            _unsecured_login(config, entry.options)
        else:
            _oidc_login(config, entry.options)
    else:
        raise ToolError(
            f"sasl.jaas.config: login module {entry.login_module} cannot be translated for "
            f"librdkafka (PlainLoginModule, ScramLoginModule and OAuthBearerLoginModule can)"
        )


def _password_login(config: dict[str, str], entry: LoginModuleEntry) -> None:
    if entry.login_module == PLAIN_LOGIN_MODULE:
        config.setdefault("sasl.mechanism", "PLAIN")
    elif "sasl.mechanism" not in config:
        raise ToolError(
            "sasl.jaas.config has a ScramLoginModule: set sasl.mechanism to SCRAM-SHA-256 or "
            "SCRAM-SHA-512"
        )
    if entry.options.get("tokenauth", "").lower() == "true":
        raise ToolError("sasl.jaas.config: delegation-token logins (tokenauth) are not served")
    for option in ("username", "password"):
        if option not in entry.options:
            raise ToolError(f'sasl.jaas.config: {entry.login_module} needs {option}="..."')
        config[f"sasl.{option}"] = entry.options[option]


def _unsecured_login(config: dict[str, str], options: Mapping[str, str]) -> None:
    """Kafka's unsecured login options as librdkafka's ``sasl.oauthbearer.config``."""
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    scope_claim = options.get("unsecuredLoginScopeClaimName", "scope")
    settings = [f"principalClaimName={principal_claim}", f"scopeClaimName={scope_claim}"]
    principal = options.get(f"unsecuredLoginStringClaim_{principal_claim}")
    if not principal:
        raise ToolError(
            f"sasl.jaas.config: OAuthBearerLoginModule needs unsecuredLoginStringClaim_"
            f'{principal_claim}="<principal>"'
        )
    settings.append(f"principal={principal}")
    for name, value in options.items():
        if name in (
            "unsecuredLoginPrincipalClaimName",
            "unsecuredLoginScopeClaimName",
            f"unsecuredLoginStringClaim_{principal_claim}",
        ):
            continue
        if name == f"unsecuredLoginListClaim_{scope_claim}":
            # Kafka's list claim: the first character is the separator ("|a|b" or ",a,b")
            settings.append("scope=" + ",".join(s for s in value[1:].split(value[:1]) if s))
        elif name == "unsecuredLoginLifetimeSeconds":
            settings.append(f"lifeSeconds={value}")
        elif name.startswith("unsecuredLoginExtension_"):
            settings.append(f"extension_{name.removeprefix('unsecuredLoginExtension_')}={value}")
        elif name.startswith(_UNSECURED_PREFIX):
            raise ToolError(
                f"sasl.jaas.config: {name} cannot be given to librdkafka's unsecured token, "
                "which sets only its principal, scope, lifetime and extensions"
            )
    config["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    config["sasl.oauthbearer.config"] = " ".join(settings)


def _oidc_login(config: dict[str, str], options: Mapping[str, str]) -> None:
    """Kafka's OAuthBearerLoginCallbackHandler (client credentials) as librdkafka's OIDC."""
    if "sasl.oauthbearer.token.endpoint.url" not in config:
        raise ToolError(
            "sasl.jaas.config: an OAuthBearerLoginModule needs either unsecuredLogin* options "
            "or sasl.oauthbearer.token.endpoint.url with clientId and clientSecret"
        )
    config["sasl.oauthbearer.method"] = "oidc"
    for option, name in (("clientId", "client.id"), ("clientSecret", "client.secret")):
        if option not in options:
            raise ToolError(f'sasl.jaas.config: OAuthBearerLoginModule needs {option}="..."')
        config[f"sasl.oauthbearer.{name}"] = options[option]
    if "scope" in options:
        config["sasl.oauthbearer.scope"] = options["scope"]


@dataclass(frozen=True, slots=True)
class WireSecurity:
    """How the tools' own kio connections (``spark.connection``) connect: TLS and SASL."""

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslLogin | None = None


def wire_security(config: Mapping[str, Any]) -> WireSecurity:
    """The TLS context and SASL mechanism a librdkafka configuration describes, for a tool
    that speaks the protocol itself (``odradek transactions``)."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ToolError(f"security.protocol {protocol} is not one of Kafka's four")
    context = _ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
    sasl = _sasl_login(config) if protocol.startswith("SASL_") else None
    return WireSecurity(context, sasl)


def _ssl_context(config: Mapping[str, Any]) -> ssl.SSLContext:
    if "ssl.keystore.location" in config:
        raise ToolError(
            "a PKCS12 key store cannot be used by this tool; give its key and certificate as PEM"
        )
    try:
        context = ssl.create_default_context(
            cafile=config.get("ssl.ca.location"), cadata=config.get("ssl.ca.pem")
        )
        if str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
            context.check_hostname = False
        certificate, key = config.get("ssl.certificate.location"), config.get("ssl.key.location")
        with tempfile.TemporaryDirectory() as scratch:
            if "ssl.certificate.pem" in config:  # load_cert_chain reads files only
                certificate = Path(scratch, "chain.pem")
                certificate.write_text(config["ssl.certificate.pem"])
            if "ssl.key.pem" in config:
                key = Path(scratch, "key.pem")
                key.write_text(config["ssl.key.pem"])
            if certificate is not None:
                context.load_cert_chain(certificate, key, config.get("ssl.key.password"))
    except (OSError, ssl.SSLError) as e:
        raise ToolError(f"TLS settings: {e}") from None
    return context


def _sasl_login(config: Mapping[str, Any]) -> SaslLogin:
    mechanism = str(config.get("sasl.mechanism", "GSSAPI")).upper()
    if mechanism == "OAUTHBEARER":
        if str(config.get("enable.sasl.oauthbearer.unsecure.jwt", "false")).lower() != "true":
            raise ToolError(
                "OAUTHBEARER: this tool makes unsecured tokens only (an OAuthBearerLoginModule "
                "with unsecuredLogin* options); an identity provider's tokens cannot be fetched"
            )
        settings = dict(
            item.split("=", 1)
            for item in str(config.get("sasl.oauthbearer.config", "")).split()
            if "=" in item
        )
        if "principal" not in settings:
            raise ToolError("OAUTHBEARER: sasl.oauthbearer.config names no principal")
        return UnsecuredLogin(
            settings["principal"],
            tuple(s for s in settings.get("scope", "").split(",") if s),
            float(settings.get("lifeSeconds", 3600)),
            settings.get("principalClaimName", "sub"),
            settings.get("scopeClaimName", "scope"),
            {
                name.removeprefix("extension_"): value
                for name, value in settings.items()
                if name.startswith("extension_")
            },
        )
    username, password = config.get("sasl.username"), config.get("sasl.password")
    if mechanism not in ("PLAIN", *SCRAM_MECHANISMS):
        raise ToolError(f"sasl.mechanism {mechanism} cannot be used by this tool")
    if username is None or password is None:
        raise ToolError(f"{mechanism} needs a user name and password (sasl.jaas.config)")
    return SaslClientLogin(mechanism, str(username), str(password))
