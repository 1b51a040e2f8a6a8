"""The null broker: the smallest Kafka-protocol server, the reference every benchmark is divided by.

It acknowledges Produce without storing anything and answers Fetch from memory,
so what a client achieves against it is what the client, the Python event loop
and the machine can do at all. Per partition it keeps only a log end offset and
the last produced batches (memoryviews into their request frames, up to
``--retain-bytes``). A Fetch inside that window gets those batches; a Fetch
below it gets the same batches replayed with their baseOffset rewritten to the
requested offset (the v2 batch CRC does not cover baseOffset), so a consumer can
read any number of records that were produced, at full speed, without the
broker holding them.

Produce and Fetch are hand-written (record bytes are never copied or parsed
beyond the batch header); the control plane (ApiVersions, Metadata,
ListOffsets, CreateTopics, FindCoordinator, InitProducerId) goes through kio.
It advertises the same Produce (3-11) and Fetch (4-12) versions as Odradek so
that librdkafka takes the same code paths (v2 record batches) against both.

    python bench/null_broker.py [--host 127.0.0.1] [--port 0] [--num-partitions 1]

prints ``null-broker ready bootstrap_servers=HOST:PORT`` once listening.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import struct
import sys
import uuid
from collections import deque
from typing import Any

# As `odradek serve` does (odradek.cli.serve.without_test_libraries): kio imports hypothesis
# when it is installed, 0.2 s of start-up that neither broker uses. The reference keeps it out too.
sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]

from kio.schema.errors import ErrorCode  # noqa: E402 - after the line above

from odradek.protocol.schemas import (  # noqa: E402
    build,
    decode_request,
    encode,
    is_flexible,
    response_module,
    response_schema,
)
from odradek.protocol.wire import (  # noqa: E402
    array_length,
    read_array_length,
    read_string,
    read_uvarint,
    skip_tagged_fields,
    string,
    uvarint,
)

READY = "null-broker ready"

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR = 0, 1, 2, 3, 10
API_VERSIONS, CREATE_TOPICS, INIT_PRODUCER_ID = 18, 19, 22

#: api key -> (min, max) version, as advertised in ApiVersions.
SUPPORTED = {
    PRODUCE: (3, 11),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 8),
    METADATA: (1, 12),
    FIND_COORDINATOR: (0, 4),
    API_VERSIONS: (0, 3),
    CREATE_TOPICS: (2, 7),
    INIT_PRODUCER_ID: (0, 4),
}

NODE_ID = 0
CLUSTER_ID = "null-broker"
_I8, _I16, _I32, _I64 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q"))
#: Requests handled back to back before a connection yields the event loop (as Odradek's listener).
MAX_BURST = 16
#: Offsets of the v2 record batch header fields the broker reads.
BATCH_LENGTH_AT, LAST_OFFSET_DELTA_AT, BATCH_OVERHEAD = 8, 23, 12


# ---------------------------------------------------------------- kio control plane


def _response(api_key: int, api_version: int, entity: str | None = None, **fields: Any) -> Any:
    """A kio response (or nested ``entity``) of this version, keeping the fields it defines."""
    cls = (
        response_schema(api_key, api_version)
        if entity is None
        else getattr(response_module(api_key, api_version), entity)
    )
    return build(cls, **fields)


# ---------------------------------------------------------------- state


class PartitionBuffer:
    """A partition's log end offset and its last batches: (base offset, record count, batch bytes)."""

    __slots__ = ("batches", "log_end_offset", "retained_bytes", "waiters")

    def __init__(self) -> None:
        self.log_end_offset = 0
        self.batches: deque[tuple[int, int, memoryview]] = deque()
        self.retained_bytes = 0
        self.waiters: set[asyncio.Future] = set()

    def append(self, records: memoryview, retain_bytes: int) -> int:
        """Assign offsets to every batch of ``records``; returns the first offset."""
        first = self.log_end_offset
        pos, end = 0, len(records)
        while pos + BATCH_OVERHEAD <= end:
            size = BATCH_OVERHEAD + _I32.unpack_from(records, pos + BATCH_LENGTH_AT)[0]
            count = _I32.unpack_from(records, pos + LAST_OFFSET_DELTA_AT)[0] + 1
            self.batches.append((self.log_end_offset, count, records[pos : pos + size]))
            self.retained_bytes += size
            self.log_end_offset += count
            pos += size
        while self.retained_bytes > retain_bytes and len(self.batches) > 1:
            self.retained_bytes -= len(self.batches.popleft()[2])
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()
        return first

    def read(self, offset: int, max_bytes: int, out: list) -> int:
        """Append record chunks from ``offset`` to ``out`` (at least one batch); returns bytes added."""
        if offset >= self.log_end_offset or not self.batches:
            return 0
        size = 0
        start = self.batches[0][0]
        if offset < start:
            # Below the retained window: replay the window re-based at ``offset``.
            base = offset
            for _, count, batch in self.batches:
                if size and size + len(batch) > max_bytes:
                    break
                out.append(_I64.pack(base))
                out.append(batch[8:])
                size += len(batch)
                base += count
            return size
        for base, count, batch in self.batches:
            if base + count <= offset:
                continue
            if size and size + len(batch) > max_bytes:
                break
            out.append(_I64.pack(base))  # producers send baseOffset 0; the broker assigns it
            out.append(batch[8:])
            size += len(batch)
        return size


