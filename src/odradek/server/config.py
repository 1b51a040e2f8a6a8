"""Broker configuration: Kafka's broker config names, types and defaults.

Read from a server.properties file plus ``-o key=value`` overrides. A known key
with a bad value stops start-up with a message naming the key; an unknown key is
kept (plugins and later rooms read their own keys) and logged, as Kafka does.
The log.* keys are the broker-wide defaults of the topic-level configs and are
translated to a storage LogConfig by ``log_config_properties``.

Listeners are validated as Kafka's KafkaConfig validates them: every name in
``listeners`` and ``advertised.listeners`` has a security protocol in
``listener.security.protocol.map``; the inter-broker listener is named by
``inter.broker.listener.name`` or, when that is unset, is the listener named
after ``security.inter.broker.protocol`` (PLAINTEXT by default), never both; it
must be advertised, and the broker's own connections to the other brokers speak its
protocol (``inter_broker_client_security``: the listener's ssl.* configs on the client
side, ``sasl.mechanism.inter.broker.protocol`` with the ``username``/``password`` of
the listener's JAAS entry for that mechanism). Every one of Kafka's four protocols is
served; a SASL listener needs ``sasl.enabled.mechanisms`` (Kafka's default, GSSAPI, is
not implemented, so it must be set) among PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
OAUTHBEARER; PLAIN needs the
listener's ``listener.name.<l>.plain.sasl.jaas.config`` with its users, as Kafka's
broker reads them (``sasl_mechanisms``, ``plain_users``), and OAUTHBEARER its
OAuthBearerLoginModule entry, its validator's class and sasl.oauthbearer.* configs
(``oauthbearer_settings``; a mechanism's own value is Kafka's
``listener.name.<l>.<mechanism>.<config>``, ``mechanism_config``). A listener's own settings are Kafka's
``listener.name.<listener name in lower case>.<config>`` keys, which override the
unprefixed config for that listener (``ssl_config``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from odradek.java_properties import parse_properties
from odradek.metadata.topic_config_synonyms import topic_defaults_from_broker
from odradek.network.client_security import (
    LOGIN_MODULES,
    ClientLoginError,
    ClientSecurity,
    SaslClientLogin,
)
from odradek.network.connection_quotas import parse_overrides
from odradek.network.jaas_config import JaasConfigError, LoginModuleEntry, parse_single_module
from odradek.network.memory_pool import DEFAULT_QUEUED_MAX_REQUEST_BYTES
from odradek.network.oauthbearer_unsecured import OAuthBearerConfigError
from odradek.network.oauthbearer_validators import OAuthBearerSettings, check_settings
from odradek.network.sasl_channel import SUPPORTED_MECHANISMS
from odradek.network.sasl_oauthbearer import OAUTHBEARER_LOGIN_MODULE
from odradek.network.sasl_plain import PLAIN_LOGIN_MODULE, plain_users
from odradek.network.ssl_engine_factory import SslConfig, SslConfigError, create_client_context
from odradek.storage.config import CLEANUP_POLICIES, COMPRESSION_TYPES, TIMESTAMP_TYPES

log = logging.getLogger(__name__)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


#: Kafka's per-listener form of max.connections.
_LISTENER_MAX_CONNECTIONS = re.compile(r"listener\.name\.(?P<listener>[^.]+)\.max\.connections")

#: Kafka's security protocols.
#: The authorizer.class.name values served; both mean StandardAuthorizer's rules (acl_authorizer).
AUTHORIZER_CLASS_NAMES = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Any listener-prefixed config: ``listener.name.<listener>.<config>``.
_LISTENER_PREFIXED = re.compile(r"listener\.name\.(?P<listener>[^.]+)\.(?P<config>.+)")
#: A mechanism's own settings after the listener prefix: ``plain.sasl.jaas.config``.
_MECHANISM_PREFIXED = re.compile(
    r"[a-z0-9-]+\.(sasl\.jaas\.config|connections\.max\.reauth\.ms"
    r"|sasl\.server\.callback\.handler\.class|sasl\.oauthbearer\.[a-z.]+)"
)


#: The sasl.oauthbearer.* configs of OAUTHBEARER's JWT validator, Kafka's broker-side ones with
#: its types and defaults; listener- and mechanism-prefixed forms override them.
_OAUTHBEARER_DEFS: list[tuple[str, str, str | None, Importance, str]] = [
    (
        "sasl.oauthbearer.jwks.endpoint.url",
        "string",
        None,
        "medium",
        "JWKS of the identity provider: a file: URL (read at start-up) or an http(s): one.",
    ),
    (
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "long",
        "3600000",
        "low",
        "Wait between fetches of an http(s) JWKS.",
    ),
    (
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "long",
        "100",
        "low",
        "First wait before a failed JWKS fetch is retried (it doubles).",
    ),
    (
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "long",
        "10000",
        "low",
        "Longest wait between retries of a failed JWKS fetch.",
    ),
    (
        "sasl.oauthbearer.expected.audience",
        "list",
        None,
        "low",
        "Audiences a JWT's aud claim must hold one of (unset: a token with aud is refused).",
    ),
    (
        "sasl.oauthbearer.expected.issuer",
        "string",
        None,
        "low",
        "The iss a JWT must have (unset: not checked).",
    ),
    (
        "sasl.oauthbearer.sub.claim.name",
        "string",
        "sub",
        "low",
        "Claim naming the principal.",
    ),
    (
        "sasl.oauthbearer.scope.claim.name",
        "string",
        "scope",
        "low",
        "Claim holding the scope.",
    ),
    (
        "sasl.oauthbearer.clock.skew.seconds",
        "int",
        "30",
        "low",
        "Leeway in checking a JWT's exp and nbf against this broker's clock.",
    ),
]


#: Kafka's ConfigDef.Importance, as its configuration docs show it.
Importance = Literal["high", "medium", "low"]


class ConfigError(ValueError):
    """A broker config value is invalid; the message names the key."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One entry of listeners or advertised.listeners."""

    listener_name: str
    host: str
    port: int
    security_protocol: str


