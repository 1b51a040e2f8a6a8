"""One local[2] SparkSession for the Spark tests, and helpers to make topics on a real broker.

Spark runs on a JVM. Where none is found (as spark-class looks: $JAVA_HOME/bin/java, else
`java` on the PATH), pyspark cannot be imported, or the JVM does not start, every test here is
skipped with that reason instead of erroring one by one; on a machine with Java they all run.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker


def _spark_unavailable() -> str | None:
    """Why Spark cannot run on this machine, or None."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"$JAVA_HOME/bin/java ({java_home})" if java_home else "java on the PATH"
        return f"Spark needs a JVM and no {where} was found"
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        return f"pyspark cannot be imported: {exc}"
    return None


@pytest.fixture(scope="session", autouse=True)
def spark_available() -> None:
    """Skips every test of this directory, with the reason, where Spark cannot run."""
    reason = _spark_unavailable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    # Python workers must run this interpreter, which can import pyspark_odradek.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    try:
        session = _session(SparkSession)
    except PySparkRuntimeError as exc:  # JAVA_GATEWAY_EXITED: the JVM did not start
        pytest.skip(f"the JVM for Spark did not start: {exc}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _session(SparkSession):
    return (
        SparkSession.builder.master("local[2]")
        .appName("odradek-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.minBatchesToRetain", "10")
        # Tests read micro-batch sizes from recentProgress, idle triggers included.
        .config("spark.sql.streaming.numRecentProgressUpdates", "1000")
        .getOrCreate()
    )


#: The exactly-once sink is KIP-939's external coordinator: the broker must allow two-phase commit.
SPARK_BROKER_CONFIG = {"transaction.two.phase.commit.enable": "true"}


@pytest.fixture(scope="session")
def bootstrap() -> Iterator[str]:
    """Odradek's broker, or any Kafka-compatible one named by ODRADEK_SPARK_TEST_BOOTSTRAP_SERVERS."""
    external = os.environ.get("ODRADEK_SPARK_TEST_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    with EmbeddedBroker(config=SPARK_BROKER_CONFIG) as broker:
        yield broker.bootstrap_servers


@pytest.fixture
def new_topic(bootstrap):
    """Create a fresh topic: new_topic(partitions=1) -> name."""

    admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(partitions: int = 1, prefix: str = "spark") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        # The tests' records carry 2023 timestamps: with Kafka's default retention.ms of
        # 7 days, every batch rolls a segment (segment.ms counts from the first record's
        # timestamp) and the next retention check deletes them, as Apache Kafka would.
        topic = NewTopic(name, partitions, 1, config={"retention.ms": "-1"})
        admin.create_topics([topic])[name].result(timeout=30)
        return name

    return create


@pytest.fixture
def produce(bootstrap):
    """produce(topic, records): records are dicts of Producer.produce() keyword arguments."""
    return lambda topic, records: _produce(bootstrap, topic, records)


@pytest.fixture
def consume_all(bootstrap):
    """consume_all(topic, partitions, expected) -> every record, read by a plain consumer."""
    return lambda topic, partitions, expected: _consume_all(bootstrap, topic, partitions, expected)


def _produce(bootstrap: str, topic: str, records: list[dict]) -> None:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    for record in records:
        producer.produce(topic, **record)
        # One batch per record: some Kafka-compatible brokers report the end offset of a
        # multi-record batch wrongly; one record per batch keeps every broker honest here.
        assert producer.flush(30) == 0


def _consume_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records, eof = [], set()
    deadline = time.monotonic() + 30
    try:
        while len(records) < expected or len(eof) < partitions:
            assert time.monotonic() < deadline, (
                f"timed out with {len(records)} of {expected} records"
            )
            # consume() waits for its whole count or its timeout: short waits, many of them.
            batch = consumer.consume(1000, timeout=0.2)
            for message in batch:
                if message.error() is None:
                    records.append(message)
                else:
                    eof.add(message.partition())
    finally:
        consumer.close()
    return records
