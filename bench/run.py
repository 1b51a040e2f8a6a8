"""`make bench`: Odradek against the null broker, alternately, several rounds, medians.

Every figure is a ratio against the null broker measured in the same run (on a
shared machine absolute times drift). Each round starts each broker fresh with an
empty data dir and runs, through `odradek perf` in a subprocess:

- the LinkedIn workload: 1,000,000 records of 100 bytes, 6 partitions, acks=1 and acks=all;
- consuming the acks=1 topic;
- 1 KB and 64 KB records (MB/s);
- end-to-end latency at 10,000 records/s;
- start to ready with an empty data dir, and after a restart with 1,000 partitions on disk;
- metadata for 10,000 partitions, and producing round-robin across 1,000 partitions.

A second table puts TLS and SASL beside plaintext: one Odradek broker with a PLAINTEXT, an
SSL (certificates made with openssl) and a SASL_PLAINTEXT (PLAIN) listener, producing and
consuming 100 B and 64 KB records through each; the ratios are over plaintext. SASL
authenticates once per connection, so its ratio is what authentication costs per request
afterwards. Each round starts from another listener, so over three rounds each takes each
place once, and each topic is deleted once measured, with ``os.sync()`` before each
produce, so every side writes into page cache in the same state (bench/page_cache.py says
why that matters on these machines).

It prints the tables with the machine's description and writes it to docs/benchmarks.md.

    .venv/bin/python bench/run.py [--rounds 3] [--quick] [--start-only|--tls-only]
                                  [--throughput] [--metrics] [--output docs/benchmarks.md]

``--quick`` divides the record and partition counts by 10 for a smoke run. ``--start-only``
runs only the start-to-ready rows (and the produce that fills the 1,000 partitions), cheap
enough for many rounds on a loaded machine; it writes no file unless ``--output`` says so.
``--tls-only`` runs only the TLS table (and, like ``--start-only``, writes no file by default).
``--throughput`` runs only the produce 100 B (acks=1 and acks=all) and consume rows.
``--metrics`` adds a third broker to each round, Odradek serving /metrics
(metrics.http.listener) and scraped every second while it works, so the table shows
what keeping and serving the metrics costs next to the same broker without them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka.admin import AdminClient
from page_cache import DELETE_AT_ONCE, drop_topic

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
READY = re.compile(r"ready bootstrap_servers=(\S+)")
METRICS_URL = re.compile(r" metrics=(\S+)")
#: The broker variants a round may start: the reference, Odradek, Odradek serving /metrics.
ODRADEK_WITH_METRICS = "odradek-metrics"
#: Seconds between scrapes of the metrics broker (Prometheus' default is 15 s or 1 min).
SCRAPE_INTERVAL_S = 1.0


def variant_configs(name: str) -> dict[str, str]:
    """The broker configs of a round's broker variant: the metrics one serves /metrics."""
    return {"metrics.http.listener": "127.0.0.1:0"} if name == ODRADEK_WITH_METRICS else {}


