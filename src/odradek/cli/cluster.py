"""`odradek cluster up`: a local cluster in one command (a ZooKeeper server and N brokers).

Starts a ZooKeeper server from Debian's package (unless ``--zookeeper`` names a
running one) and N brokers (node ids 1..N) on free ports, each with its own log
dir under ``--data-dir`` (``broker-<id>``; ZooKeeper's data in ``zookeeper``).
Once all are up it prints

    odradek cluster ready bootstrap_servers=H:P,H:P,H:P zookeeper=H:P
    broker node_id=I pid=PID listener=H:P        (one line per broker)

and stays in the foreground until SIGINT or SIGTERM, then stops the brokers
(SIGTERM, a clean shutdown each) and ZooKeeper. ``-o key=value`` passes a broker
config to every broker. The brokers' logs go to ``<data-dir>/broker-<id>.log``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from odradek.cli.serve import overrides
from odradek.server.config import ConfigError

READY = "odradek cluster ready"


def register(subparsers: argparse._SubParsersAction) -> None:
    cluster = subparsers.add_parser("cluster", help="run a local cluster", description=__doc__)
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start ZooKeeper and N brokers in the foreground")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--data-dir", required=True, metavar="DIR", help="parent of every log dir")
    up.add_argument(
        "--zookeeper", metavar="HOST:PORT", help="use this ZooKeeper instead of starting one"
    )
    up.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config for every broker, Kafka name (repeatable)",
    )
    up.set_defaults(func=up_command)


def up_command(args: argparse.Namespace) -> int:
    from odradek.server.embedded import BrokerStartError
    from odradek.server.embedded_cluster import EmbeddedCluster
    from odradek.server.zookeeper_server import ZooKeeperStartError

    if args.brokers < 1:
        print("odradek: --brokers must be at least 1", file=sys.stderr)
        return 2
    try:
        config = overrides(args.override)
    except ConfigError as e:
        print(f"odradek: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    data_dir = Path(args.data_dir)
    cluster = EmbeddedCluster(args.brokers, config, data_dir, args.zookeeper)
    try:
        cluster.start()
    except (BrokerStartError, ZooKeeperStartError, OSError) as e:
        print(f"odradek: cluster start-up failed: {e}", file=sys.stderr)
        cluster.stop()
        return 1
    try:
        print(
            f"{READY} bootstrap_servers={cluster.bootstrap_servers} zookeeper={cluster.zookeeper}",
            flush=True,
        )
        for node, broker in cluster.brokers.items():
            print(
                f"broker node_id={node} pid={broker.pid} listener={broker.bootstrap_servers}",
                flush=True,
            )
        while not stop.wait(1.0):
            pass
        print("odradek: stopping the cluster", file=sys.stderr, flush=True)
    finally:
        for node, broker in cluster.brokers.items():
            (data_dir / f"broker-{node}.log").write_text("".join(broker.log_lines))
        cluster.stop()
    return 0
