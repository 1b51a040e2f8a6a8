"""Both ready pipelines, run end to end through `odradek pipeline ...`."""

from __future__ import annotations

import json

from odradek.cli.main import main

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