def _bool(value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ValueError("Expected value to be either true or false")
    return v == "true"


def _list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


#: Kafka's ConfigDef numeric types and the ranges their parsers accept.
_NUMERIC_RANGES = {
    "short": (-(2**15), 2**15 - 1),
    "int": (-(2**31), INT_MAX),
    "long": (-(2**63), LONG_MAX),
}
#: What Java's Integer/Long/Short.parseInt accept once trimmed: ASCII digits with an optional sign
#: (Python's int() would also take "1_000" and non-ASCII digits).
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _integer(kind: str) -> Callable[[str], int]:
    low, high = _NUMERIC_RANGES[kind]

    def parse(value: str) -> int:
        text = value.strip()
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ValueError(f"Not a number of type {kind.upper()}")
        return int(text)

    return parse


def _double(value: str) -> float:
    try:
        return float(value.strip())
    except ValueError:
        raise ValueError("Not a number of type DOUBLE") from None


_PARSERS: dict[str, Callable[[str], Any]] = {
    "boolean": _bool,
    "list": _list,
    "string": str,
    "short": _integer("short"),
    "int": _integer("int"),
    "long": _integer("long"),
    "double": _double,
    "class": str,
    "password": str,
}


def parse_config_value(name: str, kind: str, raw: str) -> Any:
    """``raw`` read as Kafka's ConfigDef type ``kind``; ConfigError says what Kafka's ConfigException says.

    Kafka's message names the key, the value as given and the expected type ("Invalid value x
    for configuration num.partitions: Not a number of type INT"), so an operator sees at once
    which setting to fix. Topic configs use the same parser (their types are the same names).
    """
    try:
        return _PARSERS[kind](raw)
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw} for configuration {name}: {e}") from None


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    #: Kafka's ConfigDef type (boolean, short, int, long, string, list), as DescribeConfigs reports it.
    type: str
    default: str | None
    #: One line saying what the config does, shown by DescribeConfigs and docs/reference/configs.md.
    doc: str
    #: Kafka's importance of the config (high, medium, low); ours are ranked the same way.
    importance: Importance
    #: Lowest accepted value for numeric configs.
    at_least: float | None = None
    #: Highest accepted value for numeric configs.
    at_most: float | None = None
    #: Accepted values lie strictly above this (a double where 0 makes no sense).
    above: float | None = None
    #: The accepted strings (for a list, of each item), as Kafka's ValidString and ValidList.
    valid_values: tuple[str, ...] | None = None
    #: How the value is read when that differs from the type's parser (listeners are a string to Kafka).
    reader: Callable[[str], Any] | None = None

    def parse(self, raw: str) -> Any:
        """The value ``raw`` gives; ConfigError (Kafka's wording) when it is not of this type."""
        if self.reader is None:
            return parse_config_value(self.name, self.type, raw)
        try:
            return self.reader(raw)
        except ValueError as e:
            raise ConfigError(f"Invalid value {raw} for configuration {self.name}: {e}") from None


