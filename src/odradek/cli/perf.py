"""``odradek perf produce|consume|e2e``: Kafka's producer-perf-test, consumer-perf-test and
end-to-end latency tool, on librdkafka (confluent-kafka), for any Kafka-compatible broker.

produce: N records of S bytes (random uppercase letters, as Kafka's tool, so that
compression means something) from one or more producer processes, optionally
capped at a total records/s; latency is produce() to delivery report, sampled.
consume: reads N records from the start of every partition of a topic.
e2e: one producer at a fixed average rate and one consumer in a separate process; latency
is the producer's produce() call to the consumer's poll() returning the record, each record
carrying its send time (both ends read the machine's monotonic clock). As in Kafka's tools,
the rate is kept by Kafka's ThroughputThrottler (the records due in each 2 ms step go out
back to back, linger.ms 0); the consumer keeps librdkafka's fetch settings (a fetch waits
in the broker until an append wakes it). ``--latency-log`` writes every timed record.

Every command prints one human-readable line, or with ``--json`` one JSON object
(what bench/run.py reads). ``--json FILE`` writes the summary and the latency
distribution to FILE instead, ``--plot FILE.png`` draws the distribution, and on a
terminal a progress line runs meanwhile (``--quiet``: none); see cli/perf_report.py.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import queue
import random
import string
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odradek.cli.client_options import add_connection_args, client_config
from odradek.cli.errors import ToolError
from odradek.cli.perf_report import Progress, percentile, write_json, write_plot

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.synchronize import Event

#: Latency samples to aim for; every k-th record is timed so the client's own cost stays small.
TARGET_SAMPLES = 100_000
_STAMP = struct.Struct(">q")


@dataclass
class Result:
    records: int
    bytes: int
    seconds: float
    errors: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "records": self.records,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 6),
            "records_per_s": round(self.records / self.seconds, 1) if self.seconds > 0 else 0.0,
            "mb_per_s": round(self.bytes / self.seconds / 1e6, 3) if self.seconds > 0 else 0.0,
            "errors": self.errors,
        }
        if self.latencies_ms:
            ordered = sorted(self.latencies_ms)
            for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("p99.9", 0.999)):
                out[f"{name}_ms"] = round(percentile(ordered, q), 3)
            out["max_ms"] = round(ordered[-1], 3)
            out["latency_samples"] = len(ordered)
        return out


def register(subparsers: argparse._SubParsersAction) -> None:
    perf = subparsers.add_parser(
        "perf", help="producer, consumer and end-to-end latency benchmarks"
    )
    commands = perf.add_subparsers(dest="perf_command", required=True, metavar="TEST")
    for name, help_text, func in (
        ("produce", "producer throughput and latency", run_produce),
        ("consume", "consumer throughput", run_consume),
        ("e2e", "end-to-end latency at a fixed rate", run_e2e),
    ):
        p = commands.add_parser(name, help=help_text)
        add_connection_args(p)
        p.add_argument("--topic", required=True, help="topic to write or read")
        p.add_argument(
            "--records", type=int, default=1_000_000, help="number of records (default 1,000,000)"
        )
        p.add_argument(
            "--json",
            nargs="?",
            const="-",
            metavar="FILE",
            help="alone: print one JSON object instead of a line of text; with FILE: also write "
            "the summary and the latency distribution there as JSON",
        )
        p.add_argument(
            "--quiet", action="store_true", help="no progress line (drawn only on a terminal)"
        )
        p.add_argument(
            "--timeout", type=float, default=300.0, help="give up after this many seconds"
        )
        if name != "consume":
            p.add_argument(
                "--record-size", type=int, default=100, help="value bytes per record (default 100)"
            )
            p.add_argument(
                "--acks",
                default="1",
                choices=("0", "1", "all", "-1"),
                help="the producer's acks",
            )
            p.add_argument(
                "--partitions",
                type=int,
                default=1,
                help="partitions of the topic if it must be created (default 1)",
            )
            p.add_argument(
                "--compression",
                default="none",
                choices=("none", "gzip", "snappy", "lz4", "zstd"),
                help="the producer's compression.type",
            )
            p.add_argument(
                "--batch-size", type=int, help="batch.size in bytes (librdkafka default otherwise)"
            )
            p.add_argument(
                "--linger-ms",
                type=float,
                help="linger.ms (librdkafka default 5 for produce, 0 for e2e)",
            )
        if name != "consume":
            p.add_argument(
                "--plot",
                type=Path,
                metavar="FILE.png",
                help="draw the latency distribution (histogram and percentiles) as a PNG",
            )
        if name == "produce":
            p.add_argument(
                "--producers", type=int, default=1, help="producer processes (default 1)"
            )
            p.add_argument(
                "--throughput",
                type=float,
                default=-1,
                help="cap on total records/s; -1 for none (default)",
            )
            p.add_argument(
                "--round-robin",
                action="store_true",
                help="spread records over all partitions in turn instead of the sticky partitioner",
            )
        if name == "e2e":
            p.add_argument(
                "--throughput", type=float, default=10_000, help="records/s (default 10,000)"
            )
            p.add_argument(
                "--warmup-records",
                type=int,
                default=-1,
                help="records left out of the latencies (default a tenth, at most 1,000)",
            )
            p.add_argument(
                "--latency-log",
                type=Path,
                metavar="FILE",
                help="write every timed record as CSV: offset, send time (CLOCK_MONOTONIC ns) "
                "and latency (us), to line the tail up with what the broker did meanwhile",
            )
        p.set_defaults(func=func)


# ---------------------------------------------------------------- helpers


def payload(size: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode()


def producer_config(args: argparse.Namespace, default_linger_ms: float) -> dict[str, str]:
    config = {
        "acks": "-1" if args.acks == "all" else args.acks,
        "compression.type": args.compression,
        "linger.ms": str(args.linger_ms if args.linger_ms is not None else default_linger_ms),
        "queue.buffering.max.messages": "1000000",
    }
    if args.batch_size is not None:
        config["batch.size"] = str(args.batch_size)
    config.update(client_config(args))
    return config


def ensure_topic(args: argparse.Namespace) -> int:
    """Create the topic with ``--partitions`` if it does not exist; returns its partition count."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    from odradek.cli.broker_calls import admin_client, error_text

    admin, watch = admin_client(args)
    existing = watch.metadata(admin).topics.get(args.topic)
    if existing is not None and not existing.error:
        return len(existing.partitions)
    future = admin.create_topics([NewTopic(args.topic, args.partitions, 1)], operation_timeout=30)[
        args.topic
    ]
    watch.wait(admin, future, f"creating topic {args.topic}", timeout=60)
    try:
        future.result()
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ToolError(f"creating topic {args.topic}: {error_text(e)}") from None
    return args.partitions