@dataclass
class Broker:
    """A broker process (Odradek or the null broker) started from the command line."""

    name: str
    data_dir: Path | None
    process: subprocess.Popen | None = None
    bootstrap: str = ""
    lines: list[str] = field(default_factory=list)
    #: More ``-o key=value`` broker configs (Odradek only).
    configs: dict[str, str] = field(default_factory=dict)
    #: Listener name -> advertised host:port, from the ready line.
    listeners: dict[str, str] = field(default_factory=dict)

    def command(self) -> list[str]:
        if self.name == "null":
            return [PY, str(ROOT / "bench" / "null_broker.py"), "--num-partitions", "6"]
        port = self.bootstrap.rsplit(":", 1)[1] if self.bootstrap else "0"
        return [
            PY,
            "-m",
            "odradek",
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--host",
            "127.0.0.1",
            "--port",
            port,
            "-o",
            "num.partitions=6",
            *(arg for key, value in self.configs.items() for arg in ("-o", f"{key}={value}")),
        ]

    def start(self, timeout: float = 120.0) -> float:
        """Start and wait for the ready line; returns seconds from spawn to ready."""
        started = time.perf_counter()
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        found = threading.Event()
        ready_at: list[float] = []

        def read(stream, is_stdout: bool) -> None:
            for line in stream:
                self.lines.append(line)
                match = READY.search(line) if is_stdout else None
                if match and not ready_at:
                    ready_at.append(time.perf_counter())
                    self.bootstrap = match.group(1)
                    listeners = re.search(r" listeners=(\S+)", line)
                    for uri in listeners.group(1).split(",") if listeners else ():
                        name, _, address = uri.partition("://")
                        self.listeners[name] = address
                    metrics = METRICS_URL.search(line)
                    if metrics:
                        self._scrape_until_stopped(metrics.group(1))
                    found.set()
            found.set()

        threading.Thread(target=read, args=(self.process.stdout, True), daemon=True).start()
        threading.Thread(target=read, args=(self.process.stderr, False), daemon=True).start()
        if not found.wait(timeout) or not ready_at:
            self.stop()
            raise RuntimeError(f"{self.name} did not start:\n{''.join(self.lines[-20:])}")
        return ready_at[0] - started

    def _scrape_until_stopped(self, url: str) -> None:
        """Scrape /metrics every SCRAPE_INTERVAL_S in a thread while the process runs."""
        process = self.process

        def scrape() -> None:
            while process.poll() is None:
                try:
                    with urllib.request.urlopen(url, timeout=30) as response:
                        response.read()
                except OSError:
                    pass  # stopping
                time.sleep(SCRAPE_INTERVAL_S)

        threading.Thread(target=scrape, daemon=True).start()

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@dataclass(frozen=True)
class Scale:
    records_100b: int
    records_1kb: int
    records_64kb: int
    records_e2e: int
    metadata_partitions: int
    spread_partitions: int
    records_spread: int


FULL = Scale(1_000_000, 200_000, 4_000, 50_000, 10_000, 1_000, 200_000)
QUICK = Scale(100_000, 20_000, 400, 5_000, 1_000, 100, 20_000)


def perf(
    broker: Broker, test: str, *args: str, timeout: float = 600, listener: str | None = None
) -> dict:
    """One `odradek perf` run against ``broker`` (through ``listener``, else its first one); its
    JSON summary ({"failed": reason} on failure)."""
    bootstrap = broker.listeners[listener] if listener else broker.bootstrap
    cmd = [PY, "-m", "odradek", "perf", test, "--bootstrap-server", bootstrap, "--json", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"failed": "timeout"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"failed": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    result = json.loads(lines[-1])
    if done.returncode != 0:
        result["failed"] = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return result


def create_topic(broker: Broker, name: str, partitions: int) -> float:
    """Seconds for CreateTopics of ``partitions`` partitions to complete."""
    from confluent_kafka.admin import AdminClient, NewTopic

    # A long request timeout: creating thousands of partitions may take the broker minutes, and
    # that figure is the measurement rather than a failure.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": "300000"})
    start = time.perf_counter()
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=600)[name].result(600)
    return time.perf_counter() - start


