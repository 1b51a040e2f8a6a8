"""ZooKeeperServer: a real ZooKeeper server from Debian's ``zookeeper`` package, on a free port.

Cluster mode keeps its metadata in ZooKeeper, as Kafka did for a decade; we run
the real server rather than a fake so that sessions, ephemeral nodes, watches
and multi-ops behave as in production. ``odradek cluster up`` and the cluster
tests start one with this class.

The package's ``zkServer.sh start-foreground PATH/zoo.cfg`` runs it in the
foreground (so the process is ours to stop) with a zoo.cfg of our own: without
the path argument the script reads /etc/zookeeper's config. The generated config
sets ``admin.enableServer=false`` because the embedded admin server binds port
8080, so a second server on the machine would fail to start; ``dataDir`` and the
log dir (``ZOO_LOG_DIR`` and ``zookeeper.log.dir``, which the package's
zkEnv.sh would otherwise point at /var/log/zookeeper) are the caller's. Readiness
is ZooKeeper's ``ruok`` four-letter command answered ``imok``, which needs no
client library. It comes about 0.2-0.4 s after the start (measured).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from odradek.server.embedded import StartedInWith

ZKSERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
INSTALL_HINT = (
    f"{ZKSERVER} is missing: cluster mode runs Debian's ZooKeeper server; install it with "
    "`make install` (as root it runs: apt-get update && apt-get install -y zookeeper)"
)


class ZooKeeperStartError(RuntimeError):
    """The server is not installed, exited, or did not answer ``ruok`` in time."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def ruok(host: str, port: int, timeout: float = 1.0) -> bool:
    """True once the server at host:port serves (it answers ``imok``)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(b"ruok")
            return s.recv(4) == b"imok"
    except OSError:
        return False


class ZooKeeperServer(StartedInWith):
    """``with ZooKeeperServer() as zk: use(zk.connect_string)``; ``stop()``/``start()`` restart it
    on the same port and data, as an operator restarting ZooKeeper would."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        start_timeout: float = 60.0,
        heap_mb: int = 256,
    ) -> None:
        self._own_dir = data_dir is None
        self.dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="zk-"))
        self.host = host
        self.port = port or free_port(host)
        self._start_timeout = start_timeout
        self._heap_mb = heap_mb
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """``host:port``, the value of a broker's ``zookeeper.connect`` (a chroot may follow)."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def _write_config(self) -> Path:
        data, logs = self.dir / "data", self.dir / "logs"
        data.mkdir(parents=True, exist_ok=True)
        logs.mkdir(parents=True, exist_ok=True)
        cfg = self.dir / "zoo.cfg"
        cfg.write_text(
            "tickTime=1000\n"
            "initLimit=10\n"
            "syncLimit=5\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n"
            # ZooKeeper expires sessions in buckets of one tick: a 1 s tick (Debian's default
            # is 2 s) ends a dead broker's session at most 1 s after
            # zookeeper.session.timeout.ms, which is most of a failover after SIGKILL. The
            # bounds are set explicitly, since the defaults (2 and 20 ticks) would cap a
            # broker's 18 s default at 20 s only by chance and refuse a test's 1 s session.
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=60000\n"
        )
        return cfg

    def start(self) -> ZooKeeperServer:
        if not os.access(ZKSERVER, os.X_OK):
            raise ZooKeeperStartError(INSTALL_HINT)
        cfg = self._write_config()
        logs = self.dir / "logs"
        env = {
            **os.environ,
            "ZOO_LOG_DIR": str(logs),
            # zkEnv.sh sets its own log dir; a later -D wins on the java command line.
            "JVMFLAGS": f"-Xmx{self._heap_mb}m -Dzookeeper.log.dir={logs}",
        }
        with open(logs / "server.out", "ab") as out:
            self._process = subprocess.Popen(
                [str(ZKSERVER), "start-foreground", str(cfg)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + self._start_timeout
        while not ruok(self.host, self.port):
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (logs / "server.out").read_text(errors="replace")[-2000:]
                raise ZooKeeperStartError(f"ZooKeeper did not start on {self.port}:\n{tail}")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server (the JVM and the script that runs it: one process group)."""
        if self._process is None:
            return
        process, self._process = self._process, None
        if process.poll() is None:
            os.killpg(process.pid, 15)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()

    def close(self) -> None:
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
