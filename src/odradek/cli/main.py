"""The `odradek` command: one argparse subcommand per module in COMMAND_MODULES.

Each module exposes ``register(subparsers)``, which adds its subcommand(s) with
``set_defaults(func=...)``; ``func(args)`` returns the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMAND_MODULES = [
    "odradek.cli.serve",
    "odradek.cli.pipeline",
    "odradek.cli.topics",
    "odradek.cli.produce",
    "odradek.cli.consume",
    "odradek.cli.configs",
    "odradek.cli.perf",
    "odradek.cli.groups",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="A Kafka-compatible event-streaming broker.")
    parser.add_argument("--log-level", default="INFO", help="Python logging level (default INFO)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