class Throttle:
    """Kafka's ThroughputThrottler: once the sender is ``MIN_SLEEP_S`` or more ahead of ``rate``
    records/s, sleep until it is on schedule; the records due meanwhile then go out back to back.

    Kafka sleeps in steps of at least 2 ms (MIN_SLEEP_NS) rather than before every record.
    A sleep per record (10,000 wake-ups a second at 10,000 records/s) cost the sending process
    0.43 of a core on a 2-core machine, and the librdkafka producer then sent every record in
    a request of its own: the broker being measured, and the client, competed for the CPUs.
    """

    MIN_SLEEP_S = 0.002

    def __init__(self, rate: float, start: float) -> None:
        self.rate = rate
        self.start = start

    def delay(self, sent: int, now: float) -> float:
        """Seconds to sleep before sending record number ``sent`` at ``now`` (perf_counter)."""
        if self.rate <= 0:
            return 0.0
        ahead = sent / self.rate - (now - self.start)
        return ahead if ahead >= self.MIN_SLEEP_S else 0.0

    def wait(self, sent: int) -> None:
        pause = self.delay(sent, time.perf_counter())
        if pause:
            time.sleep(pause)


def emit(args: argparse.Namespace, kind: str, result: Result) -> int:
    summary = {"test": kind, **result.summary()}
    if args.json not in (None, "-"):
        write_json(Path(args.json), summary, result.latencies_ms)
    if getattr(args, "plot", None) is not None:
        write_plot(args.plot, summary, result.latencies_ms)
    if args.json == "-":
        print(json.dumps(summary), flush=True)
    else:
        line = (
            f"{kind}: {summary['records']} records in {summary['seconds']:.3f} s, "
            f"{summary['records_per_s']:,.0f} records/s, {summary['mb_per_s']:.2f} MB/s"
        )
        if "p50_ms" in summary:
            line += (
                f", latency ms p50 {summary['p50_ms']} p95 {summary['p95_ms']} p99 {summary['p99_ms']} "
                f"p99.9 {summary['p99.9_ms']} max {summary['max_ms']}"
            )
        if summary["errors"]:
            line += f", {summary['errors']} errors"
        print(line, flush=True)
    return 1 if result.errors or result.records == 0 else 0


