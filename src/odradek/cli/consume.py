"""``odradek consume``: kafka-console-consumer for any Kafka-compatible broker.

Without ``--group`` the tool assigns partitions itself (no group coordinator, no
commits), so it can start from the beginning, an offset or a timestamp on any
broker. With ``--group`` it subscribes and commits like any group member.
``--isolation-level`` is Kafka's console consumer option, read_uncommitted by default
as there (librdkafka's own default is read_committed).

``--timeout-ms`` ("exit if no message is available for consumption for the specified
interval", Kafka's words) counts from the moment the consumer has partitions to read: with
``--group`` from each assignment, without it from the assignment the tool makes. Kafka's
ConsoleConsumer counts from the start of each ``poll``, and the Java consumer's poll does not
wait for a group join, so there a new group's first rebalance, which the coordinator holds
back for group.initial.rebalance.delay.ms (3 s by default), eats the timeout and a
``--timeout-ms 3000`` prints nothing although records are there. Here the wait for the first
assignment is not idle time; it ends when the group coordinator answers, or at once with an
error when no broker can be reached.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from typing import TextIO

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from odradek.cli.broker_calls import TIMEOUT_S, BrokerWatch, error_text
from odradek.cli.client_options import add_connection_args, add_key_value_arg, client_config
from odradek.cli.errors import ToolError

POLL_INTERVAL_S = 0.2


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("consume", help="print records from a topic")
    add_connection_args(parser)
    parser.add_argument("--topic", required=True, help="topic to read")
    parser.add_argument("--group", help="consume as a member of this consumer group")
    parser.add_argument("--partition", type=int, help="read only this partition")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument(
        "--offset", help="earliest, latest or an offset number (a number needs --partition)"
    )
    start.add_argument(
        "--timestamp", type=int, help="start at the first record at or after this epoch ms"
    )
    parser.add_argument("--max-messages", type=int, help="exit after printing this many records")
    parser.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="text: one line per record (see --property); json: one object per record",
    )
    add_key_value_arg(
        parser,
        "--property",
        help="text format: print.key, print.timestamp, print.partition, print.offset, key.separator",
    )
    parser.add_argument(
        "--isolation-level",
        choices=("read_uncommitted", "read_committed"),
        default="read_uncommitted",
        help="read_committed skips the records of aborted and still open transactions "
        "(default, as Kafka's console consumer: read_uncommitted)",
    )
    add_key_value_arg(
        parser, "--consumer-property", help="a consumer config, e.g. fetch.min.bytes=1024"
    )
    parser.set_defaults(func=run)


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


class Formatter:
    """Renders records as Kafka's DefaultMessageFormatter does, or as one JSON object per line."""

    def __init__(self, fmt: str, properties: dict[str, str]) -> None:
        self.fmt = fmt
        self.flags = {k for k, v in properties.items() if k.startswith("print.") and v == "true"}
        self.separator = properties.get("key.separator", "\t")

    def format(self, msg: Message) -> str:
        if self.fmt == "json":
            return json.dumps(_as_json(msg), ensure_ascii=False)
        fields = []
        if "print.timestamp" in self.flags:
            fields.append(f"CreateTime:{msg.timestamp()[1]}")
        if "print.partition" in self.flags:
            fields.append(f"Partition:{msg.partition()}")
        if "print.offset" in self.flags:
            fields.append(f"Offset:{msg.offset()}")
        if "print.key" in self.flags:
            fields.append(_text(msg.key()))
        fields.append(_text(msg.value()))
        return self.separator.join(fields)


def _json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text as a string; other bytes as {"base64": ...} so nothing is lost."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def _headers(msg: Message) -> list[tuple[str, bytes | None]]:
    """A record's headers as (key, value) pairs; confluent-kafka's stubs type them loosely."""
    return list(msg.headers() or [])  # type: ignore[arg-type]


def _as_json(msg: Message) -> dict[str, object]:
    return {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
        "key": _json_bytes(msg.key()),
        "value": _json_bytes(msg.value()),
        "headers": [[k, _json_bytes(v)] for k, v in _headers(msg)],
    }


def _start_offset(args: argparse.Namespace) -> int:
    if args.from_beginning or args.offset == "earliest":
        return OFFSET_BEGINNING
    if args.offset is None or args.offset == "latest":
        return OFFSET_END
    return int(args.offset)


def _assignment(
    consumer: Consumer, watch: BrokerWatch, args: argparse.Namespace
) -> list[TopicPartition]:
    topic = watch.metadata(consumer, args.topic).topics[args.topic]
    if topic.error is not None:
        raise ToolError(f"topic {args.topic}: {topic.error.str()}")
    partitions = sorted(topic.partitions) if args.partition is None else [args.partition]
    if args.timestamp is not None:
        wanted = [TopicPartition(args.topic, p, args.timestamp) for p in partitions]
        try:
            found = consumer.offsets_for_times(wanted, timeout=TIMEOUT_S)
        except KafkaException as exc:
            raise ToolError(f"offsets for --timestamp: {error_text(exc)}") from None
        return [
            TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
            for tp in found
        ]
    start = _start_offset(args)
    return [TopicPartition(args.topic, p, start) for p in partitions]


def _validate(args: argparse.Namespace) -> str | None:
    if args.offset not in (None, "earliest", "latest"):
        if not args.offset.lstrip("-").isdigit():
            return "--offset must be earliest, latest or a number"
        if args.partition is None:
            return "--offset with a number needs --partition"
    if args.group and (args.partition is not None or args.offset or args.timestamp is not None):
        return "--group cannot be combined with --partition, --offset or --timestamp"
    return None


class IdleClock:
    """When the consumer last had something to do: ``--timeout-ms`` counts from here.

    It starts at an assignment (the group's, through ``on_assign``, or the tool's own) and
    restarts at each record; until the first assignment nothing counts as idle.
    """

    def __init__(self) -> None:
        self.since: float | None = None

    def restart(self, *_: object) -> None:
        self.since = time.monotonic()

    @property
    def assigned(self) -> bool:
        return self.since is not None

    def idle_for(self, timeout_ms: int | None) -> bool:
        return (
            timeout_ms is not None
            and self.since is not None
            and (time.monotonic() - self.since) * 1000 >= timeout_ms
        )


def run(args: argparse.Namespace, stdout: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    problem = _validate(args)
    if problem:
        print(f"Error: {problem}", file=sys.stderr)
        return 2
    extra: dict[str, str] = {}
    if args.group:
        extra |= {
            "group.id": args.group,
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        }
    else:
        extra |= {"group.id": "odradek-console-consumer", "enable.auto.commit": "false"}
    # librdkafka defaults to read_committed; the tool defaults, as Kafka's, to read_uncommitted.
    extra["isolation.level"] = args.isolation_level
    extra |= dict(args.consumer_property)
    watch = BrokerWatch(args.bootstrap_server)
    consumer = Consumer(client_config(args, extra.items(), defaults=watch.client_config()))
    formatter = Formatter(args.format, dict(args.property))
    clock = IdleClock()
    printed = 0
    try:
        if args.group:
            consumer.subscribe([args.topic], on_assign=clock.restart)
        else:
            consumer.assign(_assignment(consumer, watch, args))
            clock.restart()
        while args.max_messages is None or printed < args.max_messages:
            msg = consumer.poll(POLL_INTERVAL_S)
            if msg is None:
                if not clock.assigned:
                    watch.check()  # before the first assignment: no broker, no waiting
                if clock.idle_for(args.timeout_ms):
                    break
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise ToolError(error.str())
            print(formatter.format(msg), file=out, flush=True)
            printed += 1
            clock.restart()
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return 0
