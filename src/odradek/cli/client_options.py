"""Connection options shared by the client-side tools (topics, configs, produce, consume).

These tools talk to any Kafka-compatible broker through confluent-kafka, so the
options mirror Kafka's own command-line tools: ``--bootstrap-server``,
``--command-config FILE`` (client properties, the Java client's security settings
translated by ``client_security``) and repeatable ``-X key=value`` (librdkafka's names).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from odradek.cli.client_security import librdkafka_config
from odradek.cli.errors import ToolError
from odradek.java_properties import parse_properties

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def parse_key_value(item: str) -> tuple[str, str]:
    """Split ``key=value`` (the value may itself contain '='); argparse reports a bad item."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {item!r}")
    return key.strip(), value


def read_properties(path: Path) -> dict[str, str]:
    """A client.properties file, read as Java reads it (``java_properties``)."""
    try:
        return parse_properties(path.read_text())
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}") from None


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        default=DEFAULT_BOOTSTRAP,
        help=f"host:port of one or more brokers, comma-separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        help="file of client properties: Kafka's Java client settings (security.protocol, "
        "ssl.truststore.*, sasl.jaas.config, ...) or librdkafka's",
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
        config.update(librdkafka_config(read_properties(args.command_config)))
    config.update(extra)
    config.update(args.client_properties)
    return config