# ---------------------------------------------------------------- produce


def _produce_worker(
    config: dict[str, str],
    topic: str,
    records: int,
    size: int,
    rate: float,
    partitions: int,
    round_robin: bool,
    go: Event,
    results: Queue[tuple[float, float, int, list[float]]],
    seed: int,
    sent: Any,
) -> None:
    """One producer process: waits for ``go``, sends, flushes, reports (start, end, errors, latencies).

    ``sent[seed]`` (shared memory) tells the progress line how far it got, every 1,000 records.
    """
    from confluent_kafka import Producer

    producer = Producer(config)
    value = payload(size, seed)
    every = max(1, records // TARGET_SAMPLES)
    latencies: list[float] = []
    errors = [0]

    def timed(sent_at: float):
        def on_delivery(err, _msg) -> None:
            if err is not None:
                errors[0] += 1
            else:
                latencies.append((time.perf_counter() - sent_at) * 1000)

        return on_delivery

    producer.list_topics(topic, timeout=30)  # metadata and connections before the clock starts
    go.wait()
    start = time.perf_counter()
    throttle = Throttle(rate, start)
    produce, poll = producer.produce, producer.poll
    for i in range(records):
        kwargs: dict[str, Any] = {"partition": i % partitions} if round_robin else {}
        if i % every == 0:
            kwargs["on_delivery"] = timed(time.perf_counter())
        while True:
            try:
                produce(topic, value, **kwargs)
                break
            except BufferError:
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
            throttle.wait(i)
            sent[seed] = i
    left = producer.flush(300)
    sent[seed] = records
    end = time.perf_counter()
    results.put((start, end, errors[0] + left, latencies))


def run_produce(args: argparse.Namespace) -> int:
    partitions = ensure_topic(args)
    config = producer_config(args, default_linger_ms=5)
    n = max(1, args.producers)
    ctx = multiprocessing.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    sent = ctx.Array("q", n, lock=False)  # each producer writes its own slot
    share = [args.records // n + (1 if i < args.records % n else 0) for i in range(n)]
    rate = args.throughput / n if args.throughput > 0 else -1
    progress = Progress("produce", args.records, lambda: sum(sent), Progress.wanted(args.quiet))

    def worker_args(i: int) -> tuple[Any, ...]:
        """The arguments of producer ``i`` (in this process or its own)."""
        return (
            config,
            args.topic,
            share[i],
            args.record_size,
            rate,
            partitions,
            args.round_robin,
            go,
            results,
            i,
            sent,
        )

    if n == 1:
        # In-process: no spawn cost, and the figures are the same as Kafka's single-producer test.
        go.set()
        with progress:
            _produce_worker(*worker_args(0))
        reports = [results.get(timeout=args.timeout)]
    else:
        workers = [
            ctx.Process(
                target=_produce_worker,
                daemon=True,
                args=worker_args(i),
            )
            for i in range(n)
        ]
        for w in workers:
            w.start()
        with progress:
            go.set()
            reports = [results.get(timeout=args.timeout) for _ in workers]
        for w in workers:
            w.join(10)
    start = min(r[0] for r in reports)
    end = max(r[1] for r in reports)
    result = Result(
        args.records,
        args.records * args.record_size,
        end - start,
        sum(r[2] for r in reports),
        [x for r in reports for x in r[3]],
    )
    return emit(args, "produce", result)


# ---------------------------------------------------------------- consume


def consumer_config(args: argparse.Namespace) -> dict[str, str]:
    # librdkafka pauses a partition's fetching for fetch.queue.backoff.ms (1 s) whenever its
    # local queue holds queued.min.messages; that pause, not the broker, would set the pace.
    config = {
        "group.id": f"odradek-perf-{time.time_ns()}",
        "enable.auto.commit": "false",
        "enable.partition.eof": "false",
        "fetch.queue.backoff.ms": "1",
    }
    config.update(client_config(args))
    return config


def run_consume(args: argparse.Namespace) -> int:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    from odradek.cli.broker_calls import BrokerWatch

    watch = BrokerWatch(args.bootstrap_server)
    consumer = Consumer({**watch.client_config(), **consumer_config(args)})
    topic = watch.metadata(consumer, args.topic).topics[args.topic]
    if topic.error:
        print(f"odradek perf: topic {args.topic}: {topic.error}", file=sys.stderr)
        return 1
    consumer.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in topic.partitions])
    got = size = errors = 0
    start = time.perf_counter()
    deadline = start + args.timeout
    with Progress("consume", args.records, lambda: got, Progress.wanted(args.quiet)):
        while got < args.records and time.perf_counter() < deadline:
            for message in consumer.consume(10_000, 1.0):
                if message.error() is not None:
                    errors += 1
                    continue
                got += 1
                size += len(message.value() or b"")
    seconds = time.perf_counter() - start
    consumer.close()
    if got < args.records:
        errors += 1
        print(
            f"odradek perf: only {got} of {args.records} records arrived in {args.timeout} s",
            file=sys.stderr,
        )
    return emit(args, "consume", Result(got, size, seconds, errors))