def metadata_ms(broker: Broker, repeats: int = 5) -> float:
    """Median milliseconds of a full Metadata request (all topics) through librdkafka."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.list_topics(timeout=60)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        admin.list_topics(timeout=60)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def one_round(
    name: str,
    scale: Scale,
    r: int,
    work: Path,
    start_only: bool = False,
    throughput_only: bool = False,
) -> dict[str, float | None]:
    """All workloads (``start_only``: the start-to-ready ones; ``throughput_only``: produce and
    consume 100 B) against one fresh broker; metric name -> value (None when it failed)."""
    out: dict[str, float | None] = {}

    def record(key: str, result: dict, field_name: str) -> None:
        if "failed" in result:
            print(f"  {name} {key}: FAILED {result['failed']}", file=sys.stderr)
            out[key] = None
        else:
            out[key] = result[field_name]

    data = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=work))
    broker = Broker(name, data, configs=variant_configs(name))
    out["start_empty_s"] = broker.start()
    try:
        if throughput_only:
            throughput(broker, scale, r, record)
        elif not start_only:
            workloads(broker, scale, r, record, out)
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    if throughput_only:
        return out

    # A second broker with only the spread topic on disk, restarted to time recovery of its partitions.
    data = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=work))
    broker = Broker(name, data, configs=variant_configs(name))
    broker.start()
    try:
        try:
            create_topic(broker, "spread", scale.spread_partitions)
        except Exception as e:
            print(f"  {name} create spread: FAILED {e}", file=sys.stderr)
        res = perf(
            broker,
            "produce",
            "--topic",
            "spread",
            "--round-robin",
            "--records",
            str(scale.records_spread),
            "--record-size",
            "100",
        )
        record("produce_spread_rps", res, "records_per_s")
        broker.stop()
        out["start_spread_s"] = broker.start()
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    return out


def throughput(
    broker: Broker, scale: Scale, r: int, record: Callable[[str, dict, str], None]
) -> None:
    """The LinkedIn workload: produce 100 B records with acks=1 and acks=all, consume them."""
    for acks in ("1", "all"):
        res = perf(
            broker,
            "produce",
            "--topic",
            f"lb-{acks}-{r}",
            "--partitions",
            "6",
            "--acks",
            acks,
            "--records",
            str(scale.records_100b),
            "--record-size",
            "100",
        )
        record(f"produce_100b_acks{acks}_rps", res, "records_per_s")
    res = perf(broker, "consume", "--topic", f"lb-1-{r}", "--records", str(scale.records_100b))
    record("consume_100b_rps", res, "records_per_s")


def workloads(
    broker: Broker,
    scale: Scale,
    r: int,
    record: Callable[[str, dict, str], None],
    out: dict[str, float | None],
) -> None:
    """The throughput, latency and metadata workloads of a round, against a running broker."""
    throughput(broker, scale, r, record)
    for size, count, label in (
        (1024, scale.records_1kb, "1kb"),
        (65536, scale.records_64kb, "64kb"),
    ):
        res = perf(
            broker,
            "produce",
            "--topic",
            f"size-{label}-{r}",
            "--partitions",
            "6",
            "--records",
            str(count),
            "--record-size",
            str(size),
        )
        record(f"produce_{label}_mbps", res, "mb_per_s")
    res = perf(
        broker,
        "e2e",
        "--topic",
        f"e2e-{r}",
        "--partitions",
        "1",
        "--throughput",
        "10000",
        "--records",
        str(scale.records_e2e),
    )
    for q in ("p50", "p99", "p99.9"):
        record(f"e2e_{q}_ms", res, f"{q}_ms")
    try:
        out["create_wide_s"] = create_topic(broker, f"wide-{r}", scale.metadata_partitions)
        out["metadata_wide_ms"] = metadata_ms(broker)
    except Exception as e:
        print(f"  {broker.name} metadata: FAILED {e}", file=sys.stderr)
        out["create_wide_s"] = out["metadata_wide_ms"] = None


#: metric -> (label, unit, higher is better, goal as text, goal check on (odradek, ratio)).
METRICS = {
    "produce_100b_acks1_rps": (
        "Produce 100 B, 6 partitions, acks=1",
        "records/s",
        True,
        "ratio >= 0.9",
        lambda v, r: r >= 0.9,
    ),
    "produce_100b_acksall_rps": (
        "Produce 100 B, 6 partitions, acks=all",
        "records/s",
        True,
        "",
        None,
    ),
    "consume_100b_rps": (
        "Consume 100 B, 6 partitions",
        "records/s",
        True,
        "ratio >= 0.9",
        lambda v, r: r >= 0.9,
    ),
    "produce_1kb_mbps": ("Produce 1 KB records", "MB/s", True, "", None),
    "produce_64kb_mbps": (
        "Produce 64 KB records",
        "MB/s",
        True,
        "ratio >= 0.8",
        lambda v, r: r >= 0.8,
    ),
    "e2e_p50_ms": ("End-to-end at 10,000 records/s, p50", "ms", False, "", None),
    "e2e_p99_ms": (
        "End-to-end at 10,000 records/s, p99",
        "ms",
        False,
        "<= 5 ms",
        lambda v, r: v <= 5,
    ),
    "e2e_p99.9_ms": ("End-to-end at 10,000 records/s, p99.9", "ms", False, "", None),
    "start_empty_s": (
        "Start to ready, empty data dir",
        "s",
        False,
        "<= 0.5 s",
        lambda v, r: v <= 0.5,
    ),
    "start_spread_s": (
        "Start to ready, {spread} partitions on disk",
        "s",
        False,
        "<= 2 s",
        lambda v, r: v <= 2,
    ),
    "create_wide_s": ("CreateTopics, {wide} partitions", "s", False, "", None),
    "metadata_wide_ms": ("Metadata (all topics), {wide} partitions", "ms", False, "", None),
    "produce_spread_rps": (
        "Produce 100 B round-robin over {spread} partitions",
        "records/s",
        True,
        "",
        None,
    ),
}


def machine() -> str:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import confluent_kafka

    return (
        f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, librdkafka {confluent_kafka.libversion()[0]}"
    )


def median(values: list[float | None]) -> float | None:
    good = [v for v in values if v is not None]
    return statistics.median(good) if good else None


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "failed"
    if unit in ("records/s",):
        return f"{value:,.0f}"
    if unit == "MB/s":
        return f"{value:,.1f}"
    return f"{value:.3f}" if unit == "s" else f"{value:.2f}"


def table(results: dict[str, list[dict]], scale: Scale) -> str:
    """The markdown table; with an ``odradek-metrics`` broker, two more columns for it."""
    with_metrics = ODRADEK_WITH_METRICS in results
    extra_head = " Odradek, metrics on | Metrics on ÷ null |" if with_metrics else ""
    rows = [
        f"| Workload | Unit | Odradek |{extra_head} Null broker | Odradek ÷ null | Goal | Met |",
        "|---|---|---:|" + ("---:|---:|" if with_metrics else "") + "---:|---:|---|---|",
    ]
    for key, (label, unit, _higher, goal, check) in METRICS.items():
        if not any(key in r for rounds in results.values() for r in rounds):
            continue  # not run (--start-only)
        ours = median([r.get(key) for r in results["odradek"]])
        ref = median([r.get(key) for r in results["null"]])
        ratio = ours / ref if ours is not None and ref else None
        met = ""
        if check is not None:
            met = "?" if ours is None or ratio is None else ("yes" if check(ours, ratio) else "no")
        label = label.format(
            spread=f"{scale.spread_partitions:,}", wide=f"{scale.metadata_partitions:,}"
        )
        extra = ""
        if with_metrics:
            on = median([r.get(key) for r in results[ODRADEK_WITH_METRICS]])
            on_ratio = on / ref if on is not None and ref else None
            extra = f" {fmt(on, unit)} | {'' if on_ratio is None else f'{on_ratio:.2f}'} |"
        rows.append(
            f"| {label} | {unit} | {fmt(ours, unit)} |{extra} {fmt(ref, unit)} | "
            f"{'' if ratio is None else f'{ratio:.2f}'} | {goal} | {met} |"
        )
    return "\n".join(rows)


#: metric -> (label, unit) of the TLS table; each is measured through both listeners.
TLS_METRICS = {
    "produce_100b_rps": ("Produce 100 B records, acks=1", "records/s"),
    "consume_100b_rps": ("Consume 100 B records", "records/s"),
    "produce_64kb_mbps": ("Produce 64 KB records, acks=1", "MB/s"),
    "consume_64kb_mbps": ("Consume 64 KB records", "MB/s"),
}


#: The one user of the SASL_PLAINTEXT listener of the TLS table's broker.
SASL_USER, SASL_PASSWORD = "bench", "bench-secret"


def tls_round(scale: Scale, r: int, work: Path, certificates) -> dict[str, float | None]:
    """Produce and consume 100 B and 64 KB records through a PLAINTEXT, an SSL and a
    SASL_PLAINTEXT listener of one broker; metric names are prefixed with the listener
    ("plaintext_", "tls_", "sasl_")."""
    out: dict[str, float | None] = {}
    data = Path(tempfile.mkdtemp(prefix="bench-tls-", dir=work))
    configs = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'user_{SASL_USER}="{SASL_PASSWORD}";'
        ),
    }
    broker = Broker("odradek", data, configs={**configs, **DELETE_AT_ONCE})
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.listeners["PLAINTEXT"]})
    client_tls = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={certificates.ca}"]
    client_sasl = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN"]
    client_sasl += ["-X", f"sasl.username={SASL_USER}", "-X", f"sasl.password={SASL_PASSWORD}"]
    sides = [
        ("plaintext", "PLAINTEXT", []),
        ("tls", "SSL", client_tls),
        ("sasl", "SASL_PLAINTEXT", client_sasl),
    ]
    first = r % len(sides)
    try:
        for prefix, listener, client in sides[first:] + sides[:first]:
            for size, count, label in (
                (100, scale.records_100b, "100b"),
                (65536, scale.records_64kb, "64kb"),
            ):
                topic = f"{prefix}-{label}-{r}"
                field_name = "records_per_s" if size == 100 else "mb_per_s"
                unit = "rps" if size == 100 else "mbps"
                os.sync()
                for test, extra in (
                    ("produce", ["--partitions", "6", "--record-size", str(size)]),
                    ("consume", []),
                ):
                    res = perf(
                        broker, test, "--topic", topic, "--records", str(count), *extra, *client,
                        listener=listener,
                    )  # fmt: skip
                    key = f"{prefix}_{test}_{label}_{unit}"
                    if "failed" in res:
                        print(f"  TLS bench {key}: FAILED {res['failed']}", file=sys.stderr)
                    out[key] = res.get(field_name) if "failed" not in res else None
                drop_topic(admin, topic, data)
    finally:
        broker.stop()
        shutil.rmtree(data, ignore_errors=True)
    return out


def tls_table(rounds: list[dict[str, float | None]]) -> str:
    rows = [
        "| Workload | Unit | Plaintext | TLS | TLS ÷ plaintext | Goal | Met "
        "| SASL PLAIN | SASL ÷ plaintext |",
        "|---|---|---:|---:|---:|---|---|---:|---:|",
    ]
    for key, (label, unit) in TLS_METRICS.items():
        plain = median([r.get(f"plaintext_{key}") for r in rounds])
        tls = median([r.get(f"tls_{key}") for r in rounds])
        sasl = median([r.get(f"sasl_{key}") for r in rounds])
        ratio = tls / plain if tls is not None and plain else None
        sasl_ratio = sasl / plain if sasl is not None and plain else None
        met = "?" if ratio is None else ("yes" if ratio >= 0.6 else "no")
        rows.append(
            f"| {label} | {unit} | {fmt(plain, unit)} | {fmt(tls, unit)} | "
            f"{'' if ratio is None else f'{ratio:.2f}'} | TLS ≥ 0.6 of plaintext | {met} | "
            f"{fmt(sasl, unit)} | {'' if sasl_ratio is None else f'{sasl_ratio:.2f}'} |"
        )
    return "\n".join(rows)


def precompile() -> None:
    """Byte-compile the packages the brokers import, so that the first start of a fresh
    checkout times starting, not compiling every module."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("odradek")
    for location in [*(spec.submodule_search_locations or []), str(ROOT / "bench")] if spec else []:
        compileall.compile_dir(location, quiet=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="rounds, each running both brokers; medians are reported (default 3)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the records and partitions"
    )
    parser.add_argument(
        "--start-only",
        action="store_true",
        help="only the start-to-ready rows (and the produce that fills the spread topic)",
    )
    parser.add_argument(
        "--tls-only", action="store_true", help="only the TLS beside plaintext table"
    )
    parser.add_argument(
        "--throughput",
        action="store_true",
        help="only the produce 100 B (acks=1, acks=all) and consume rows",
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="also run Odradek serving /metrics, scraped every second, as a third broker",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="markdown file to write ('-' for none; default docs/benchmarks.md, "
        "none with --start-only)",
    )
    args = parser.parse_args(argv)
    if args.output is None:
        partial = args.start_only or args.tls_only or args.throughput or args.metrics
        args.output = Path("-") if partial else ROOT / "docs" / "benchmarks.md"
    scale = QUICK if args.quick else FULL
    precompile()
    load_before = os.getloadavg()
    names = ["odradek", *([ODRADEK_WITH_METRICS] if args.metrics else []), "null"]
    results: dict[str, list[dict]] = {name: [] for name in names}
    tls_rounds: list[dict[str, float | None]] = []
    with tempfile.TemporaryDirectory(prefix="odradek-bench-") as tmp:
        for r in range(args.rounds if not args.tls_only else 0):
            order = names[r % len(names) :] + names[: r % len(names)]  # each goes first in turn
            for name in order:
                print(f"round {r + 1}/{args.rounds}: {name}", file=sys.stderr, flush=True)
                results[name].append(
                    one_round(name, scale, r, Path(tmp), args.start_only, args.throughput)
                )
        if not (args.start_only or args.throughput or args.metrics):
            from odradek.testing.certificates import make_certificates

            certificates = make_certificates(Path(tempfile.mkdtemp(dir=tmp)))
            for r in range(args.rounds):
                print(f"round {r + 1}/{args.rounds}: TLS", file=sys.stderr, flush=True)
                tls_rounds.append(tls_round(scale, r, Path(tmp), certificates))
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = "" if args.tls_only else table(results, scale)
    if tls_rounds:
        text += (
            "\n\n" if text else ""
        ) + "TLS and SASL beside plaintext (one broker, three listeners):\n\n"
        text += tls_table(tls_rounds)
    load_after = os.getloadavg()
    flags = "".join(
        f" --{flag}"
        for flag in ("quick", "start-only", "tls-only", "throughput", "metrics")
        if getattr(args, flag.replace("-", "_"))
    )
    header = (
        f"Machine: {machine()}\n\nMeasured {when}: `bench/run.py{flags} "
        f"--rounds {args.rounds}`, medians of {args.rounds} rounds, brokers alternating. "
        f"Load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in load_before)} at the start, "
        f"{', '.join(f'{x:.2f}' for x in load_after)} at the end."
    )
    print(header + "\n\n" + text)
    if str(args.output) != "-":
        write_doc(args.output, DOC.format(header=header, table=text))
    return 0


