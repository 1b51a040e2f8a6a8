"""ZkCluster: a broker's membership of a ZooKeeper-backed cluster (``zookeeper.connect``).

Assembles the ZooKeeper metadata store and the controller for the Broker, so
that ``server.broker`` imports neither (nor kazoo) when the broker runs alone.
The steps follow the broker's start order: ``connect`` (session, top-level
paths, the cluster id) before meta.properties is checked, ``join`` (register
``/brokers/ids/<id>`` and load the image) once the listeners are bound and the
node id is known, ``start_controller`` once the ReplicaManager follows the
image, and ``leave`` (stop the controller, close the session, so that the
broker's ephemeral nodes go at once) before the logs shut down.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.metadata.image import BrokerImage
from odradek.metadata.zk_controller import ZkController
from odradek.metadata.zk_store import ZkMetadataStore, ZkSettings
from odradek.server.context import BrokerServices
from odradek.storage import LogConfig

log = logging.getLogger(__name__)


class ZkCluster:
    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker
        config = broker.config
        self.store = ZkMetadataStore(
            ZkSettings(
                config["zookeeper.connect"],
                config["zookeeper.session.timeout.ms"],
                config["zookeeper.connection.timeout.ms"],
            ),
            {e.listener_name: e.security_protocol for e in config.listeners()},
            asyncio.get_running_loop(),
        )
        self.controller: ZkController | None = None

    async def connect(self, cluster_id: str | None) -> str:
        """Open the session; the cluster id is ZooKeeper's (``cluster_id`` seeds a new cluster)."""
        return await asyncio.to_thread(self.store.connect, cluster_id)

    async def join(self, broker: BrokerImage) -> ZkMetadataStore:
        await self.store.start(broker)
        return self.store

    def start_controller(self) -> None:
        self.controller = ZkController(self.store, self._unclean_leader_election)
        self.controller.start()

    def _unclean_leader_election(self, topic: str, overrides: dict[str, str]) -> bool:
        base = self.broker.replica_manager.default_config
        return LogConfig.from_properties(overrides, base=base).unclean_leader_election_enable

    async def leave(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        await asyncio.to_thread(self.store.close)