# ---------------------------------------------------------------- end to end


def _e2e_consumer(
    config: dict[str, str],
    topic: str,
    partitions: int,
    records: int,
    warmup: int,
    timeout: float,
    keep_records: bool,
    ready: Event,
    results: Queue[tuple[int, int, list[float], list[tuple[int, int, int]]]],
) -> None:
    """The receiving end in its own process: assigns the partitions at their ends, signals ``ready``,
    then reports (records, errors, latencies in ms, timed records) once ``records`` arrived or
    ``timeout`` passed; with ``keep_records`` the timed records are (offset, send ns, latency ns)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(config)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    for tp in tps:
        tp.offset = consumer.get_watermark_offsets(tp, timeout=30)[1]
    consumer.assign(tps)
    ready.set()
    latencies: list[float] = []
    timed: list[tuple[int, int, int]] = []
    received = errors = 0
    deadline = time.monotonic() + timeout
    while received < records and time.monotonic() < deadline:
        message = consumer.poll(0.1)  # one at a time: consume(n) would wait to fill n
        if message is None:
            continue
        now = time.monotonic_ns()
        if message.error() is not None:
            errors += 1
            continue
        received += 1
        if received > warmup:
            value, offset = message.value(), message.offset()
            assert value is not None and offset is not None, "perf records carry their send time"
            sent = _STAMP.unpack_from(value)[0]
            latencies.append((now - sent) / 1e6)
            if keep_records:
                timed.append((offset, sent, now - sent))
    consumer.close()
    results.put((received, errors, latencies, timed))


def write_latency_log(path: Path, timed: list[tuple[int, int, int]]) -> None:
    with path.open("w") as out:
        out.write("offset,send_monotonic_ns,latency_us\n")
        out.writelines(f"{offset},{sent},{latency / 1000:.1f}\n" for offset, sent, latency in timed)


def run_e2e(args: argparse.Namespace) -> int:
    """Producer here, consumer in a process of its own, so that neither waits for the other's
    turn at the GIL (that wait, not the broker, dominated the tail when both were threads of
    one process). Each record carries its send time from CLOCK_MONOTONIC, which is one clock
    for every process of the machine."""
    from confluent_kafka import Producer

    partitions = ensure_topic(args)
    config = consumer_config(args)
    warmup = args.warmup_records if args.warmup_records >= 0 else min(1000, args.records // 10)
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    reader = ctx.Process(
        target=_e2e_consumer,
        daemon=True,
        args=(
            config,
            args.topic,
            partitions,
            args.records,
            warmup,
            args.timeout,
            args.latency_log is not None,
            ready,
            results,
        ),
    )
    reader.start()
    producer = Producer(producer_config(args, default_linger_ms=0))
    producer.list_topics(args.topic, timeout=30)
    if not ready.wait(60):
        print("odradek perf: the consumer process did not start", file=sys.stderr)
        reader.kill()
        return 1
    size = max(args.record_size, _STAMP.size)
    filler = payload(size - _STAMP.size)
    start = time.perf_counter()
    throttle = Throttle(args.throughput, start)
    sent = 0
    with Progress("e2e", args.records, lambda: sent, Progress.wanted(args.quiet)):
        for sent in range(args.records):
            throttle.wait(sent)
            while True:
                try:
                    producer.produce(args.topic, _STAMP.pack(time.monotonic_ns()) + filler)
                    break
                except BufferError:
                    producer.poll(0.001)
            producer.poll(0)
        producer.flush(args.timeout)
    try:
        received, errors, latencies, timed = results.get(timeout=args.timeout + 30)
    except queue.Empty:
        received, errors, latencies, timed = 0, 1, [], []
    seconds = time.perf_counter() - start
    reader.join(10)
    if args.latency_log is not None:
        write_latency_log(args.latency_log, timed)
    if received < args.records:
        errors += 1
        print(f"odradek perf: only {received} of {args.records} records arrived", file=sys.stderr)
    return emit(args, "e2e", Result(received, received * size, seconds, errors, latencies))
