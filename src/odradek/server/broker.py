"""Broker: owns the parts of one node and starts and stops them in order.

Start: bind every listener's socket (fail fast on a port in use), logs (lock
and recover the data dirs), metadata, replicas, components (coordinators), then
accept connections on every listener. Stop is the reverse: stop accepting and let in-flight
requests finish (long polls are woken), stop components, then shut the logs
down (flush, checkpoints, clean-shutdown marker, unlock).

With ``zookeeper.connect`` the metadata is the cluster's (``server.zk_cluster``):
the ZooKeeper session is opened before meta.properties is checked (the cluster
id is ZooKeeper's), the broker registers once its listeners are bound, its
controller starts after the replicas, a started broker asks the controller to move
its leaderships away before it stops accepting (``controlled.shutdown.enable``), and
its session is closed before the logs shut down, so the cluster sees it leave at once. Without it nothing of the
cluster code (nor kazoo) is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from typing import TYPE_CHECKING, Any

from odradek.metadata.image import BrokerImage
from odradek.metadata.local import LocalMetadataStore
from odradek.metadata.store import MetadataStore
from odradek.metrics.stats import BrokerTopicStats, RequestMetrics
from odradek.network.connection_quotas import ConnectionQuotas
from odradek.network.listener import Listener, ListenerConfig
from odradek.network.memory_pool import MemoryPool
from odradek.network.oauthbearer_unsecured import OAuthBearerConfigError
from odradek.network.oauthbearer_validators import new_validator
from odradek.network.sasl_channel import SaslChannel
from odradek.network.scram import InvalidCredential, ScramCredential
from odradek.network.ssl_channel import SslChannel
from odradek.network.ssl_engine_factory import SslConfigError
from odradek.quota.manager import ClientQuotas
from odradek.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from odradek.replication.purgatory import Purgatory
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.acl_authorizer import AclAuthorizer
from odradek.server.authorization import Authorizer
from odradek.server.components import COMPONENTS
from odradek.server.config import BrokerConfig, ConfigError, Endpoint
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.request_channel import RequestChannel
from odradek.storage import LogConfig, LogManager
from odradek.storage.cleaner import LogCleaner

if TYPE_CHECKING:
    from odradek.server.zk_cluster import ZkCluster

log = logging.getLogger(__name__)


def _ssl_channel(config: BrokerConfig, endpoint: Endpoint) -> SslChannel | None:
    """An SSL listener's TLS context and principal mapping; a bad ssl.* config stops start-up."""
    if endpoint.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    try:
        return SslChannel.from_config(config.ssl_config(endpoint.listener_name))
    except SslConfigError as e:
        raise ConfigError(
            f"listener {endpoint.listener_name} ({endpoint.security_protocol}): {e}"
        ) from None


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        #: How this broker's connections to the others speak the inter-broker listener's
        #: protocol (built now: a bad client-side ssl.* config or login stops start-up).
        self.inter_broker_security = config.inter_broker_client_security()
        #: max.connections (broker-wide and per listener) and max.connections.per.ip(.overrides), for all listeners.
        self.connection_quotas = ConnectionQuotas(
            max_connections=config["max.connections"],
            max_connections_per_ip=config["max.connections.per.ip"],
            per_ip_overrides=config["max.connections.per.ip.overrides"],
            listener_max_connections=config.listener_max_connections(),
        )
        #: queued.max.request.bytes: request memory of all listeners' connections together.
        self.memory_pool = MemoryPool(config["queued.max.request.bytes"])
        #: One Listener per entry of ``listeners``, each tagging its connections with its listener name.
        self.listeners = [
            Listener(
                ListenerConfig(
                    host=endpoint.host,
                    port=endpoint.port,
                    listener_name=endpoint.listener_name,
                    security_protocol=endpoint.security_protocol,
                    socket_request_max_bytes=config["socket.request.max.bytes"],
                    connections_max_idle_ms=config["connections.max.idle.ms"],
                ),
                self._dispatch,
                self.connection_quotas,
                self.memory_pool,
                _ssl_channel(config, endpoint),
                self._sasl_channel(endpoint),
            )
            for endpoint in config.listeners()
        ]
        #: Listener name -> (host, port) advertised to clients connected on it; set once bound.
        self.advertised_listeners: dict[str, tuple[str, int]] = {}
        self.default_log_config = LogConfig.from_properties(config.log_config_properties())
        self.fetch_purgatory = Purgatory()
        self.fetch_sessions = FetchSessionCache()
        #: BrokerTopicMetrics: always counted (a few additions per partition of a request).
        self.topic_stats = BrokerTopicStats()
        #: RequestMetrics, kept only when metrics are served (metrics.http.listener).
        self.request_metrics = RequestMetrics() if config["metrics.http.listener"] else None
        #: Client quotas (producer and consumer bytes, request time, controller mutations).
        self.client_quotas = ClientQuotas(
            config["quota.window.num"],
            config["quota.window.size.seconds"],
            config["controller.quota.window.num"],
            config["controller.quota.window.size.seconds"],
        )
        self.components: dict[str, Any] = {}
        #: None, as Kafka without ``authorizer.class.name``: every operation is allowed; else
        #: the AclAuthorizer, made once the metadata (which holds the ACLs) is loaded.
        self.authorizer: Authorizer | None = None
        self.node_id: int = -1
        self.cluster_id: str = ""
        self.log_manager: LogManager
        self.metadata: MetadataStore
        #: Cluster mode only: the ZooKeeper session, controller and their shutdown.
        self.cluster: ZkCluster | None = None
        self.replica_manager: ReplicaManager
        self.replica_fetchers: ReplicaFetcherManager | None = None
        self._request_channel: RequestChannel
        self._background: asyncio.Task | None = None
        self._logs_started = False
        #: Set once every listener accepts: only a broker that served asks for controlled shutdown.
        self._serving = False

    def _sasl_channel(self, endpoint: Endpoint) -> SaslChannel | None:
        """A SASL listener's mechanisms and users (the configs were checked by BrokerConfig)."""
        if not endpoint.security_protocol.startswith("SASL_"):
            return None
        mechanisms = self.config.sasl_mechanisms(endpoint.listener_name)
        users = self.config.plain_users(endpoint.listener_name) if "PLAIN" in mechanisms else {}
        reauth = {m: self.config.max_reauth_ms(endpoint.listener_name, m) for m in mechanisms}
        validator = None
        if "OAUTHBEARER" in mechanisms:
            try:
                validator = new_validator(self.config.oauthbearer_settings(endpoint.listener_name))
            except OAuthBearerConfigError as e:
                raise ConfigError(f"listener {endpoint.listener_name}: OAUTHBEARER: {e}") from None
        return SaslChannel(mechanisms, users, self._scram_credential, reauth, validator)

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """A user's stored SCRAM credential, read from the metadata at each login."""
        text = self.metadata.user_scram_credentials(user).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_text(text)
        except InvalidCredential as e:
            log.warning("the stored %s credential of user %s is unusable: %s", mechanism, user, e)
            return None

    def _update_client_quotas(self) -> None:
        """The quota managers take the configured quotas again after any change."""
        self.client_quotas.update(self.metadata.client_quotas())

    async def _dispatch(self, connection, frame):
        return await self._request_channel.dispatch(connection, frame)

    @property
    def advertised(self) -> tuple[str, int]:
        """(host, port) of the first listener, the one the ready line names."""
        first = self.listeners[0].config.listener_name
        return self.advertised_listeners.get(first) or next(
            iter(self.advertised_listeners.values())
        )

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int] | None:
        """(host, port) to give a client connected on ``listener_name`` (None: not advertised there)."""
        return self.advertised_listeners.get(listener_name)

    def _bind_listeners(self) -> None:
        bound = {}
        for listener in self.listeners:
            try:
                bound[listener.config.listener_name] = listener.bind()
            except OSError as e:
                address = f"{listener.config.host}:{listener.config.port}"
                raise OSError(
                    e.errno,
                    f"cannot listen on {address} ({listener.config.listener_name}): {e.strerror}",
                    address,
                ) from e
        self.advertised_listeners = self.config.advertised_listeners(bound)

    async def start(self) -> None:
        """Start every part; on failure, stop what was started and re-raise."""
        try:
            self._request_channel = RequestChannel(self)
            self._bind_listeners()
            self.log_manager = LogManager(
                self.config.log_dirs,
                self.default_log_config,
                retention_check_interval_ms=self.config["log.retention.check.interval.ms"],
                checkpoint_interval_ms=self.config["log.flush.offset.checkpoint.interval.ms"],
                producer_id_expiration_ms=self.config["producer.id.expiration.ms"],
                # As Kafka's cleaner threads, each cleaning at once gets its share of the buffers.
                cleaner=LogCleaner(
                    self.config["log.cleaner.dedupe.buffer.size"]
                    // max(1, self.config["log.cleaner.threads"]),
                    self.config["log.cleaner.io.buffer.load.factor"],
                    self.config["log.cleaner.io.buffer.size"]
                    // max(1, self.config["log.cleaner.threads"]),
                ),
                cleaner_enable=self.config["log.cleaner.enable"],
                cleaner_threads=self.config["log.cleaner.threads"],
                cleaner_backoff_ms=self.config["log.cleaner.backoff.ms"],
            )
            self.log_manager.startup()
            self._logs_started = True
            cluster_id = self.config.get("cluster.id")
            if self.config["zookeeper.connect"]:
                from odradek.server.zk_cluster import ZkCluster

                self.cluster = ZkCluster(self)
                cluster_id = await self.cluster.connect(cluster_id)
            self.node_id, self.cluster_id = self.log_manager.ensure_meta_properties(
                self.config.node_id, cluster_id
            )
            endpoints = tuple(
                (name, host, port) for name, (host, port) in self.advertised_listeners.items()
            )
            broker_image = BrokerImage(self.node_id, endpoints, self.config["broker.rack"])
            if self.cluster is not None:
                self.metadata = await self.cluster.join(broker_image)
            else:
                self.metadata = LocalMetadataStore(
                    self.config.log_dirs[0], self.node_id, self.cluster_id, broker_image
                )
            self.metadata.client_quota_listeners.append(self._update_client_quotas)
            self._update_client_quotas()
            # Before any listener serves: every request is decided from the first one.
            self.authorizer = AclAuthorizer.from_config(self.config, self.metadata)
            self.replica_manager = ReplicaManager(
                self.log_manager,
                self.metadata,
                self.node_id,
                self.default_log_config,
                self.config.get("replica.lag.time.max.ms"),
            )
            self.log_manager.high_watermark = self.replica_manager.high_watermark_of
            self.replica_manager.append_listeners.append(self.fetch_purgatory.notify)
            self.replica_manager.hw_listeners.append(self.fetch_purgatory.notify)
            self.replica_manager.startup()
            self.replica_fetchers = ReplicaFetcherManager(
                self.replica_manager,
                self.metadata,
                self.config.inter_broker_listener_name,
                FetcherSettings(
                    fetch_max_bytes=self.config["replica.fetch.max.bytes"],
                    response_max_bytes=self.config["replica.fetch.response.max.bytes"],
                    fetch_min_bytes=self.config["replica.fetch.min.bytes"],
                    fetch_wait_max_ms=self.config["replica.fetch.wait.max.ms"],
                    fetch_backoff_ms=self.config["replica.fetch.backoff.ms"],
                    socket_timeout_ms=self.config["replica.socket.timeout.ms"],
                    num_fetchers=self.config["num.replica.fetchers"],
                ),
                self.topic_stats,
                self.inter_broker_security,
            )
            self.replica_fetchers.start()
            if self.cluster is not None:
                self.cluster.start_controller()
            self._background = asyncio.create_task(self.log_manager.run_background())
            for name, path in COMPONENTS.items():
                module, _, factory = path.partition(":")
                component = getattr(importlib.import_module(module), factory)(self)
                await component.start()
                self.components[name] = component
            for listener in self.listeners:
                await listener.start()
            self._serving = True
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Controlled shutdown in a cluster, then stop accepting, finish in-flight requests,
        stop components, shut the logs down."""
        if self._serving and self.cluster is not None and self.config["controlled.shutdown.enable"]:
            self._serving = False
            try:
                await self.cluster.controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping with the leaderships held")
        self._serving = False
        self.fetch_purgatory.shutdown()
        await asyncio.gather(*(listener.stop() for listener in self.listeners))
        for listener in self.listeners:
            if listener.sasl_channel is not None:
                listener.sasl_channel.close()
        for name in reversed(list(self.components)):
            try:
                await self.components.pop(name).stop()
            except Exception:
                log.exception("stopping component %s failed", name)
        if self.replica_fetchers is not None:
            await self.replica_fetchers.shutdown()
            self.replica_fetchers = None
            await self.replica_manager.shutdown()
        if self.cluster is not None:
            await self.cluster.leave()
            self.cluster = None
        if self._background is not None:
            self._background.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._background
            self._background = None
        if self._logs_started:
            self.log_manager.shutdown()
            self._logs_started = False
