"""`odradek groups`: lag per partition, list with a state filter, reset offsets, delete."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer

from odradek.cli.main import main

from .conftest import create_topic, produce
from .test_offsets_restart import committed, consume_and_commit


def run(capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def lag_rows(out: str, topic: str) -> dict[int, tuple[int, int, int]]:
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[1] == topic:
            rows[int(cols[2])] = (int(cols[3]), int(cols[4]), int(cols[5]))
    return rows


@pytest.mark.timeout(90)
def test_describe_lag_reset_and_delete(broker, capsys):
    bs = broker.bootstrap_servers
    topic = create_topic(bs, 2)
    produce(bs, topic, [b"a%d" % i for i in range(10)], 2)  # 5 per partition
    consume_and_commit(bs, topic, "cli", 10)
    mark = time.time()
    time.sleep(0.01)
    produce(bs, topic, [b"b%d" % i for i in range(6)], 2)  # 3 more per partition
    conn = ("--bootstrap-server", bs)

    status, out = run(capsys, "groups", "describe", *conn, "--group", "cli")
    assert status == 0 and "Empty" in out
    assert lag_rows(out, topic) == {0: (5, 8, 3), 1: (5, 8, 3)}

    status, out = run(capsys, "groups", "list", *conn, "--state", "Empty")
    assert status == 0 and "cli" in out.split()
    assert ["cli", "classic", "Empty"] in [line.split() for line in out.splitlines()]
    status, out = run(capsys, "groups", "list", *conn, "--type", "consumer")
    assert status == 0 and "cli" not in out.split()
    status, out = run(capsys, "groups", "list", *conn, "--state", "Stable")
    assert "cli" not in out.split()

    # Dry run by default: prints the plan, commits nothing.
    status, out = run(
        capsys,
        "groups",
        "reset-offsets",
        *conn,
        "--group",
        "cli",
        "--topic",
        topic,
        "--to-earliest",
    )
    assert status == 0 and "Dry run" in out
    assert committed(bs, topic, "cli", 2) == [5, 5]

    run(
        capsys,
        "groups",
        "reset-offsets",
        *conn,
        "--group",
        "cli",
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    )
    assert committed(bs, topic, "cli", 2) == [0, 0]
    run(
        capsys,
        "groups",
        "reset-offsets",
        *conn,
        "--group",
        "cli",
        "--topic",
        f"{topic}:1",
        "--to-offset",
        "99",
        "--execute",
    )
    assert committed(bs, topic, "cli", 2) == [0, 8]  # clamped to the log end
    run(
        capsys,
        "groups",
        "reset-offsets",
        *conn,
        "--group",
        "cli",
        "--topic",
        topic,
        "--to-datetime",
        time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(mark)) + f".{int(mark % 1 * 1e6):06d}",
        "--execute",
    )
    assert committed(bs, topic, "cli", 2) == [5, 5]  # first records produced after the mark
    run(
        capsys,
        "groups",
        "reset-offsets",
        *conn,
        "--group",
        "cli",
        "--topic",
        topic,
        "--to-latest",
        "--execute",
    )
    status, out = run(capsys, "groups", "describe", *conn, "--group", "cli")
    assert lag_rows(out, topic) == {0: (8, 8, 0), 1: (8, 8, 0)}

    # A group with a live member cannot be deleted; an empty one can.
    member = Consumer({"bootstrap.servers": bs, "group.id": "cli-busy", "session.timeout.ms": 6000})
    member.subscribe([topic])
    try:
        for _ in range(100):
            member.poll(0.1)
            if member.assignment():
                break
        status, _ = run(capsys, "groups", "delete", *conn, "--group", "cli-busy")
        assert status == 1
    finally:
        member.close()
    status, out = run(capsys, "groups", "delete", *conn, "--group", "cli")
    assert status == 0 and "Deleted group cli." in out
    assert committed(bs, topic, "cli", 2) == [-1001, -1001]