#: Everything after this line in the output file is kept when the table is rewritten (profiles, analysis).
KEEP_MARKER = "<!-- written by hand below: bench/run.py keeps it -->"


def write_doc(path: Path, generated: str) -> None:
    """Write the generated part, keeping the hand-written part of an existing file."""
    kept = ""
    if path.exists():
        _, marker, rest = path.read_text().partition(KEEP_MARKER)
        kept = marker + rest if marker else ""
    path.write_text(generated + ("\n" + kept if kept else ""))


DOC = """# Benchmarks

Odradek against the null broker (bench/null_broker.py: a Kafka-protocol server that
acknowledges Produce without storing and answers Fetch from memory), both driven by
librdkafka through `odradek perf`, in the same run, several rounds each with the
brokers alternating, medians reported. The ratio is Odradek's figure divided by the
null broker's: it says how much of what the client and the machine can do at all
Odradek delivers. Run `make bench` (or `.venv/bin/python bench/run.py --quick`
for a smoke run) to reproduce; absolute figures depend on the machine, ratios much less.

{header}

{table}

Notes: producers use librdkafka defaults (linger.ms 5, batch.size 1,000,000) unless the
workload says otherwise; consumers set fetch.queue.backoff.ms=1 so that librdkafka's
local-queue backoff does not set the pace. End-to-end latency uses linger.ms 0 and one
partition, paced by Kafka's ThroughputThrottler (the records due in each 2 ms step are sent
back to back); each record carries its send time, latency runs from produce() to the
consumer's poll(), and the consumer runs in a process of its own (sharing the producer's
process and GIL added tens of milliseconds to the tail for either broker). The null broker
keeps no data on disk, so its start-to-ready figures are the floor of a Python process that
imports kio and listens. On a shared machine the load average above matters more than any
code change: the latency tail in particular measures how often the broker process waits
for a CPU.
"""


if __name__ == "__main__":
    raise SystemExit(main())
