"""Which broker configs AlterConfigs and IncrementalAlterConfigs may change: Kafka's dynamic ones.

The set is Kafka 4's DynamicBrokerConfig.AllDynamicConfigs plus the broker
quota configs its DynamicConfig.Broker adds, so a tool that changes a broker
config on Kafka can change it here, and a config Kafka only reads at start-up
(log.dirs, node.id, ...) is refused with Kafka's message. Listener-prefixed
names (``listener.name.<listener>.<config>``) are dynamic when their config is.
As Kafka's DynamicBrokerConfig.validateConfigs, the keystore and truststore
configs may only be set with a listener prefix, and the listener and security
configs only on one broker's resource (its node id), not on the cluster-wide
default: each refusal is INVALID_REQUEST naming the configs.

Every accepted value is validated with the config's type, stored per BROKER
resource in the MetadataStore and described with its source and synonyms. What
takes effect at once: the log.* defaults of topic configs (the live logs get
the new defaults). The others are kept for tools and for the day the feature
that reads them lands; their documentation in DescribeConfigs says so
("Accepted for compatibility") when nothing here reads them at all, and
settings such as the cleaner's or the connection limits are read at start-up
from the static config.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from odradek.metadata.topic_config_synonyms import BROKER_TO_TOPIC
from odradek.protocol.errors import ErrorCode, KafkaError

#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS (DynamicSecurityConfigs).
_SECURITY = {
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.certificates",
}

#: Kafka's LogCleaner.ReconfigurableConfigs.
_LOG_CLEANER = {
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "message.max.bytes",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
}

#: Kafka's DynamicThreadPool.ReconfigurableConfigs.
_THREAD_POOL = {
    "num.io.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "background.threads",
}

#: Kafka's DynamicListenerConfig.ReconfigurableConfigs.
_LISTENER = {
    "advertised.listeners",
    "listeners",
    "listener.security.protocol.map",
    "principal.builder.class",
    "ssl.protocol",
    "ssl.provider",
    "ssl.cipher.suites",
    "ssl.enabled.protocols",
    "ssl.keystore.type",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.type",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation",
    "ssl.client.auth",
    "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.jaas.config",
    "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "max.connections",
    "max.connection.creation.rate",
    "num.network.threads",
}

#: Kafka's SocketServer.ReconfigurableConfigs.
_SOCKET_SERVER = {
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.connections",
    "max.connection.creation.rate",
}

#: Kafka's DynamicProducerStateManagerConfig.
_PRODUCER_STATE = {"producer.id.expiration.ms", "transaction.partition.verification.enable"}

#: Kafka's DynamicRemoteLogConfig.ReconfigurableConfigs.
_REMOTE_LOG = {
    "remote.log.index.file.cache.total.size.bytes",
    "remote.fetch.max.wait.ms",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.list.offsets.request.timeout.ms",
}

#: Kafka's QuotaConfigs.brokerQuotaConfigs (part of DynamicConfig.Broker).
_BROKER_QUOTAS = {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "replica.alter.log.dirs.io.max.bytes.per.second",
}

#: Every broker config AlterConfigs may set (DynamicLogConfig's are the topic configs' synonyms).
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset(
    set(BROKER_TO_TOPIC)
    | _SECURITY
    | _LOG_CLEANER
    | _THREAD_POOL
    | {"metric.reporters"}
    | _LISTENER
    | _SOCKET_SERVER
    | _PRODUCER_STATE
    | _REMOTE_LOG
    | _BROKER_QUOTAS
)

_LISTENER_PREFIX = re.compile(r"listener\.name\.[^.]*\.(?P<config>.*)")


def base_config_name(name: str) -> str:
    """``name`` without a ``listener.name.<listener>.`` prefix."""
    match = _LISTENER_PREFIX.fullmatch(name)
    return match["config"] if match else name


def is_dynamic(name: str) -> bool:
    """Whether AlterConfigs may set broker config ``name`` (listener-prefixed or not)."""
    return base_config_name(name) in DYNAMIC_BROKER_CONFIGS


#: Listener configs that apply cluster-wide (Kafka's ClusterLevelListenerConfigs).
_CLUSTER_LEVEL_LISTENER = {"max.connections", "max.connection.creation.rate", "num.network.threads"}

#: Configs that only one broker's resource may set (Kafka's PerBrokerConfigs).
PER_BROKER_CONFIGS: frozenset[str] = frozenset((_SECURITY | _LISTENER) - _CLUSTER_LEVEL_LISTENER)


def check_dynamic_update(names: Iterable[str], per_broker: bool) -> None:
    """Refuse (INVALID_REQUEST) what Kafka's DynamicBrokerConfig.validateConfigs refuses."""
    names = sorted(names)
    _refuse(
        [n for n in names if not is_dynamic(n)],
        "Cannot update these configs dynamically",
    )
    _refuse(
        [n for n in names if n in _SECURITY],
        "These security configs can be dynamically updated only per-listener using the "
        "listener prefix",
    )
    if not per_broker:
        _refuse(
            [
                n
                for n in names
                if n in PER_BROKER_CONFIGS
                or (n != base_config_name(n) and base_config_name(n) not in _CLUSTER_LEVEL_LISTENER)
            ],
            "Cannot update these configs at default cluster level, broker id must be specified",
        )


def _refuse(names: list[str], message: str) -> None:
    if names:
        raise KafkaError(f"{message}: {', '.join(names)}", ErrorCode.invalid_request)