#: The ssl.* configs an SSL listener is built from (network/ssl_engine_factory.py), with
#: Kafka's types, defaults and importance: (name, type, default, importance, description).
_SSL_DEFS: list[tuple[str, str, str | None, Importance, str]] = [
    ("ssl.keystore.type", "string", "JKS", "medium", "Key store format; only PEM is served."),
    ("ssl.keystore.location", "string", None, "high", "PEM file of the private key and chain."),
    ("ssl.keystore.password", "password", None, "high", "Refused with PEM, as Kafka refuses it."),
    ("ssl.key.password", "password", None, "high", "Password of an encrypted private key."),
    ("ssl.keystore.certificate.chain", "password", None, "high", "PEM certificate chain text."),
    ("ssl.keystore.key", "password", None, "high", "PEM private key text (PKCS#8)."),
    ("ssl.truststore.type", "string", "JKS", "medium", "Trust store format; only PEM is served."),
    ("ssl.truststore.location", "string", None, "high", "PEM file of trusted CA certificates."),
    ("ssl.truststore.password", "password", None, "high", "Refused with PEM, as Kafka refuses it."),
    ("ssl.truststore.certificates", "password", None, "high", "PEM CA certificates text."),
    ("ssl.protocol", "string", "TLSv1.3", "medium", "SSLContext algorithm name (checked only)."),
    ("ssl.cipher.suites", "list", None, "low", "Cipher suites, IANA or OpenSSL names."),
    ("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "medium", "TLS versions served."),
    (
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "low",
        "Rules mapping a client certificate's subject to the principal's name.",
    ),
]


def parse_http_listener(raw: str) -> tuple[str, int] | None:
    """``metrics.http.listener``: "host:port" (IPv6 in brackets) -> (host, port); empty -> None (off)."""
    if not raw.strip():
        return None
    host, colon, port = raw.strip().rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("expected host:port, such as 127.0.0.1:9644, or empty for no metrics")
    return host.strip("[]"), int(port)


_DEFS = [
    ConfigDef(
        "ssl.client.auth",
        "string",
        "none",
        "Whether clients must present a certificate: required, requested or none.",
        importance="medium",
        valid_values=("required", "requested", "none"),
    ),
    ConfigDef(
        "listeners",
        "string",
        "PLAINTEXT://127.0.0.1:9092",
        "Comma-separated listener URIs (NAME://host:port).",
        reader=_list,
        importance="high",
    ),
    ConfigDef(
        "advertised.listeners",
        "string",
        None,
        "Listeners published to clients; defaults to listeners.",
        reader=_list,
        importance="high",
    ),
    ConfigDef(
        "listener.security.protocol.map",
        "string",
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "Security protocol of each listener name, as NAME:PROTOCOL pairs.",
        reader=_list,
        importance="low",
    ),
    ConfigDef(
        "security.inter.broker.protocol",
        "string",
        "PLAINTEXT",
        "Security protocol between brokers (its listener has the protocol's name); only one of "
        "this and inter.broker.listener.name may be set.",
        importance="medium",
        valid_values=SECURITY_PROTOCOLS,
    ),
    *(
        ConfigDef(name, kind, default, doc, importance)
        for name, kind, default, importance, doc in _SSL_DEFS
    ),
    ConfigDef(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        "SASL mechanism this broker authenticates to the others with on a SASL inter-broker "
        "listener: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (GSSAPI, Kafka's default, is not served).",
        importance="medium",
    ),
    ConfigDef(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "How this broker checks the host name of the broker it connects to against its "
        "certificate: https, or empty for no check.",
        importance="low",
    ),
    ConfigDef(
        "num.replica.fetchers",
        "int",
        "1",
        "Connections a follower fetches with from each leader broker, partitions spread over "
        "them by Kafka's rule.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "sasl.enabled.mechanisms",
        "list",
        "GSSAPI",
        "SASL mechanisms a SASL listener offers, read at start-up: PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512 and OAUTHBEARER are served. GSSAPI (Kafka's default) is not, so a SASL listener must set "
        "it (or listener.name.<l>.sasl.enabled.mechanisms).",
        "medium",
    ),
    ConfigDef(
        "sasl.server.callback.handler.class",
        "class",
        None,
        "Server callback handler of a SASL mechanism, set as listener.name.<l>.<mechanism>."
        "sasl.server.callback.handler.class: for OAUTHBEARER, Kafka's "
        "OAuthBearerValidatorCallbackHandler validates JWTs against a JWKS; unset, unsecured "
        "tokens (alg none) are accepted, for development.",
        "medium",
    ),
    *(
        ConfigDef(name, kind, default, doc, importance)
        for name, kind, default, importance, doc in _OAUTHBEARER_DEFS
    ),
    ConfigDef(
        "log.dirs",
        "string",
        None,
        "Directories holding the log data; log.dir when unset.",
        reader=_list,
        importance="high",
    ),
    ConfigDef(
        "log.dir",
        "string",
        "/tmp/kafka-logs",
        "The directory holding log data when log.dirs is unset.",
        reader=_list,
        importance="high",
    ),
    ConfigDef(
        "node.id",
        "int",
        "-1",
        "This broker's id; -1 takes it from meta.properties (or 1).",
        at_least=-1,
        importance="high",
    ),
    ConfigDef(
        "broker.id",
        "int",
        "-1",
        "Older name of node.id; used when node.id is unset.",
        at_least=-1,
        importance="high",
    ),
    ConfigDef(
        "broker.rack",
        "string",
        None,
        "Rack of this broker, for rack-aware assignment.",
        importance="medium",
    ),
    ConfigDef(
        "metrics.http.listener",
        "string",
        "",
        "host:port of the HTTP listener serving Prometheus metrics at /metrics; empty: none.",
        importance="medium",
        reader=parse_http_listener,
    ),
    ConfigDef(
        "zookeeper.connect",
        "string",
        None,
        "host:port[,host:port...][/chroot] of ZooKeeper; set, the broker joins that cluster.",
        importance="high",
    ),
    ConfigDef(
        "zookeeper.session.timeout.ms",
        "int",
        "18000",
        "ZooKeeper session timeout: a broker silent this long is dead to the cluster.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "zookeeper.connection.timeout.ms",
        "int",
        None,
        "Longest wait for a ZooKeeper connection; zookeeper.session.timeout.ms when unset.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "controlled.shutdown.enable",
        "boolean",
        "true",
        "On SIGTERM, have the controller move this broker's leaderships away before it exits.",
        importance="medium",
    ),
    ConfigDef(
        "controlled.shutdown.max.retries",
        "int",
        "3",
        "Controlled shutdown attempts before the broker exits with leaderships it still holds.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "controlled.shutdown.retry.backoff.ms",
        "long",
        "5000",
        "How long one controlled shutdown attempt waits for the leaderships to move.",
        at_least=0,
        importance="low",
    ),
    ConfigDef(
        "auto.leader.rebalance.enable",
        "boolean",
        "true",
        "Let the controller move leadership back to each partition's preferred replica.",
        importance="high",
    ),
    ConfigDef(
        "leader.imbalance.check.interval.seconds",
        "long",
        "300",
        "How often the controller checks the leader imbalance of every broker.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "leader.imbalance.per.broker.percentage",
        "int",
        "10",
        "Share of a broker's preferred leaderships held elsewhere above which they move back.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "unclean.leader.election.enable",
        "boolean",
        "false",
        "Let a replica outside the ISR become leader when no ISR member is live (data loss).",
        importance="high",
    ),
    ConfigDef(
        "cluster.id",
        "string",
        None,
        "Cluster id for a new data dir; generated when unset.",
        importance="low",
    ),
    ConfigDef(
        "num.partitions",
        "int",
        "1",
        "Default partition count of auto-created topics.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "default.replication.factor",
        "int",
        "1",
        "Default replication factor of auto-created topics.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "auto.create.topics.enable",
        "boolean",
        "true",
        "Create a topic when a client asks for its metadata.",
        importance="high",
    ),
    ConfigDef(
        "delete.topic.enable",
        "boolean",
        "true",
        "Whether DeleteTopics may delete topics; when false it answers TOPIC_DELETION_DISABLED.",
        importance="high",
    ),
    ConfigDef(
        "message.max.bytes",
        "int",
        "1048588",
        "Largest record batch (after compression) the broker accepts; max.message.bytes default.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "compression.type",
        "string",
        "producer",
        "compression.type default: the codec topics store batches in; producer keeps what was sent.",
        valid_values=COMPRESSION_TYPES,
        importance="high",
    ),
    ConfigDef(
        "compression.gzip.level",
        "int",
        "-1",
        "compression.gzip.level default: gzip level when the broker compresses (-1 or 1-9).",
        at_least=-1,
        at_most=9,
        importance="medium",
    ),
    ConfigDef(
        "compression.lz4.level",
        "int",
        "9",
        "compression.lz4.level default: lz4 level when the broker compresses (1-17).",
        at_least=1,
        at_most=17,
        importance="medium",
    ),
    ConfigDef(
        "compression.zstd.level",
        "int",
        "3",
        "compression.zstd.level default: zstd level when the broker compresses (up to 22).",
        at_least=-131072,
        at_most=22,
        importance="medium",
    ),
    ConfigDef(
        "socket.request.max.bytes",
        "int",
        "104857600",
        "Largest request the broker reads; a bigger size prefix closes the connection.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "queued.max.request.bytes",
        "long",
        str(DEFAULT_QUEUED_MAX_REQUEST_BYTES),
        "Request bytes held across all connections (being received or waiting) before connections "
        "stop reading until memory frees; at least socket.request.max.bytes, <= 0 unbounded "
        "(Kafka's default -1; 256 MiB here so requests cannot exhaust a small machine).",
        importance="medium",
    ),
    ConfigDef(
        "quota.window.num",
        "int",
        "11",
        "Windows a client quota's rate is measured over (producer, consumer and request quotas).",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "quota.window.size.seconds",
        "int",
        "1",
        "Length of each window of a client quota's rate.",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "controller.quota.window.num",
        "int",
        "11",
        "Windows of controller_mutation_rate quotas: the burst a client may mutate at once.",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "controller.quota.window.size.seconds",
        "int",
        "1",
        "Length of each window of controller_mutation_rate quotas.",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "connections.max.idle.ms",
        "long",
        "600000",
        "A connection with no request for this long is closed.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "connections.max.reauth.ms",
        "long",
        "0",
        "Lifetime of an authenticated SASL session (KIP-368): a client re-authenticates on its "
        "connection before it ends, else the connection is closed at its next request; 0 (or "
        "less) for sessions as long as their connections. Listener- and mechanism-prefixed "
        "forms (listener.name.<l>.<mechanism>.connections.max.reauth.ms) override it.",
        importance="medium",
    ),
    ConfigDef(
        "authorizer.class.name",
        "string",
        "",
        "The authorizer deciding every request by ACLs: "
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer (or Kafka's ZooKeeper-mode "
        "name kafka.security.authorizer.AclAuthorizer, the same rules). Empty: no authorization, "
        "every request allowed.",
        importance="low",
    ),
    ConfigDef(
        "super.users",
        "string",
        "",
        "Principals the authorizer allows everything, whatever the ACLs, separated by "
        "semicolons (User:admin;User:broker). Brokers' own principal belongs here when they "
        "replicate over an authenticated listener.",
        importance="low",
    ),
    ConfigDef(
        "allow.everyone.if.no.acl.found",
        "boolean",
        "false",
        "Whether the authorizer allows an action on a resource that has no ACL at all.",
        importance="low",
    ),
    ConfigDef(
        "max.connections.per.ip",
        "int",
        str(INT_MAX),
        "Connections allowed from one address (0 only with overrides); more are closed at once.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "max.connections.per.ip.overrides",
        "string",
        "",
        'Per-address or host name overrides of max.connections.per.ip, e.g. "hostName:100,127.0.0.1:200".',
        reader=parse_overrides,
        importance="medium",
    ),
    ConfigDef(
        "max.connections",
        "int",
        str(INT_MAX),
        "Connections allowed in the broker at once (listener.name.<name>.max.connections per listener); "
        "at the limit the listener stops accepting until a connection closes.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "num.network.threads",
        "int",
        "3",
        "Accepted for compatibility; one event loop does the network I/O.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "num.io.threads",
        "int",
        "8",
        "Accepted for compatibility; blocking work uses a thread pool.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "log.segment.bytes",
        "int",
        "1073741824",
        "segment.bytes default: size at which the active segment is rolled.",
        at_least=14,
        importance="high",
    ),
    ConfigDef(
        "log.roll.ms",
        "long",
        None,
        "segment.ms default; log.roll.hours when unset.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "log.roll.hours",
        "int",
        "168",
        "segment.ms default in hours; log.roll.ms wins when set.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "log.roll.jitter.ms",
        "long",
        None,
        "segment.jitter.ms default: random jitter subtracted from the roll time.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "log.roll.jitter.hours",
        "int",
        "0",
        "segment.jitter.ms default in hours; log.roll.jitter.ms wins when set.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "log.retention.ms",
        "long",
        None,
        "retention.ms default: how long records are kept; -1 keeps them forever.",
        at_least=-1,
        importance="high",
    ),
    ConfigDef(
        "log.retention.minutes",
        "int",
        None,
        "retention.ms default in minutes; log.retention.ms wins when set.",
        at_least=-1,
        importance="high",
    ),
    ConfigDef(
        "log.retention.hours",
        "int",
        "168",
        "retention.ms default in hours; log.retention.ms and .minutes win when set.",
        at_least=-1,
        importance="high",
    ),
    ConfigDef(
        "log.retention.bytes",
        "long",
        "-1",
        "retention.bytes default: largest size of a partition's log; -1 for no limit.",
        at_least=-1,
        importance="high",
    ),
    ConfigDef(
        "log.retention.check.interval.ms",
        "long",
        "300000",
        "How often the broker deletes segments that retention no longer keeps.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "log.flush.interval.messages",
        "long",
        str(LONG_MAX),
        "flush.messages default: fsync a log after this many records.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "log.flush.interval.ms",
        "long",
        None,
        "flush.ms default: fsync a log when its oldest unflushed record is this old.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "log.flush.scheduler.interval.ms",
        "long",
        str(LONG_MAX),
        "How often the broker checks whether a log is due for a time-based flush.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "log.flush.offset.checkpoint.interval.ms",
        "int",
        "60000",
        "How often each log directory's recovery point checkpoint is written.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "log.index.size.max.bytes",
        "int",
        "10485760",
        "segment.index.bytes default: preallocated size of index files.",
        at_least=4,
        importance="medium",
    ),
    ConfigDef(
        "log.index.interval.bytes",
        "int",
        "4096",
        "index.interval.bytes default: bytes of records between offset index entries.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.segment.delete.delay.ms",
        "long",
        "60000",
        "file.delete.delay.ms default: how long deleted segments and deleted partitions' "
        "directories stay on disk (readers may still hold them) before they are removed.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "log.cleanup.policy",
        "list",
        "delete",
        "cleanup.policy default: delete old segments, compact by key, or both.",
        valid_values=CLEANUP_POLICIES,
        importance="medium",
    ),
    ConfigDef(
        "log.message.timestamp.type",
        "string",
        "CreateTime",
        "message.timestamp.type default: CreateTime or LogAppendTime.",
        valid_values=TIMESTAMP_TYPES,
        importance="medium",
    ),
    ConfigDef(
        "log.message.timestamp.before.max.ms",
        "long",
        str(LONG_MAX),
        "message.timestamp.before.max.ms default: how far a CreateTime may lie behind the broker's clock.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.message.timestamp.after.max.ms",
        "long",
        "3600000",
        "message.timestamp.after.max.ms default: how far a CreateTime may lie ahead of the broker's clock.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.enable",
        "boolean",
        "true",
        "Run the log cleaner; when false, compacted topics are never cleaned and grow without bound.",
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.threads",
        "int",
        "1",
        "How many logs the cleaner compacts at once (0: none).",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.backoff.ms",
        "long",
        "15000",
        "How long the cleaner sleeps when there are no logs to clean.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.dedupe.buffer.size",
        "long",
        str(128 * 1024 * 1024),
        "Memory of the cleaner's offset map (16-byte key hash plus 8-byte offset per key).",
        at_least=1024 * 1024,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.io.buffer.size",
        "int",
        str(512 * 1024),
        "The cleaner's read buffer; a larger batch is read whole on its own.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.delete.retention.ms",
        "long",
        "86400000",
        "delete.retention.ms default: how long tombstones stay in a compacted log.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.min.compaction.lag.ms",
        "long",
        "0",
        "min.compaction.lag.ms default: the shortest time a record stays uncompacted.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.max.compaction.lag.ms",
        "long",
        str(LONG_MAX),
        "max.compaction.lag.ms default: the longest time a record stays uncompacted.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.min.cleanable.ratio",
        "double",
        "0.5",
        "min.cleanable.dirty.ratio default: the dirty share that makes a log cleanable.",
        at_least=0,
        at_most=1,
        importance="medium",
    ),
    ConfigDef(
        "log.preallocate",
        "boolean",
        "false",
        "preallocate default: create segment files at their full size.",
        importance="medium",
    ),
    ConfigDef(
        "log.cleaner.io.buffer.load.factor",
        "double",
        "0.9",
        "How full the offset map may get before a cleaning stops at the offsets it has mapped.",
        above=0,
        at_most=1.0,
        importance="medium",
    ),
    ConfigDef(
        "min.insync.replicas",
        "int",
        "1",
        "min.insync.replicas default: in-sync replicas needed for an acks=all write.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "replica.fetch.max.bytes",
        "int",
        "1048576",
        "Bytes a follower asks for per partition (one larger batch is still fetched whole).",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "replica.fetch.response.max.bytes",
        "int",
        "10485760",
        "Bytes a follower asks for per fetch response, over all its partitions.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "replica.fetch.min.bytes",
        "int",
        "1",
        "Bytes a leader waits for before it answers a follower's fetch.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "replica.fetch.wait.max.ms",
        "int",
        "500",
        "Longest a leader holds a follower's fetch waiting for data; below "
        "replica.lag.time.max.ms.",
        at_least=0,
        importance="high",
    ),
    ConfigDef(
        "replica.fetch.backoff.ms",
        "int",
        "1000",
        "How long a follower waits after a failed fetch before it tries again.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "replica.socket.timeout.ms",
        "int",
        "30000",
        "Longest a follower waits for a leader's answer before it reconnects.",
        importance="high",
    ),
    ConfigDef(
        "inter.broker.listener.name",
        "string",
        None,
        "Listener brokers use to reach each other (followers fetch through it); the one named "
        "after security.inter.broker.protocol when unset.",
        importance="medium",
    ),
    ConfigDef(
        "replica.lag.time.max.ms",
        "long",
        "30000",
        "A follower not caught up with its leader for this long leaves the ISR.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "offsets.topic.num.partitions",
        "int",
        "50",
        "Partition count of __consumer_offsets, fixed once the topic exists.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "offsets.topic.replication.factor",
        "short",
        "3",
        "Replication factor of __consumer_offsets (capped at live brokers).",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "offsets.topic.segment.bytes",
        "int",
        "104857600",
        "segment.bytes of __consumer_offsets: small segments keep its compaction quick.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "offsets.commit.timeout.ms",
        "int",
        "5000",
        "Longest an offset commit waits for its record to reach every in-sync replica.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "offsets.retention.minutes",
        "int",
        "10080",
        "How long committed offsets of empty groups are kept.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.state.log.num.partitions",
        "int",
        "50",
        "Partition count of __transaction_state, fixed once the topic exists.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.state.log.replication.factor",
        "short",
        "3",
        "Replication factor of __transaction_state (capped at the live brokers).",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.state.log.segment.bytes",
        "int",
        "104857600",
        "segment.bytes of __transaction_state: small segments keep its compaction quick.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.state.log.min.isr",
        "int",
        "2",
        "min.insync.replicas of __transaction_state (capped at its replication factor).",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.max.timeout.ms",
        "int",
        "900000",
        "The largest transaction.timeout.ms a producer may ask for.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.two.phase.commit.enable",
        "boolean",
        "false",
        "Let producers ask for two-phase commit (KIP-939): no timeout, kept across restarts.",
        importance="high",
    ),
    ConfigDef(
        "transactional.id.expiration.ms",
        "int",
        "604800000",
        "A transactional id with no transaction for this long is forgotten.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "int",
        "10000",
        "How often transactions past their timeout are looked for and aborted.",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "int",
        "3600000",
        "How often expired transactional ids are looked for and removed.",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "producer.id.expiration.ms",
        "int",
        "86400000",
        "A producer id that wrote nothing for this long has its idempotence state dropped.",
        at_least=1,
        importance="low",
    ),
    ConfigDef(
        "group.initial.rebalance.delay.ms",
        "int",
        "3000",
        "Delay before the first rebalance of a new group.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "group.min.session.timeout.ms",
        "int",
        "6000",
        "Smallest session timeout a member may ask for.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "group.max.session.timeout.ms",
        "int",
        "1800000",
        "Largest session timeout a member may ask for.",
        at_least=0,
        importance="medium",
    ),
    ConfigDef(
        "group.max.size",
        "int",
        str(INT_MAX),
        "Most members a classic group may have; a join beyond it is refused.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "offset.metadata.max.bytes",
        "int",
        "4096",
        "Largest metadata string an offset commit may carry.",
        importance="high",
    ),
    ConfigDef(
        "offsets.retention.check.interval.ms",
        "long",
        "600000",
        "How often the group coordinator looks for expired offsets.",
        at_least=1,
        importance="high",
    ),
    ConfigDef(
        "group.consumer.session.timeout.ms",
        "int",
        "45000",
        "Session timeout of consumer-protocol (KIP-848) group members.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "group.consumer.heartbeat.interval.ms",
        "int",
        "5000",
        "Heartbeat interval the coordinator gives consumer-protocol group members.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "group.consumer.max.size",
        "int",
        str(INT_MAX),
        "Most members a consumer-protocol group may have; a join beyond it is refused.",
        at_least=1,
        importance="medium",
    ),
    ConfigDef(
        "group.consumer.migration.policy",
        "string",
        "bidirectional",
        "Which online conversions between classic and consumer groups are allowed (any case).",
        valid_values=("disabled", "upgrade", "downgrade", "bidirectional"),
        reader=lambda value: value.strip().lower(),
        importance="medium",
    ),
    ConfigDef(
        "max.request.partition.size.limit",
        "int",
        "2000",
        "Most partitions one DescribeTopicPartitions response describes.",
        at_least=1,
        importance="medium",
    ),
]

#: Kafka's dynamic broker configs (see server/dynamic_broker_config.py) for features this
#: broker does not have (JVM TLS providers, SASL, metrics reporters, remote storage, replica fetchers,
#: replication quotas): accepted with Kafka's types and defaults, stored and described, so
#: tools that set them work, but nothing here reads them.
#: (name, type, default, importance, one-line description).
_ACCEPTED_DYNAMIC: list[tuple[str, str, str | None, Importance, str]] = [
    ("ssl.provider", "string", None, "medium", "Security provider of the SSL connections."),
    (
        "ssl.keymanager.algorithm",
        "string",
        "SunX509",
        "low",
        "Key manager factory algorithm of the SSL context.",
    ),
    (
        "ssl.trustmanager.algorithm",
        "string",
        "PKIX",
        "low",
        "Trust manager factory algorithm of the SSL context.",
    ),
    (
        "ssl.secure.random.implementation",
        "string",
        None,
        "low",
        "SecureRandom implementation of TLS operations.",
    ),
    ("ssl.engine.factory.class", "class", None, "low", "Class that creates the SSL engines."),
    (
        "principal.builder.class",
        "class",
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        "medium",
        "Class that builds the principal of a connection from its authentication.",
    ),
    (
        "sasl.jaas.config",
        "password",
        None,
        "medium",
        "JAAS login context of SASL connections, in Kafka's JAAS syntax.",
    ),
    (
        "sasl.kerberos.service.name",
        "string",
        None,
        "medium",
        "Kerberos principal name the broker runs as.",
    ),
    (
        "sasl.kerberos.kinit.cmd",
        "string",
        "/usr/bin/kinit",
        "low",
        "Path of the Kerberos kinit command.",
    ),
    (
        "sasl.kerberos.ticket.renew.window.factor",
        "double",
        "0.8",
        "low",
        "Share of a Kerberos ticket's lifetime after which it is renewed.",
    ),
    (
        "sasl.kerberos.ticket.renew.jitter",
        "double",
        "0.05",
        "low",
        "Random jitter added to the Kerberos renewal time.",
    ),
    (
        "sasl.kerberos.min.time.before.relogin",
        "long",
        "60000",
        "low",
        "Shortest wait between Kerberos re-logins.",
    ),
    (
        "sasl.kerberos.principal.to.local.rules",
        "list",
        "DEFAULT",
        "medium",
        "Rules mapping Kerberos principals to short names.",
    ),
    (
        "sasl.login.refresh.window.factor",
        "double",
        "0.8",
        "low",
        "Share of a login credential's lifetime after which it is refreshed.",
    ),
    (
        "sasl.login.refresh.window.jitter",
        "double",
        "0.05",
        "low",
        "Random jitter added to the credential refresh time.",
    ),
    (
        "sasl.login.refresh.min.period.seconds",
        "short",
        "60",
        "low",
        "Shortest wait between credential refreshes.",
    ),
    (
        "sasl.login.refresh.buffer.seconds",
        "short",
        "300",
        "low",
        "Time before a credential expires at which it is refreshed.",
    ),
    (
        "max.connection.creation.rate",
        "int",
        "2147483647",
        "medium",
        "New connections accepted per second on the broker (per listener with a listener prefix).",
    ),
    (
        "log.cleaner.io.max.bytes.per.second",
        "double",
        "1.7976931348623157E308",
        "medium",
        "Limit on the log cleaner's read and write rate.",
    ),
    (
        "num.recovery.threads.per.data.dir",
        "int",
        "2",
        "high",
        "Threads per data directory that recover logs at start-up and flush them at shutdown.",
    ),
    (
        "background.threads",
        "int",
        "10",
        "high",
        "Threads for background work such as deleting files.",
    ),
    (
        "metric.reporters",
        "list",
        "org.apache.kafka.common.metrics.JmxReporter",
        "low",
        "Classes that receive the broker's metrics.",
    ),
    (
        "transaction.partition.verification.enable",
        "boolean",
        "true",
        "low",
        "Verify that a partition was added to the transaction before a transactional write.",
    ),
    (
        "remote.log.index.file.cache.total.size.bytes",
        "long",
        "1073741824",
        "low",
        "Disk size of the tiered-storage index cache.",
    ),
    (
        "remote.fetch.max.wait.ms",
        "int",
        "500",
        "medium",
        "Longest wait of a fetch for data in tiered storage.",
    ),
    (
        "remote.log.manager.copy.max.bytes.per.second",
        "long",
        str(LONG_MAX),
        "medium",
        "Limit on the rate of copying segments to tiered storage.",
    ),
    (
        "remote.log.manager.fetch.max.bytes.per.second",
        "long",
        str(LONG_MAX),
        "medium",
        "Limit on the rate of reading segments from tiered storage.",
    ),
    (
        "remote.list.offsets.request.timeout.ms",
        "long",
        "30000",
        "medium",
        "Timeout of ListOffsets lookups in tiered storage.",
    ),
    (
        "leader.replication.throttled.rate",
        "long",
        str(LONG_MAX),
        "medium",
        "Limit on the rate leaders send throttled replication traffic.",
    ),
    (
        "follower.replication.throttled.rate",
        "long",
        str(LONG_MAX),
        "medium",
        "Limit on the rate followers fetch throttled replication traffic.",
    ),
    (
        "replica.alter.log.dirs.io.max.bytes.per.second",
        "long",
        str(LONG_MAX),
        "medium",
        "Limit on the rate of moving replicas between log directories.",
    ),
]
_DEFS += [
    ConfigDef(
        name, kind, default, f"{description} Accepted for compatibility; not used yet.", importance
    )
    for name, kind, default, importance, description in _ACCEPTED_DYNAMIC
]

CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in _DEFS}

#: The configs a TLS listener is built from (SslConfig's fields under Kafka's names).
_SSL_CONFIGS = tuple("ssl." + f.replace("_", ".") for f in SslConfig.__dataclass_fields__)


def read_properties(path: str | Path) -> dict[str, str]:
    """A server.properties file, read as Java reads it (``java_properties``)."""
    return parse_properties(Path(path).read_text())


class BrokerConfig:
    """Validated broker configs; ``config["num.partitions"]`` gives the parsed value."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.originals = dict(props)
        self._values: dict[str, Any] = {}
        for name, definition in CONFIG_DEFS.items():
            raw = props.get(name, definition.default)
            self._values[name] = None if raw is None else self._parse(definition, raw)
        self._listeners = self._endpoints("listeners", distinct_ports=True)
        self._advertised = self._endpoints("advertised.listeners", distinct_ports=False)
        self._check_listeners()
        #: The listener followers fetch through (Kafka's interBrokerListenerName).
        self.inter_broker_listener_name = self._inter_broker_listener()
        for endpoint in self._listeners:  # parse each listener's own ssl.* and sasl values now
            if endpoint.security_protocol in ("SSL", "SASL_SSL"):
                self.ssl_config(endpoint.listener_name)
            if endpoint.security_protocol.startswith("SASL_"):
                mechanisms = self.sasl_mechanisms(endpoint.listener_name)
                if "PLAIN" in mechanisms:
                    self.plain_users(endpoint.listener_name)
                if "OAUTHBEARER" in mechanisms:
                    self.oauthbearer_settings(endpoint.listener_name)
                for mechanism in mechanisms:
                    self.max_reauth_ms(endpoint.listener_name, mechanism)
        self.inter_broker_sasl_login()  # a SASL inter-broker listener needs a login now
        if self["max.connections.per.ip"] == 0 and not self["max.connections.per.ip.overrides"]:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                "property is set."
            )
        self._check_queued_max_request_bytes()
        self._check_authorizer()
        self._listener_max_connections = self._per_listener_max_connections()
        for name in props:
            prefixed = _LISTENER_PREFIXED.fullmatch(name)
            if name not in CONFIG_DEFS and not (
                prefixed
                and (
                    prefixed["config"] in CONFIG_DEFS
                    or _MECHANISM_PREFIXED.fullmatch(prefixed["config"]) is not None
                )
            ):
                log.info(
                    "config %s=%s is not a known broker config; kept as given", name, props[name]
                )

    @staticmethod
    def _parse(definition: ConfigDef, raw: str) -> Any:
        """The value, checked as Kafka's validators check it (their messages, the key named)."""
        value = definition.parse(raw)
        problem = None
        if definition.at_least is not None and value < definition.at_least:
            problem = f"Value must be at least {definition.at_least}"
        elif definition.above is not None and not value > definition.above:
            problem = f"Value must be above {definition.above}"
        elif definition.at_most is not None and value > definition.at_most:
            problem = f"Value must be no more than {definition.at_most}"
        elif definition.valid_values is not None:
            items = value if isinstance(value, list) else [value]
            if any(item not in definition.valid_values for item in items):
                problem = f"String must be one of: {', '.join(definition.valid_values)}"
        if problem is not None:
            raise ConfigError(f"Invalid value {raw} for configuration {definition.name}: {problem}")
        return value

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return self.originals[name]

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    @property
    def node_id(self) -> int | None:
        node_id = self["node.id"] if self["node.id"] >= 0 else self["broker.id"]
        return node_id if node_id >= 0 else None

    @property
    def log_dirs(self) -> list[str]:
        return self["log.dirs"] or self["log.dir"]

    def _security_protocols(self) -> dict[str, str]:
        protocols = {}
        for entry in self["listener.security.protocol.map"]:
            name, sep, protocol = entry.partition(":")
            if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"Invalid value {entry!r} for configuration listener.security.protocol.map: "
                    f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
                )
            protocols[name.strip().upper()] = protocol.strip().upper()
        return protocols

    def _endpoints(self, key: str, distinct_ports: bool) -> list[Endpoint]:
        protocols = self._security_protocols()
        endpoints = []
        for uri in self._values[key] or ():
            name, host, port = parse_listener(uri, key)
            if name not in protocols:
                raise ConfigError(
                    f"Invalid value {uri!r} for configuration {key}: "
                    f"no security protocol defined for listener {name} in listener.security.protocol.map"
                )
            endpoints.append(Endpoint(name, host, port, protocols[name]))
        names = [e.listener_name for e in endpoints]
        if len(set(names)) != len(names):
            raise ConfigError(
                f"Each listener must have a different name, {key}: {','.join(self._values[key])}"
            )
        ports = [e.port for e in endpoints if e.port != 0]
        if distinct_ports and len(set(ports)) != len(ports):
            raise ConfigError(
                f"Each listener must have a different port, {key}: {','.join(self._values[key])}"
            )
        return endpoints

    def _check_authorizer(self) -> None:
        """A clear start-up error for an authorizer this broker does not have."""
        name = self["authorizer.class.name"]
        if name and name not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(
                f"Invalid value {name} for configuration authorizer.class.name: the authorizers "
                f"served are {' and '.join(AUTHORIZER_CLASS_NAMES)}"
            )

    def _check_listeners(self) -> None:
        if not self._listeners:
            raise ConfigError(
                "Invalid value '' for configuration listeners: at least one listener is needed"
            )
        names = {e.listener_name for e in self._listeners}
        extra = [e.listener_name for e in self._advertised if e.listener_name not in names]
        if extra:
            raise ConfigError(
                "advertised.listeners listener names must be equal to or a subset of the ones defined in "
                f"listeners. Found {','.join(extra)}. The valid options based on currently configured "
                f"listeners are {','.join(sorted(names))}"
            )
        if any(e.host == "0.0.0.0" for e in self._advertised):
            raise ConfigError(
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                "Use a routable IP address."
            )

    def _inter_broker_listener(self) -> str:
        """Kafka's getInterBrokerListenerNameAndSecurityProtocol, and its check that it is advertised."""
        name = self["inter.broker.listener.name"]
        if name is not None:
            if "security.inter.broker.protocol" in self.originals:
                raise ConfigError(
                    "Only one of inter.broker.listener.name and security.inter.broker.protocol "
                    "should be set."
                )
            name = name.upper()
            if name not in self._security_protocols():
                raise ConfigError(
                    f"Listener with name {name} defined in inter.broker.listener.name not found "
                    "in listener.security.protocol.map."
                )
        else:  # one of SECURITY_PROTOCOLS (its validator), and a listener of that name
            name = self["security.inter.broker.protocol"]
        advertised = [e.listener_name for e in self._advertised or self._listeners]
        if name not in advertised:
            raise ConfigError(
                "inter.broker.listener.name must be a listener name defined in "
                "advertised.listeners. The valid options based on currently configured listeners "
                f"are {','.join(advertised)}"
            )
        return name

    def inter_broker_security_protocol(self) -> str:
        return self._security_protocols()[self.inter_broker_listener_name]

    def inter_broker_sasl_login(self) -> SaslClientLogin | None:
        """The mechanism and credentials this broker authenticates to the others with, when
        the inter-broker listener is SASL: ``sasl.mechanism.inter.broker.protocol``, enabled on
        that listener (Kafka's check), and the ``username``/``password`` of the listener's JAAS
        entry for it, ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (Kafka's
        JaasContext.loadServerContext, which the broker's client side logs in with)."""
        listener = self.inter_broker_listener_name
        if not self.inter_broker_security_protocol().startswith("SASL_"):
            return None
        mechanism = self["sasl.mechanism.inter.broker.protocol"]
        if mechanism not in SUPPORTED_MECHANISMS:
            raise ConfigError(
                f"sasl.mechanism.inter.broker.protocol {mechanism}"
                f"{' (the default)' if 'sasl.mechanism.inter.broker.protocol' not in self.originals else ''}"
                f" cannot be used: the inter-broker listener {listener} is SASL and this broker "
                f"authenticates with {', '.join(SUPPORTED_MECHANISMS)} only; set "
                "sasl.mechanism.inter.broker.protocol to one of them"
            )
        if mechanism not in self.sasl_mechanisms(listener):
            raise ConfigError(
                "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms "
                f"when SASL is used for inter-broker communication (listener {listener} enables "
                f"{','.join(self.sasl_mechanisms(listener))}, not {mechanism})"
            )
        key, entry = self._mechanism_jaas_entry(
            listener,
            mechanism,
            f"the inter-broker listener {listener} uses SASL {mechanism} but {{key}} is not "
            f'set: give it "{LOGIN_MODULES[mechanism]} required username="<user>" '
            'password="<password>";", the login this broker authenticates to the others with',
        )
        try:
            return SaslClientLogin.from_jaas(mechanism, entry, key)
        except ClientLoginError as e:
            raise ConfigError(str(e)) from None

    def _mechanism_jaas_entry(
        self, listener: str, mechanism: str, missing: str
    ) -> tuple[str, LoginModuleEntry]:
        """The key and parsed entry of ``listener.name.<l>.<mechanism>.sasl.jaas.config``
        (Kafka's place for a mechanism's JAAS entry on a listener); ``missing`` is the
        message, with ``{key}``, when it is not set."""
        key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        text = self.originals.get(key)
        if text is None:
            raise ConfigError(missing.format(key=key))
        try:
            return key, parse_single_module(text, key)
        except JaasConfigError as e:
            raise ConfigError(str(e)) from None

    def inter_broker_client_security(self) -> ClientSecurity:
        """How this broker's connections to the others (followers' fetches, transaction
        markers) speak the inter-broker listener's protocol: TLS with that listener's ssl.*
        configs on the client side, as Kafka's inter-broker channel, and its SASL login."""
        protocol = self.inter_broker_security_protocol()
        context = None
        if protocol in ("SSL", "SASL_SSL"):
            listener = self.inter_broker_listener_name
            try:
                context = create_client_context(self.ssl_config(listener))
            except SslConfigError as e:
                raise ConfigError(
                    f"inter-broker listener {listener} ({protocol}), client side: {e}"
                ) from None
        return ClientSecurity(protocol, context, self.inter_broker_sasl_login())

    def listener_config(self, listener_name: str, name: str) -> Any:
        """``name``'s value for one listener: ``listener.name.<listener>.<name>`` when set, else
        the broker-wide value (Kafka's valuesWithPrefixOverride; the prefix is lower-case)."""
        key = f"listener.name.{listener_name.lower()}.{name}"
        if key in self.originals:
            return self._parse(replace(CONFIG_DEFS[name], name=key), self.originals[key])
        return self[name]

    def ssl_config(self, listener_name: str) -> SslConfig:
        """The ssl.* configs of one listener, its own overrides applied."""
        return SslConfig.from_configs(
            {name: self.listener_config(listener_name, name) for name in _SSL_CONFIGS}
        )

    def sasl_mechanisms(self, listener_name: str) -> tuple[str, ...]:
        """A SASL listener's ``sasl.enabled.mechanisms``: ones this broker implements, at least one."""
        mechanisms = tuple(self.listener_config(listener_name, "sasl.enabled.mechanisms"))
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise ConfigError(
                f"listener {listener_name}: sasl.enabled.mechanisms "
                f"{','.join(mechanisms) or '(empty)'} cannot be served "
                f"({', '.join(unsupported) or 'none given'}): set "
                f"listener.name.{listener_name.lower()}.sasl.enabled.mechanisms to some of "
                + ", ".join(SUPPORTED_MECHANISMS)
            )
        return mechanisms

    def mechanism_config(self, listener_name: str, mechanism: str, name: str) -> Any:
        """``name`` for one SASL mechanism on one listener, Kafka's most specific form first:
        ``listener.name.<l>.<mechanism>.``, ``listener.name.<l>.``, the broker's."""
        key = f"listener.name.{listener_name.lower()}.{mechanism.lower()}.{name}"
        if key in self.originals:
            return self._parse(replace(CONFIG_DEFS[name], name=key), self.originals[key])
        return self.listener_config(listener_name, name)

    def max_reauth_ms(self, listener_name: str, mechanism: str) -> int:
        """``connections.max.reauth.ms`` for one mechanism on one listener."""
        return int(self.mechanism_config(listener_name, mechanism, "connections.max.reauth.ms"))

    def oauthbearer_settings(self, listener_name: str) -> OAuthBearerSettings:
        """OAUTHBEARER on a listener: its callback handler class, the options of its
        OAuthBearerLoginModule entry (``listener.name.<l>.oauthbearer.sasl.jaas.config``, which
        Kafka's broker requires) and its sasl.oauthbearer.* values, checked without I/O."""
        entry = self._jaas_entry(listener_name, "OAUTHBEARER", OAUTHBEARER_LOGIN_MODULE, "")
        settings = OAuthBearerSettings(
            self.mechanism_config(
                listener_name, "OAUTHBEARER", "sasl.server.callback.handler.class"
            ),
            entry.options,
            {
                name: self.mechanism_config(listener_name, "OAUTHBEARER", name)
                for name, *_ in _OAUTHBEARER_DEFS
            },
        )
        try:
            check_settings(settings.handler_class, settings.jaas_options, settings.configs)
        except OAuthBearerConfigError as e:
            raise ConfigError(f"listener {listener_name}: OAUTHBEARER: {e}") from None
        return settings

    def plain_users(self, listener_name: str) -> dict[str, str]:
        """PLAIN's users on a listener: the ``user_<name>`` options of its PlainLoginModule entry.

        As Kafka's broker, the entry is ``listener.name.<l>.plain.sasl.jaas.config``
        (the mechanism in lower case after the listener name).
        """
        entry = self._jaas_entry(
            listener_name, "PLAIN", PLAIN_LOGIN_MODULE, ' user_<name>="<password>"'
        )
        return plain_users(entry)

    def _jaas_entry(
        self, listener_name: str, mechanism: str, login_module: str, example_options: str
    ) -> LoginModuleEntry:
        """A mechanism's ``listener.name.<l>.<mechanism>.sasl.jaas.config``: one entry of
        ``login_module`` (a start-up message naming the config when missing or wrong)."""
        key, entry = self._mechanism_jaas_entry(
            listener_name,
            mechanism,
            f"listener {listener_name} enables SASL mechanism {mechanism} but {{key}} is not "
            f'set: give it "{login_module} required{example_options};"',
        )
        if entry.login_module != login_module:
            raise ConfigError(
                f"Invalid value for configuration {key}: login module {entry.login_module} "
                f"is not {login_module}"
            )
        return entry

    def _check_queued_max_request_bytes(self) -> None:
        """As Kafka: the request memory pool must hold the largest request the broker accepts."""
        queued = self["queued.max.request.bytes"]
        if 0 < queued < self["socket.request.max.bytes"]:
            raise ConfigError(
                f"Invalid value {queued} for configuration queued.max.request.bytes: "
                f"must be larger or equal to socket.request.max.bytes "
                f"({self['socket.request.max.bytes']}), or <= 0 for no limit"
            )

    def _per_listener_max_connections(self) -> dict[str, int]:
        """``listener.name.<name>.max.connections`` (Kafka's listener prefix, name in any case), validated."""
        definition = CONFIG_DEFS["max.connections"]
        limits = {}
        names = {e.listener_name for e in self._listeners}
        for key, raw in self.originals.items():
            match = _LISTENER_MAX_CONNECTIONS.fullmatch(key)
            if match is None:
                continue
            name = match["listener"].upper()
            limit = self._parse(replace(definition, name=key, default=None, at_least=0), raw)
            if name in names:
                limits[name] = limit
            else:  # as Kafka, a prefix naming no listener configures nothing
                log.warning("config %s names no listener in listeners; it has no effect", key)
        return limits

    def listener_max_connections(self) -> dict[str, int]:
        """Listener name -> its own connection limit, for the listeners that have one."""
        return dict(self._listener_max_connections)

    def listeners(self) -> list[Endpoint]:
        """Every listener to bind, in the order configured (the first one is printed in the ready line)."""
        return list(self._listeners)

    def advertised_listeners(self, bound_ports: Mapping[str, int]) -> dict[str, tuple[str, int]]:
        """Listener name -> (host, port) clients connecting on that listener are told to use.

        From advertised.listeners when set (listeners missing there are not
        advertised, as in Kafka), else from listeners. A wildcard or empty host
        advertises 127.0.0.1, and port 0 the port the listener actually bound.
        """
        advertised = {}
        for endpoint in self._advertised or self._listeners:
            host = "127.0.0.1" if endpoint.host in ("", "0.0.0.0", "::") else endpoint.host
            advertised[endpoint.listener_name] = (
                host,
                endpoint.port or bound_ports[endpoint.listener_name],
            )
        return advertised

    def log_config_properties(self) -> dict[str, str]:
        """The topic-level config defaults these broker configs set (Kafka's synonyms, first set wins).

        Every known broker config counts with its value or Kafka default, so
        retention.ms comes from log.retention.ms, else .minutes, else .hours.
        """
        effective = {
            name: str(self.originals.get(name, definition.default))
            for name, definition in CONFIG_DEFS.items()
            if self.originals.get(name, definition.default) is not None
        }
        props = topic_defaults_from_broker(effective)
        props["cleanup.policy"] = ",".join(self["log.cleanup.policy"])
        return props


def parse_listener(uri: str, key: str = "listeners") -> tuple[str, str, int]:
    """ "PLAINTEXT://host:port" -> (NAME, host, port); listener names are case-insensitive (upper-cased)."""
    name, sep, rest = uri.partition("://")
    if not sep or not name:
        raise ConfigError(
            f"Invalid value {uri!r} for configuration {key}: expected NAME://host:port"
        )
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"Invalid value {uri!r} for configuration {key}: bad port")
    return name.upper(), host.strip("[]"), int(port)