class NullBroker:
    """Topics and partition buffers shared by every connection."""

    def __init__(self, host: str, port: int, num_partitions: int, retain_bytes: int) -> None:
        self.host, self.port = host, port
        self.num_partitions = num_partitions
        self.retain_bytes = retain_bytes
        self.topics: dict[str, list[PartitionBuffer]] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.next_producer_id = 1000

    def create_topic(self, name: str, partitions: int) -> list[PartitionBuffer]:
        self.topic_ids[name] = uuid.uuid4()
        parts = self.topics[name] = [PartitionBuffer() for _ in range(partitions)]
        return parts

    def partition(self, topic: str, index: int) -> PartitionBuffer | None:
        parts = self.topics.get(topic)
        if parts is None or not 0 <= index < len(parts):
            return None
        return parts[index]


# ---------------------------------------------------------------- connection


class Connection(asyncio.Protocol):
    """One client connection: frames in, responses out, strictly in request order.

    Complete frames queue in ``backlog`` and are handled at most ``MAX_BURST`` at a time
    before the event loop gets a turn (as Odradek's listener does), so that a fetch woken
    by an append on another connection is not held back by this one's pipelined backlog;
    a long-polling Fetch parks the connection until it is answered.
    """

    def __init__(self, broker: NullBroker) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.chunks: list[bytes | memoryview] = []
        self.buffered = 0
        self.need = 4
        self.frame_size = -1
        self.backlog: deque[memoryview] = deque()
        self.parked = False
        self.scheduled = False  # a call of _run is pending

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def pause_writing(self) -> None:
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.buffered += len(data)
        while self.buffered >= self.need:
            joined = memoryview(b"".join(self.chunks) if len(self.chunks) > 1 else self.chunks[0])
            if self.frame_size < 0:
                self.frame_size = _I32.unpack_from(joined, 0)[0]
                rest = joined[4:]
                self.need = self.frame_size
            else:
                frame, rest = joined[: self.frame_size], joined[self.frame_size :]
                self.frame_size, self.need = -1, 4
                self.backlog.append(frame)
            self.chunks = [rest] if rest else []
            self.buffered = len(rest)
        self._run()

    def _run(self) -> None:
        """Handle up to MAX_BURST queued frames; come back for the rest after the loop's other work."""
        self.scheduled = False
        if self.transport.is_closing():
            return
        for _ in range(MAX_BURST):
            if self.parked or not self.backlog:
                return
            self.handle(self.backlog.popleft())
        if self.backlog and not self.parked and not self.scheduled:
            self.scheduled = True
            asyncio.get_running_loop().call_soon(self._run)

    def send(self, correlation_id: int, flexible_header: bool, body: list) -> None:
        head = _I32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
        size = len(head) + sum(len(c) for c in body)
        self.transport.writelines([_I32.pack(size), head, *body])

    def handle(self, buf: memoryview) -> None:
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", buf, 0)
        versions = SUPPORTED.get(api_key)
        if api_key == API_VERSIONS and not versions[0] <= api_version <= versions[1]:
            self.send(
                correlation_id,
                False,
                [encode(self._api_18(0, None, ErrorCode.unsupported_version))],
            )
            return
        if versions is None or not versions[0] <= api_version <= versions[1]:
            self.transport.close()
            return
        flexible = is_flexible(api_key, api_version)
        _client_id, pos = read_string(buf, 8, False)
        if flexible:
            pos = skip_tagged_fields(buf, pos)
        body = buf[pos:]
        response_flexible = flexible and api_key != API_VERSIONS
        if api_key == PRODUCE:
            response = self._produce(api_version, body)
            if response is not None:
                self.send(correlation_id, response_flexible, response)
        elif api_key == FETCH:
            self._fetch(api_version, body, correlation_id)
        else:
            request = decode_request(api_key, api_version, body)
            response = getattr(self, f"_api_{api_key}")(api_version, request)
            self.send(correlation_id, response_flexible, [encode(response)])

    # -- Produce (hand-written)

    def _produce(self, v: int, body: memoryview) -> list | None:
        flexible = v >= 9
        _txn, pos = read_string(body, 0, flexible)
        acks = _I16.unpack_from(body, pos)[0]
        pos += 6
        n_topics, pos = read_array_length(body, pos, flexible)
        out = [array_length(n_topics, flexible)]  # throttle_time_ms comes after the topics
        retain = self.broker.retain_bytes
        for _ in range(n_topics):
            name, pos = read_string(body, pos, flexible)
            n_parts, pos = read_array_length(body, pos, flexible)
            out.append(string(name, flexible) + array_length(n_parts, flexible))
            for _ in range(n_parts):
                index = _I32.unpack_from(body, pos)[0]
                pos += 4
                if flexible:
                    n, pos = read_uvarint(body, pos)
                    n -= 1
                else:
                    n = _I32.unpack_from(body, pos)[0]
                    pos += 4
                records = body[pos : pos + max(n, 0)]
                pos += max(n, 0)
                if flexible:
                    pos = skip_tagged_fields(body, pos)
                partition = self.broker.partition(name, index)
                if partition is None:
                    code, base = ErrorCode.unknown_topic_or_partition.value, -1
                else:
                    code, base = 0, partition.append(records, retain)
                part = _I32.pack(index) + _I16.pack(code) + _I64.pack(base) + _I64.pack(-1)
                if v >= 5:
                    part += _I64.pack(0)  # log_start_offset
                if v >= 8:
                    part += array_length(0, flexible) + (b"\x00" if flexible else b"\xff\xff")
                if flexible:
                    part += b"\x00"
                out.append(part)
            if flexible:
                pos = skip_tagged_fields(body, pos)
                out.append(b"\x00")
        if acks == 0:
            return None
        out.append(_I32.pack(0) + (b"\x00" if flexible else b""))
        return out

    # -- Fetch (hand-written)

    def _fetch(self, v: int, body: memoryview, correlation_id: int) -> None:
        flexible = v >= 12
        _replica, max_wait_ms, min_bytes, max_bytes = struct.unpack_from(">iiii", body, 0)
        pos = 17  # + isolation_level
        if v >= 7:
            pos += 8  # session_id, session_epoch
        wanted: list[tuple[str, list[tuple[int, int, int]]]] = []
        n_topics, pos = read_array_length(body, pos, flexible)
        for _ in range(n_topics):
            name, pos = read_string(body, pos, flexible)
            n_parts, pos = read_array_length(body, pos, flexible)
            parts = []
            for _ in range(n_parts):
                index = _I32.unpack_from(body, pos)[0]
                pos += 8 if v >= 9 else 4  # + current_leader_epoch
                offset = _I64.unpack_from(body, pos)[0]
                pos += 8
                if v >= 12:
                    pos += 4  # last_fetched_epoch
                if v >= 5:
                    pos += 8  # log_start_offset
                partition_max = _I32.unpack_from(body, pos)[0]
                pos += 4
                if flexible:
                    pos = skip_tagged_fields(body, pos)
                parts.append((index, offset, partition_max))
            if flexible:
                pos = skip_tagged_fields(body, pos)
            wanted.append((name, parts))
        response, size = self._fetch_response(v, wanted, max_bytes)
        if size >= min_bytes or max_wait_ms <= 0:
            self.send(correlation_id, flexible, response)
            return
        self._park(v, wanted, max_bytes, max_wait_ms, correlation_id)

    def _park(
        self, v: int, wanted: list, max_bytes: int, max_wait_ms: int, correlation_id: int
    ) -> None:
        """Long poll: answer when any wanted partition gets data or max_wait_ms passes."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        partitions = [
            p
            for name, parts in wanted
            for i, _, _ in parts
            if (p := self.broker.partition(name, i))
        ]
        for p in partitions:
            p.waiters.add(waiter)
        timer = loop.call_later(
            max_wait_ms / 1000, lambda: waiter.done() or waiter.set_result(None)
        )
        self.parked = True

        def answer(_: asyncio.Future) -> None:
            timer.cancel()
            for p in partitions:
                p.waiters.discard(waiter)
            if self.transport.is_closing():
                return
            response, _size = self._fetch_response(v, wanted, max_bytes)
            self.send(correlation_id, v >= 12, response)
            self.parked = False
            self._run()

        waiter.add_done_callback(answer)

    def _fetch_response(self, v: int, wanted: list, max_bytes: int) -> tuple[list, int]:
        flexible = v >= 12
        head = bytearray(_I32.pack(0))
        if v >= 7:
            head += _I16.pack(0) + _I32.pack(0)  # error_code, session_id (sessionless)
        head += array_length(len(wanted), flexible)
        out: list = []
        total = 0
        for name, parts in wanted:
            head += string(name, flexible) + array_length(len(parts), flexible)
            for index, offset, partition_max in parts:
                partition = self.broker.partition(name, index)
                chunks: list = []
                if partition is None:
                    code, hw = ErrorCode.unknown_topic_or_partition.value, -1
                    size = 0
                else:
                    code, hw = 0, partition.log_end_offset
                    budget = min(partition_max, max_bytes - total)
                    size = partition.read(offset, budget, chunks) if budget > 0 or total == 0 else 0
                head += _I32.pack(index) + _I16.pack(code) + _I64.pack(hw) + _I64.pack(hw)
                if v >= 5:
                    head += _I64.pack(0)
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"  # aborted_transactions: null
                if v >= 11:
                    head += _I32.pack(-1)
                head += uvarint(size + 1) if flexible else _I32.pack(size)
                if chunks:
                    out.append(bytes(head))
                    out.extend(chunks)
                    head = bytearray()
                    total += size
                if flexible:
                    head += b"\x00"
            if flexible:
                head += b"\x00"
        if flexible:
            head += b"\x00"
        out.append(bytes(head))
        return out, total

    # -- control plane (kio)

    def _api_18(
        self, v: int, request: Any, error: ErrorCode = ErrorCode.none
    ) -> Any:  # ApiVersions
        module = response_module(API_VERSIONS, v)
        keys = tuple(
            module.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(SUPPORTED.items())
        )
        return _response(API_VERSIONS, v, error_code=error, api_keys=keys, throttle_time=0)

    def _api_3(self, v: int, request: Any) -> Any:  # Metadata
        broker = self.broker
        if request.topics is None:
            names = list(broker.topics)
        else:
            names = [t.name for t in request.topics]
        topics = []
        for name in names:
            if name not in broker.topics:
                if not getattr(request, "allow_auto_topic_creation", True):
                    topics.append(
                        _response(
                            METADATA,
                            v,
                            "MetadataResponseTopic",
                            error_code=3,
                            name=name,
                            topic_id=None,
                            is_internal=False,
                            partitions=(),
                            topic_authorized_operations=-2147483648,
                        )
                    )
                    continue
                broker.create_topic(name, broker.num_partitions)
            partitions = tuple(
                _response(
                    METADATA,
                    v,
                    "MetadataResponsePartition",
                    error_code=0,
                    partition_index=i,
                    leader_id=NODE_ID,
                    leader_epoch=0,
                    replica_nodes=(NODE_ID,),
                    isr_nodes=(NODE_ID,),
                    offline_replicas=(),
                )
                for i in range(len(broker.topics[name]))
            )
            topics.append(
                _response(
                    METADATA,
                    v,
                    "MetadataResponseTopic",
                    error_code=0,
                    name=name,
                    topic_id=broker.topic_ids[name],
                    is_internal=False,
                    partitions=partitions,
                    topic_authorized_operations=-2147483648,
                )
            )
        me = _response(
            METADATA,
            v,
            "MetadataResponseBroker",
            node_id=NODE_ID,
            host=broker.host,
            port=broker.port,
            rack=None,
        )
        return _response(
            METADATA,
            v,
            throttle_time=0,
            brokers=(me,),
            cluster_id=CLUSTER_ID,
            controller_id=NODE_ID,
            topics=tuple(topics),
            cluster_authorized_operations=-2147483648,
        )

    def _api_2(
        self, v: int, request: Any
    ) -> Any:  # ListOffsets: earliest is 0, anything else the end
        topics = []
        for topic in request.topics:
            parts = []
            for p in topic.partitions:
                partition = self.broker.partition(topic.name, p.partition_index)
                if partition is None:
                    code, offset = 3, -1
                else:
                    code, offset = 0, 0 if p.timestamp == -2 else partition.log_end_offset
                parts.append(
                    _response(
                        LIST_OFFSETS,
                        v,
                        "ListOffsetsPartitionResponse",
                        partition_index=p.partition_index,
                        error_code=code,
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=0,
                        old_style_offsets=(),
                    )
                )
            topics.append(
                _response(
                    LIST_OFFSETS,
                    v,
                    "ListOffsetsTopicResponse",
                    name=topic.name,
                    partitions=tuple(parts),
                )
            )
        return _response(LIST_OFFSETS, v, throttle_time=0, topics=tuple(topics))

    def _api_19(self, v: int, request: Any) -> Any:  # CreateTopics
        results = []
        for topic in request.topics:
            count = topic.num_partitions if topic.num_partitions > 0 else self.broker.num_partitions
            if topic.name in self.broker.topics:
                code = ErrorCode.topic_already_exists
            else:
                code = ErrorCode.none
                if not request.validate_only:
                    self.broker.create_topic(topic.name, count)
            results.append(
                _response(
                    CREATE_TOPICS,
                    v,
                    "CreatableTopicResult",
                    name=topic.name,
                    topic_id=self.broker.topic_ids.get(topic.name),
                    error_code=code,
                    error_message=None,
                    topic_config_error_code=0,
                    num_partitions=count,
                    replication_factor=1,
                    configs=(),
                )
            )
        return _response(CREATE_TOPICS, v, throttle_time=0, topics=tuple(results))

    def _api_10(self, v: int, request: Any) -> Any:  # FindCoordinator: always this broker
        host, port = self.broker.host, self.broker.port
        coordinators = tuple(
            _response(
                FIND_COORDINATOR,
                v,
                "Coordinator",
                key=k,
                node_id=NODE_ID,
                host=host,
                port=port,
                error_code=0,
                error_message=None,
            )
            for k in (request.coordinator_keys if v >= 4 else ())
        )
        return _response(
            FIND_COORDINATOR,
            v,
            throttle_time=0,
            error_code=0,
            error_message=None,
            node_id=NODE_ID,
            host=host,
            port=port,
            coordinators=coordinators,
        )

    def _api_22(self, v: int, request: Any) -> Any:  # InitProducerId
        self.broker.next_producer_id += 1
        return _response(
            INIT_PRODUCER_ID,
            v,
            throttle_time=0,
            error_code=0,
            producer_id=self.broker.next_producer_id,
            producer_epoch=0,
        )


async def serve(host: str, port: int, num_partitions: int, retain_bytes: int) -> None:
    loop = asyncio.get_running_loop()
    broker = NullBroker(host, port, num_partitions, retain_bytes)
    server = await loop.create_server(lambda: Connection(broker), host, port, backlog=1024)
    broker.port = server.sockets[0].getsockname()[1]
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"{READY} bootstrap_servers={host}:{broker.port}", flush=True)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--num-partitions", type=int, default=1, help="partitions of auto-created topics"
    )
    parser.add_argument(
        "--retain-bytes", type=int, default=16 << 20, help="batch bytes kept per partition"
    )
    args = parser.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.host, args.port, args.num_partitions, args.retain_bytes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
