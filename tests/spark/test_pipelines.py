"""Both ready pipelines, run end to end through `odradek pipeline ...`, one of them over
SASL_SSL configured by --command-config."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek import EmbeddedBroker
from odradek.cli.main import main
from odradek.network.sasl_plain import PLAIN_LOGIN_MODULE
from odradek.testing.certificates import Certificates, make_certificates

BASE_TS = 1_700_000_000_000


def test_parquet_materialiser_parses_json_into_dated_partitions(
    spark, bootstrap, new_topic, produce, tmp_path, capsys
):
    topics = [new_topic(), new_topic()]
    for n, topic in enumerate(topics):
        produce(
            topic,
            [
                {
                    "value": json.dumps({"user": f"u{i}", "amount": i}).encode(),
                    "timestamp": BASE_TS + n * 86_400_000,
                }
                for i in range(10)
            ],
        )
    out = tmp_path / "table"
    status = main(
        [
            "pipeline",
            "parquet",
            "--bootstrap-servers",
            bootstrap,
            "--topic",
            topics[0],
            "--topic",
            topics[1],
            "--output",
            str(out),
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--schema",
            "user string, amount int",
            "--available-now",
            "--progress-interval",
            "0.5",
        ]
    )
    assert status == 0
    assert "records/s" in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("date=")) == [
        "date=2023-11-14",
        "date=2023-11-15",
    ]
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.topic, r.user, r.amount) for r in rows) == sorted(
        (t, f"u{i}", i) for t in topics for i in range(10)
    )


def test_windowed_counts_pipeline_writes_counts_per_key(
    spark, bootstrap, new_topic, produce, consume_all, tmp_path
):
    source, sink = new_topic(), new_topic()
    keys = ["a", "b", "a", "c", "a", "b"]
    produce(
        source,
        [{"key": k.encode(), "value": b"x", "timestamp": BASE_TS + i} for i, k in enumerate(keys)],
    )
    status = main(
        [
            "pipeline",
            "aggregate",
            "--bootstrap-servers",
            bootstrap,
            "--source-topic",
            source,
            "--sink-topic",
            sink,
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--window",
            "1 minute",
            "--watermark",
            "1 minute",
            "--available-now",
            "--progress-interval",
            "0.5",
        ]
    )
    assert status == 0
    records = consume_all(sink, partitions=1, expected=3)
    latest = {}
    for message in records:
        value = json.loads(message.value())
        assert message.key() == value["key"].encode()
        latest[value["key"]] = value["count"]
    assert latest == {"a": 3, "b": 2, "c": 1}


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory) -> Iterator[tuple[EmbeddedBroker, Certificates]]:
    """PLAINTEXT for the test's own clients, SASL_SSL with PLAIN for the pipeline."""
    certificates = make_certificates(tmp_path_factory.mktemp("certificates"))
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f'{PLAIN_LOGIN_MODULE} required user_spark="spark-secret";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certificates.broker),
    }
    with EmbeddedBroker(config=config, log_level="DEBUG") as broker:
        yield broker, certificates


def test_a_pipeline_over_sasl_ssl_takes_command_config(spark, secured_broker, tmp_path):
    broker, certificates = secured_broker
    plaintext = broker.listeners["PLAINTEXT"]
    source, sink = f"secured-{uuid.uuid4().hex[:8]}", f"counts-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": plaintext})
    for future in admin.create_topics([NewTopic(source, 1), NewTopic(sink, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": plaintext})
    for i, key in enumerate(["a", "b", "a"]):
        producer.produce(source, b"x", key.encode(), timestamp=BASE_TS + i)
    assert producer.flush(30) == 0
    client_properties = tmp_path / "client.properties"
    client_properties.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.truststore.location={certificates.ca}\n"
        f"sasl.jaas.config={PLAIN_LOGIN_MODULE} required \\\n"
        '    username="spark" password="spark-secret";\n'
    )
    status = main(
        [
            "pipeline",
            "aggregate",
            "--bootstrap-servers",
            broker.listeners["SASL_SSL"],
            "--command-config",
            str(client_properties),
            "--source-topic",
            source,
            "--sink-topic",
            sink,
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--available-now",
            "--progress-interval",
            "0.5",
        ]
    )
    assert status == 0
    consumer = Consumer({"bootstrap.servers": plaintext, "group.id": uuid.uuid4().hex})
    consumer.assign([TopicPartition(sink, 0, 0)])
    latest: dict[str, int] = {}
    deadline = time.monotonic() + 30
    while latest != {"a": 2, "b": 1}:
        assert time.monotonic() < deadline, f"counts so far: {latest}"
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            value = json.loads(message.value())
            latest[value["key"]] = value["count"]
    consumer.close()
    assert logged_in(broker, "on listener SASL_SSL authenticated as User:spark")


def logged_in(broker: EmbeddedBroker, text: str) -> bool:
    return any(text in line for line in list(broker.log_lines))
