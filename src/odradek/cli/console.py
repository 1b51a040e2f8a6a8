"""`odradek console`: serve the web console (odradek.console) for a cluster until interrupted.

The console's web libraries (aiohttp, Jinja2) come with the ``console`` extra, so they are
imported only when the command runs: ``odradek --help`` and the other tools work without
them, and a missing extra is one line naming how to install it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from odradek.cli.client_options import add_connection_args, client_config
from odradek.cli.errors import ToolError

DEFAULT_PORT = 8080


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "console", help="a web console for topics, messages and consumer groups"
    )
    add_connection_args(parser)
    parser.add_argument(
        "--host", default="127.0.0.1", help="address the console listens on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port the console listens on; 0 picks a free one (default {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--timeout-ms",
        type=int,
        default=10_000,
        help="how long a page waits for the cluster before saying it does not answer "
        "(default 10000)",
    )
    parser.add_argument(
        "--lag-interval-ms",
        type=int,
        default=10_000,
        help="how often the total lag of a group whose page was viewed is sampled for its "
        "chart (default 10000)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        from odradek.console.app import serve
        from odradek.console.cluster import Cluster
    except ImportError as exc:
        raise ToolError(
            f"the console needs the console extra ({exc.name} is missing): "
            "pip install 'odradek[console]'"
        ) from None
    if args.timeout_ms <= 0:
        raise ToolError("--timeout-ms must be positive")
    if args.lag_interval_ms <= 0:
        raise ToolError("--lag-interval-ms must be positive")
    cluster = Cluster(client_config(args), timeout_s=args.timeout_ms / 1000)

    def ready(url: str) -> None:
        print(f"odradek console ready url={url}", flush=True)

    async def main() -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await serve(cluster, args.host, args.port, ready, args.lag_interval_ms / 1000)

    try:
        asyncio.run(main())
    except OSError as exc:  # the port is taken, the address is not ours
        raise ToolError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    finally:
        cluster.close()
    return 0
