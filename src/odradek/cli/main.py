"""The `odradek` command: one argparse subcommand per module in COMMAND_MODULES.

Each module exposes ``register(subparsers)``, which adds its subcommand(s) with
``set_defaults(func=...)``; ``func(args)`` returns the exit status. A tool fails by raising
``ToolError`` (one line on stderr, status 1); a closed stdout ends it quietly, as it ends
Unix tools, and Ctrl-C with status 130: no subcommand ends in a traceback for these.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from odradek.cli.errors import ToolError, stdout_closed

COMMAND_MODULES = [
    "odradek.cli.serve",
    "odradek.cli.cluster",
    "odradek.cli.pipeline",
    "odradek.cli.topics",
    "odradek.cli.produce",
    "odradek.cli.consume",
    "odradek.cli.configs",
    "odradek.cli.perf",
    "odradek.cli.groups",
    "odradek.cli.transactions",
    "odradek.cli.acls",
    "odradek.cli.quotas",
    "odradek.cli.users",
    "odradek.cli.console",
    "odradek.cli.docs",
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or only of ``command`` when a module of that name has it.

    Each module registers the subcommand named after it, and importing the client tools'
    modules imports confluent-kafka: `odradek serve` registers only itself, so the broker
    process never loads a client library.
    """
    parser = argparse.ArgumentParser(
        prog="odradek", description="A Kafka-compatible event-streaming broker."
    )
    parser.add_argument("--log-level", default="INFO", help="Python logging level (default INFO)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = [m for m in COMMAND_MODULES if m.rpartition(".")[2] == command] or COMMAND_MODULES
    for module in modules:
        importlib.import_module(module).register(subparsers)
    return parser


def command_name(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is neither an option nor --log-level's
    value; None before a --help (which lists every subcommand)."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help"):
            return None
        if word == "--log-level":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def without_test_libraries() -> None:
    """Keep hypothesis out of a broker process.

    kio imports hypothesis whenever it is installed (a dev or test venv) to register
    test strategies for its types; that import and the registration took 0.2 s of
    every broker start, for nothing a broker uses. Marked absent in ``sys.modules``
    before kio is imported (``odradek serve`` does it before its parser imports any
    broker module), ``import hypothesis`` raises ImportError, which kio takes as "not
    installed". A process that already imported it keeps it.
    """
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    command = command_name(sys.argv[1:] if argv is None else argv)
    if command == "serve":
        without_test_libraries()
    args = build_parser(command).parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()
    except ToolError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return stdout_closed()
    except KeyboardInterrupt:
        return 130
    return status


if __name__ == "__main__":
    raise SystemExit(main())
