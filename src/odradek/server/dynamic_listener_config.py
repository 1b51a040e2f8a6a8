"""Dynamic update of SSL listeners' key and trust stores: certificates rotated without a restart.

Kafka's DynamicListenerConfig/SslFactory.reconfigure for the ssl.* configs: an
AlterConfigs of ``listener.name.<listener>.ssl.keystore.location`` (or any ssl.*
config of that listener, on this broker's resource) builds the listener's new
TLS context before anything is stored, so a key store that cannot be loaded is
refused with INVALID_CONFIG and the listener keeps serving the old one. Once
stored, new connections are served with the new context; open connections keep
theirs, as in Kafka. Altering a store's location to the same path reloads the
file when it changed on disk since it was loaded (Kafka compares the file's
modification time the same way), which is how a certificate renewed in place
is picked up. Stored dynamic values apply again when the broker starts, before
its listeners accept connections; a stored value that no longer loads is logged
and the static configuration is served.

Kafka 3+ also refuses a new key store whose certificate changes the subject or
the subject alternative names (``ssl.allow.dn.changes``/``ssl.allow.san.changes``);
that check is not made here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from odradek.network.listener import Listener
from odradek.network.ssl_channel import SslChannel
from odradek.network.ssl_engine_factory import SslConfig, SslConfigError
from odradek.server.config import BrokerConfig, ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Loaded:
    """An SslConfig and the modification times of the files it was loaded from."""

    config: SslConfig
    modified: tuple[float | None, float | None]

    @classmethod
    def of(cls, config: SslConfig) -> _Loaded:
        return cls(config, (_mtime(config.keystore_location), _mtime(config.truststore_location)))


def _mtime(path: str | None) -> float | None:
    try:
        return os.stat(path).st_mtime if path is not None else None
    except OSError:
        return None


#: Listener name -> what its new SslChannel was built from, and the channel.
Changes = dict[str, tuple[_Loaded, SslChannel]]


class DynamicListenerConfig:
    """Broker component (server/components.py) owning the SSL listeners' reconfiguration."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self._listeners: dict[str, Listener] = {
            listener.config.listener_name: listener
            for listener in broker.listeners
            if listener.ssl_channel is not None
        }
        self._loaded = {
            name: _Loaded.of(broker.config.ssl_config(name)) for name in self._listeners
        }

    async def start(self) -> None:
        node = str(self.broker.node_id)
        metadata = self.broker.metadata
        dynamic = {**metadata.broker_configs(), **metadata.broker_configs(node)}
        if not self._listeners or not dynamic:
            return
        try:
            self.reconfigure(self.validate(dynamic))
        except ConfigError as e:
            log.error("dynamic SSL configs not applied, serving the static ones: %s", e)

    async def stop(self) -> None:
        pass

    def validate(self, dynamic: Mapping[str, str]) -> Changes:
        """The new channel of each SSL listener whose configs (or store files) change with
        ``dynamic`` (this broker's dynamic configs as they would be); ConfigError if one fails."""
        config = BrokerConfig({**self.broker.config.originals, **dynamic})
        changes: Changes = {}
        for name in self._listeners:
            loaded = _Loaded.of(config.ssl_config(name))
            if loaded == self._loaded[name]:
                continue
            try:
                changes[name] = (loaded, SslChannel.from_config(loaded.config))
            except SslConfigError as e:
                raise ConfigError(f"listener {name} (SSL): {e}") from None
        return changes

    def reconfigure(self, changes: Changes) -> None:
        for name, (loaded, channel) in changes.items():
            self._listeners[name].update_ssl(channel)
            self._loaded[name] = loaded
            log.info(
                "listener %s: new connections use the reconfigured TLS key and trust stores", name
            )
