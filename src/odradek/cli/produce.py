"""``odradek produce``: kafka-console-producer for any Kafka-compatible broker.

Each line of stdin becomes one record. With ``--property parse.key=true`` (or
``--key-separator SEP``) the text before the first separator is the key; a
line without the separator is an error, as in Kafka's tool.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from confluent_kafka import KafkaError, Producer

from odradek.cli.broker_calls import BrokerWatch
from odradek.cli.client_options import add_connection_args, add_key_value_arg, client_config

FLUSH_TIMEOUT_S = 60.0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("produce", help="write lines from stdin to a topic")
    add_connection_args(parser)
    parser.add_argument("--topic", required=True, help="topic to write to")
    parser.add_argument("--partition", type=int, help="write every record to this partition")
    parser.add_argument(
        "--key-separator", help="split each line into key SEP value (implies parse.key)"
    )
    add_key_value_arg(
        parser,
        "--property",
        help="line reader properties: parse.key=true, key.separator=SEP, null.marker=TEXT",
    )
    add_key_value_arg(
        parser,
        "--producer-property",
        help="a producer config, e.g. acks=all, compression.type=zstd, enable.idempotence=true",
    )
    parser.set_defaults(func=run)


class LineReader:
    """Turns one input line into (key, value) according to Kafka's LineMessageReader properties."""

    def __init__(self, properties: dict[str, str], key_separator: str | None) -> None:
        self.parse_key = key_separator is not None or properties.get("parse.key", "false") == "true"
        self.separator = key_separator or properties.get("key.separator", "\t")
        self.null_marker = properties.get("null.marker")

    def parse(self, line: str) -> tuple[bytes | None, bytes | None]:
        key: str | None = None
        value: str | None = line
        if self.parse_key:
            key, sep, value = line.partition(self.separator)
            if not sep:
                raise ValueError(f"no key separator {self.separator!r} in line {line!r}")
        return self._encode(key), self._encode(value)

    def _encode(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return text.encode()


def run(args: argparse.Namespace, stdin: TextIO | None = None) -> int:
    reader = LineReader(dict(args.property), args.key_separator)
    watch = BrokerWatch(args.bootstrap_server)
    producer = Producer(client_config(args, args.producer_property, defaults=watch.client_config()))
    failures: list[KafkaError] = []

    def on_delivery(error: KafkaError | None, _msg: object) -> None:
        if error is not None:
            failures.append(error)

    extra = {} if args.partition is None else {"partition": args.partition}
    for number, line in enumerate(stdin or sys.stdin, start=1):
        try:
            key, value = reader.parse(line.rstrip("\r\n"))
        except ValueError as exc:
            print(f"Error on line {number}: {exc}", file=sys.stderr)
            producer.flush(FLUSH_TIMEOUT_S)
            return 1
        while True:
            try:
                producer.produce(args.topic, value=value, key=key, on_delivery=on_delivery, **extra)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                producer.poll(0.1)
        producer.poll(0)
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if failures or remaining:
        watch.check()  # undelivered because no broker could be reached: say that, once
    for error in failures[:10]:
        print(f"Error: {error.name()}: {error.str()}", file=sys.stderr)
    if remaining:
        print(
            f"Error: {remaining} record(s) not delivered within {FLUSH_TIMEOUT_S:.0f}s",
            file=sys.stderr,
        )
    return 1 if failures or remaining else 0
