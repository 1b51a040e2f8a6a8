"""The message browser's live tail: new records of a topic streamed to the page as they arrive.

The page opens an ``EventSource`` (Server-Sent Events, built into every browser: no library,
no build step) on ``/topics/NAME/live``; the console answers with one ``ready`` event naming
the offsets it starts from (the end offsets of that moment, so the page shows only what
arrives after), then one unnamed event per batch of records, a ``notice`` when the client
reports a passing problem (the cluster unreachable for a while; librdkafka reconnects by
itself) and a ``failure`` when the tail cannot go on (an unknown topic or partition): the
page shows that sentence and closes the stream, where an HTTP error status would only make
the browser's EventSource give up without a word.

The ``ready`` event's id and each batch's are the next offset of every partition
(``0:15,1:20``). A browser that lost the stream reconnects by itself and sends the last id
back (``Last-Event-ID``), and a page resuming from pause passes it as ``from``: the tail then
goes on from there, so a pause or a dropped connection loses no record and shows none twice.

Why a held Consumer and not a fetch per poll: a live tail is open for minutes, and a
Consumer assigned once keeps its fetch session and its connection, where a new one per poll
would cost a metadata request and connections every second. ``LiveTail`` blocks (librdkafka
waits for the broker), so the web application polls it in threads of its own, one at a time
per tail, in steps of at most ``POLL_S``, checking between steps whether the page is gone.
The consumer prefetches at most a few MiB (``Cluster._reader``) and the page keeps a bounded
number of rows, so a busy topic costs the console and the browser bounded memory; what a
page cannot take as fast as the topic grows waits in TCP, not in the console.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from odradek.console.errors import ConsoleError
from odradek.console.fields import whole_number
from odradek.console.payload import Message, format_ms, message_of

#: Longest a poll blocks: how soon a closed page or a stopping console ends the tail.
POLL_S = 0.5
#: Most records one event carries.
BATCH = 200
#: Errors that end a tail: the topic or partition is gone, or the client cannot go on.
_FATAL = frozenset(
    {
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
)


def parse_positions(text: str) -> dict[int, int]:
    """``0:15,1:20`` -> {0: 15, 1: 20}; '' -> {}. Anything else is a ConsoleError (400)."""
    positions: dict[int, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        partition, sep, offset = item.partition(":")
        if not sep:
            raise ConsoleError(f"live tail position {item!r} is not partition:offset", 400)
        p = whole_number(partition, "live tail partition", bits=32)
        o = whole_number(offset, "live tail offset")
        if p is None or o is None or p < 0 or o < 0:
            raise ConsoleError(f"live tail position {item!r} is not partition:offset", 400)
        positions[p] = o
    return positions


def format_positions(positions: Mapping[int, int]) -> str:
    return ",".join(f"{p}:{o}" for p, o in sorted(positions.items()))


def event(data: Any, name: str | None = None, event_id: str | None = None) -> bytes:
    """One Server-Sent Event: ``data`` as one line of JSON (json.dumps escapes newlines)."""
    lines = []
    if name is not None:
        lines.append(f"event: {name}")
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    return ("\n".join(lines) + "\n\n").encode()


def record_data(message: Message) -> dict[str, Any]:
    """A record as the page's script draws it: the fields of a row of the browser's table."""
    return {
        "partition": message.partition,
        "offset": message.offset,
        "timestamp": format_ms(message.timestamp_ms),
        "timestamp_type": message.timestamp_type,
        "key": dataclasses.asdict(message.key),
        "value": dataclasses.asdict(message.value),
        "headers": [[name, dataclasses.asdict(shown)] for name, shown in message.headers],
    }


@dataclass
class Step:
    """What one poll brought: records, and problems worth telling the reader."""

    messages: list[Message] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


class LiveTail:
    """A Consumer assigned to a topic's partitions at ``positions``, polled by ``poll``."""

    def __init__(self, consumer: Consumer, topic: str, positions: Mapping[int, int]) -> None:
        self.topic = topic
        #: Partition -> the offset of the next record to show.
        self.positions = dict(positions)
        self._consumer = consumer
        consumer.assign([TopicPartition(topic, p, o) for p, o in self.positions.items()])

    def poll(self) -> Step:
        """Up to ``BATCH`` records that arrived, waiting at most ``POLL_S`` for the first."""
        step = Step()
        for record in self._consumer.consume(BATCH, timeout=POLL_S):
            error = record.error()
            if error is None:
                message = message_of(record)
                step.messages.append(message)
                self.positions[message.partition] = message.offset + 1
            elif error.code() in _FATAL or error.fatal():
                status = 404 if error.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED else 403
                raise ConsoleError(f"live tail of {self.topic}: {error.name()}", status)
            elif error.code() != KafkaError._PARTITION_EOF:
                step.notices.append(f"the cluster: {error.str()}")
        return step

    def close(self) -> None:
        self._consumer.close()
