"""ZkCluster: a broker's membership of a ZooKeeper-backed cluster (``zookeeper.connect``).

Assembles the ZooKeeper metadata store and the controller for the Broker, so
that ``server.broker`` imports neither (nor kazoo) when the broker runs alone.
The steps follow the broker's start order: ``connect`` (session, top-level
paths, the cluster id) before meta.properties is checked, ``join`` (register
``/brokers/ids/<id>`` and load the image) once the listeners are bound and the
node id is known, ``start_controller`` once the ReplicaManager follows the
image, ``controlled_shutdown`` when a started broker is asked to stop (before
it stops accepting requests, so that it keeps serving what it leads while the
controller moves its leaderships), and ``leave`` (stop the controller, close the
session, so that the broker's ephemeral nodes go at once) before the logs shut
down.

Controlled shutdown waits for the image rather than for an answer: the broker
asks through ZooKeeper (why: ``metadata.zk_controller``) and is done once its own
watches show it leading no partition that has other replicas. Each of
``controlled.shutdown.max.retries`` attempts waits up to
``controlled.shutdown.retry.backoff.ms`` for that (Kafka sleeps that long between
attempts, each a request the controller answers at once, so the longest wait is
the same). It gives up at once when no other broker is live and serving, since
then no leadership can move: stopping a whole cluster does not wait for nothing.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.metadata.controller import led_partitions_to_move
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
        config = self.broker.config
        self.controller = ZkController(
            self.store,
            self._unclean_leader_election,
            config["leader.imbalance.check.interval.seconds"]
            if config["auto.leader.rebalance.enable"]
            else None,
            config["leader.imbalance.per.broker.percentage"],
        )
        self.controller.start()

    async def controlled_shutdown(self) -> bool:
        """Have the controller move this broker's leaderships away; True once none is left."""
        config = self.broker.config
        attempts = config["controlled.shutdown.max.retries"]
        wait_s = config["controlled.shutdown.retry.backoff.ms"] / 1000
        store, loop = self.store, asyncio.get_running_loop()
        changed = asyncio.Event()
        store.change_listeners.append(changed.set)
        try:
            if attempts > 0:
                await asyncio.to_thread(store.request_controlled_shutdown)
            for attempt in range(1, attempts + 1):
                deadline = loop.time() + wait_s
                while True:
                    remaining = led_partitions_to_move(
                        store.assignments(), store.partition_states(), store.node_id
                    )
                    if not remaining:
                        log.info("controlled shutdown of broker %d succeeded", store.node_id)
                        return True
                    serving = store.live_broker_ids() - store.shutting_down_broker_ids()
                    if not serving - {store.node_id}:
                        log.warning(
                            "controlled shutdown: no other broker serves; %d leaderships stay",
                            len(remaining),
                        )
                        return False
                    changed.clear()
                    try:
                        await asyncio.wait_for(changed.wait(), deadline - loop.time())
                    except TimeoutError:
                        break
                log.warning(
                    "controlled shutdown attempt %d of %d: broker %d still leads %d partitions",
                    attempt,
                    attempts,
                    store.node_id,
                    len(remaining),
                )
            return False
        finally:
            store.change_listeners.remove(changed.set)

    def _unclean_leader_election(self, topic: str, overrides: dict[str, str]) -> bool:
        base = self.broker.replica_manager.default_config
        return LogConfig.from_properties(overrides, base=base).unclean_leader_election_enable

    async def leave(self) -> None:
        if self.controller is not None:
            await self.controller.stop()
        await asyncio.to_thread(self.store.close)
