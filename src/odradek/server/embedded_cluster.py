"""EmbeddedCluster: a real ZooKeeper server and N `odradek serve` processes, for tests and demos.

Each broker is an EmbeddedBroker (its own process, port and data dir under the
cluster's dir) with ``node.id`` 1..N and ``zookeeper.connect`` pointing at the
cluster's ZooKeeper (started here unless one is given). Any one broker can be
stopped (SIGTERM), killed (SIGKILL), restarted on its port and data, or paused
and resumed (SIGSTOP/SIGCONT: alive to the kernel, silent to ZooKeeper, which
ends its session after ``zookeeper.session.timeout.ms``). Brokers start in
parallel: each start is mostly waiting for a process to come up.

A broker is ready once it listens, but it learns of the others and of the
elected controller through its ZooKeeper watches a moment later; a client that
asked it for an RF=3 topic in between would be refused, and an admin client told
"no controller" waits for its next metadata refresh. So the cluster counts as
started only when every broker's own Metadata lists every broker and one
controller (a raw Metadata v1 request: only brokers and controller id are read).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from odradek.server.embedded import EmbeddedBroker, StartedInWith
from odradek.server.zookeeper_server import ZooKeeperServer


class EmbeddedCluster(StartedInWith):
    """``with EmbeddedCluster(brokers=3) as cluster: use(cluster.bootstrap_servers)``."""

    def __init__(
        self,
        brokers: int = 3,
        config: Mapping[str, str] | None = None,
        data_dir: str | Path | None = None,
        zookeeper: str | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        """``zookeeper``: ``host:port`` of a running server; None starts one under ``data_dir``."""
        if brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self._own_dir = data_dir is None
        self.data_dir = (
            Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="odradek-"))
        )
        self.zookeeper_server: ZooKeeperServer | None = None
        if not zookeeper:
            self.zookeeper_server = ZooKeeperServer(self.data_dir / "zookeeper")
            zookeeper = self.zookeeper_server.connect_string
        self.zookeeper = zookeeper
        common = {"zookeeper.connect": self.zookeeper, **(config or {})}
        #: node id -> its broker.
        self.brokers = {
            node: EmbeddedBroker(
                config={**common, "node.id": str(node)},
                data_dir=self.data_dir / f"broker-{node}",
                start_timeout=start_timeout,
            )
            for node in range(1, brokers + 1)
        }

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.bootstrap_servers)

    def broker(self, node_id: int) -> EmbeddedBroker:
        return self.brokers[node_id]

    def start(self) -> EmbeddedCluster:
        if self.zookeeper_server is not None:
            self.zookeeper_server.start()
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            for started in [pool.submit(b.start) for b in self.brokers.values()]:
                started.result()
        self.wait_for_brokers()
        return self

    def wait_for_brokers(self, timeout: float = 30.0) -> None:
        """Until every running broker's Metadata lists every running broker and a controller
        among them."""
        running = {node for node, b in self.brokers.items() if b.pid is not None}
        deadline = time.monotonic() + timeout
        for node in running:
            while True:
                brokers, controller = cluster_view(self.brokers[node].bootstrap_servers)
                if brokers == running and controller in running:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"broker {node} sees brokers {sorted(brokers)} and controller "
                        f"{controller}, not all of {sorted(running)}"
                    )
                time.sleep(0.02)

    def stop_broker(self, node_id: int) -> int | None:
        """SIGTERM one broker and wait for it to exit."""
        return self.brokers[node_id].stop()

    def kill(self, node_id: int) -> None:
        """SIGKILL one broker: its ZooKeeper session ends only when it times out."""
        self.brokers[node_id].kill()

    def restart(self, node_id: int, hard: bool = False) -> EmbeddedBroker:
        return self.brokers[node_id].restart(hard=hard)

    def start_broker(self, node_id: int) -> EmbeddedBroker:
        return self.brokers[node_id].start()

    def pause(self, node_id: int) -> None:
        os.kill(self._pid(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self._pid(node_id), signal.SIGCONT)

    def _pid(self, node_id: int) -> int:
        pid = self.brokers[node_id].pid
        if pid is None:
            raise RuntimeError(f"broker {node_id} is not running")
        return pid

    def stop(self) -> None:
        """Stop every broker (resumed first if paused), then ZooKeeper."""
        for broker in self.brokers.values():
            if broker.pid is not None:
                os.kill(broker.pid, signal.SIGCONT)
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.stop(), self.brokers.values()))
        if self.zookeeper_server is not None:
            self.zookeeper_server.stop()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)


def cluster_view(bootstrap: str, timeout: float = 5.0) -> tuple[set[int], int]:
    """The node ids and the controller id in a broker's Metadata v1 answer (no topics asked)."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"odradek-embedded-cluster"
    # Request header v1 (api key 3 = Metadata, version 1, correlation id, client id), then an
    # empty topic array (v1: no topics; null would mean all).
    body = struct.pack(">hhih", 3, 1, 1, len(client_id)) + client_id + struct.pack(">i", 0)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        data = _read(sock, struct.unpack(">i", _read(sock, 4))[0])
    # Response header v0 (correlation id), then the brokers array.
    (count,) = struct.unpack_from(">i", data, 4)
    offset, ids = 8, set()
    for _ in range(count):
        node_id, host_len = struct.unpack_from(">ih", data, offset)
        offset += 6 + host_len + 4  # node id, host, port
        (rack_len,) = struct.unpack_from(">h", data, offset)
        offset += 2 + max(rack_len, 0)
        ids.add(node_id)
    return ids, struct.unpack_from(">i", data, offset)[0]


def _read(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed by broker")
        out += chunk
    return out
