"""`odradek serve`: run a broker until SIGTERM or SIGINT.

Configs come from an optional server.properties, then the convenience flags
(--data-dir sets log.dirs, --host/--port set listeners), then ``-o key=value``
overrides, later ones winning. Start-up failures (a bad value, a port in use, an
unwritable or locked data dir) print one line naming the cause and exit non-zero.
Once listening it prints the ready line (server/ready.py), which EmbeddedBroker waits for.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import signal
import sys

from odradek.server.allocator import tune_allocator
from odradek.server.config import BrokerConfig, ConfigError, read_properties
from odradek.server.ready import ready_line


def register(subparsers: argparse._SubParsersAction) -> None:
    serve = subparsers.add_parser("serve", help="run a broker", description=__doc__)
    serve.add_argument(
        "--config", metavar="server.properties", help="Kafka-style broker config file"
    )
    serve.add_argument(
        "--data-dir", metavar="DIR", help="log.dirs (default /tmp/kafka-logs, as Kafka)"
    )
    serve.add_argument("--host", help="listener host (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listener port (default 9092; 0 picks a free one)")
    serve.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config, Kafka name (repeatable)",
    )
    serve.set_defaults(func=run)


def broker_properties(args: argparse.Namespace) -> dict[str, str]:
    props: dict[str, str] = read_properties(args.config) if args.config else {}
    if args.data_dir:
        props["log.dirs"] = args.data_dir
    if args.host is not None or args.port is not None:
        props["listeners"] = (
            f"PLAINTEXT://{args.host or '127.0.0.1'}:{9092 if args.port is None else args.port}"
        )
    props.update(overrides(args.override))
    return props


def overrides(items: list[str]) -> dict[str, str]:
    """``-o key=value`` options as configs; ConfigError names a malformed one."""
    props = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-o {item!r}: expected key=value")
        props[key.strip()] = value.strip()
    return props


def run(args: argparse.Namespace) -> int:
    try:
        config = BrokerConfig(broker_properties(args))
    except (ConfigError, OSError) as e:
        print(f"odradek: invalid configuration: {e}", file=sys.stderr)
        return 2
    tune_allocator()  # a broker process reuses its large buffers (allocator.py says why)
    try:
        return asyncio.run(_serve(config))
    except KeyboardInterrupt:
        return 0


async def _serve(config: BrokerConfig) -> int:
    from odradek.protocol.errors import KafkaError
    from odradek.server.broker import Broker
    from odradek.storage.errors import LogDirLocked

    try:
        broker = Broker(config)
        await broker.start()
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            print(
                f"odradek: cannot listen on {e.filename}: address already in use", file=sys.stderr
            )
        elif isinstance(e, PermissionError):
            print(f"odradek: data directory not writable: {e}", file=sys.stderr)
        else:
            print(f"odradek: start-up failed: {e}", file=sys.stderr)
        return 1
    except LogDirLocked as e:
        print(f"odradek: data directory is locked by another process: {e}", file=sys.stderr)
        return 1
    except (ConfigError, ValueError) as e:
        print(f"odradek: invalid configuration: {e}", file=sys.stderr)
        return 2
    except KafkaError as e:
        print(f"odradek: start-up failed: {e}", file=sys.stderr)
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    line = ready_line(
        broker.advertised,
        broker.node_id,
        broker.cluster_id,
        config.log_dirs,
        broker.advertised_listeners,
        broker.components["metrics"].url,
    )
    print(line, flush=True)
    await stop.wait()
    print("odradek: shutting down", file=sys.stderr, flush=True)
    await broker.stop()
    return 0
