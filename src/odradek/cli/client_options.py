"""Connection options shared by the client-side tools (topics, configs, produce, consume).

These tools talk to any Kafka-compatible broker through confluent-kafka, so the
options mirror Kafka's own command-line tools: ``--bootstrap-server``,
``--command-config FILE`` (client properties) and repeatable ``-X key=value``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def parse_key_value(item: str) -> tuple[str, str]:
    """Split ``key=value`` (the value may itself contain '='); argparse reports a bad item."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {item!r}")
    return key.strip(), value


def read_properties(path: Path) -> dict[str, str]:
    """A Java-style .properties file: key=value lines, '#' and '!' comments."""
    props: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, value = parse_key_value(line)
        props[key] = value.strip()
    return props


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        help=f"host:port of one or more brokers, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        help="file of client properties (security settings, timeouts)",
    )
    add_key_value_arg(
        parser, "-X", dest="client_properties", help="a librdkafka client property; repeatable"
    )


def add_key_value_arg(
    parser: argparse.ArgumentParser, *flags: str, help: str, dest: str | None = None
) -> None:
    """A repeatable ``KEY=VALUE`` option collected as a list of pairs, as Kafka's tools take them."""
    parser.add_argument(  # dest=None: argparse names it after the first long flag
        *flags,
        action="append",
        type=parse_key_value,
        default=[],
        metavar="KEY=VALUE",
        help=help,
        dest=dest,
    )


def client_config(
    args: argparse.Namespace,
    extra: Iterable[tuple[str, str]] = (),
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The confluent-kafka configuration the options describe; later sources win.

    ``defaults`` (the tool's own settings, such as its error callback) come first, then
    the --command-config file, ``extra`` (the tool's options) and -X properties.
    """
    config: dict[str, Any] = {"bootstrap.servers": args.bootstrap_server, **(defaults or {})}
    if args.command_config is not None:
        config.update(read_properties(args.command_config))
    config.update(extra)
    config.update(args.client_properties)
    return config
