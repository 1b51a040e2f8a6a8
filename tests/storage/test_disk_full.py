"""A full disk, for real: a tiny tmpfs mounted for the test (the tests run as root; where
mounting is not permitted they skip, saying so).

An append that does not fit answers KAFKA_STORAGE_ERROR and leaves the log as it was; the
partition and its dir stay online and appends go on once space is freed. An index entry
stored into a sparse page of its memory map on a full disk would raise SIGBUS and kill
the broker: the blocks are allocated first, so that is an ordinary error too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from spec import build_batch, parse_batches

from odradek.storage import LogConfig, LogManager, TopicPartition, errors

NOW = 1_700_000_000_000
TP, OTHER = TopicPartition("t", 0), TopicPartition("t", 1)


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs for a real full disk: {done.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 1 MiB file system of its own."""
    path = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mount_tmpfs(path, "1m")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill_until_full(path: Path) -> None:
    """Write a file until the file system refuses more."""
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == 28  # ENOSPC


def served(lm: LogManager, tp: TopicPartition) -> list[bytes]:
    log = lm.get_log(tp)
    assert log is not None
    info = log.read(log.log_start_offset, 1 << 30)
    data = b"".join(region.read_bytes() for region in info.regions)
    return [r.value for b in parse_batches(data) for r in b.records]


def test_a_full_disk_refuses_appends_and_they_resume_when_space_returns(small_disk, caplog):
    data = small_disk / "data"
    lm = LogManager([str(data)], LogConfig())
    lm.startup()
    log, other = lm.get_or_create_logs([TP, OTHER])
    other.append(build_batch([(b"k", b"other", NOW)]), leader_epoch=0, now_ms=NOW)
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * 256 * 1024)  # to free later, as retention would

    acked: list[bytes] = []
    with pytest.raises(errors.KafkaStorageError, match="no space left"):
        for i in range(10_000):
            value = b"%d-" % i + b"v" * 3000
            log.append(build_batch([(b"k", value, NOW)]), leader_epoch=0, now_ms=NOW)
            acked.append(value)
    for _ in range(3):  # the producer retries: each answered, nothing taken offline
        with pytest.raises(errors.KafkaStorageError):
            log.append(build_batch([(b"k", b"v" * 3000, NOW)]), leader_epoch=0, now_ms=NOW)
    assert sum("no space" in m.lower() for m in caplog.messages) == 1  # logged once
    assert lm.offline_dirs == set() and not log.offline and not other.offline
    assert served(lm, TP) == acked  # every acknowledged record, nothing of the refused ones
    assert served(lm, OTHER) == [b"other"]
    assert log.active.size == log.active.path.stat().st_size

    ballast.unlink()
    info = log.append(build_batch([(b"k", b"after", NOW)]), leader_epoch=0, now_ms=NOW)
    assert info.first_offset == len(acked)
    lm.shutdown()

    lm = LogManager([str(data)], LogConfig())
    lm.startup()  # after a clean shutdown: the fast load checks what it reads
    assert served(lm, TP) == acked + [b"after"]
    assert served(lm, OTHER) == [b"other"]
    lm.shutdown()


def test_an_index_entry_on_a_full_disk_is_an_error_not_sigbus(small_disk):
    """Regression: the offset index is a sparse file written through a memory map. With
    every 8-byte entry of its first page used and the disk full, the next batch still fits
    in the last page of the .log file, but its index entry needs a new page: the store
    raised SIGBUS and killed the process. Run in a child process, which a SIGBUS kills.
    The blocks for index entries are now allocated before the batches are written."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from spec import build_batch
        from odradek.storage import Log, LogConfig, errors
        # a batch of 8k + 1 bytes: 512 of them leave 512 bytes of the .log's last page used
        value = b"v"
        while len(build_batch([(b"k", value, {NOW})])) % 8 != 1:
            value += b"v"
        log = Log(__import__("pathlib").Path({str(small_disk / "t-0")!r}), LogConfig(index_interval_bytes=1))
        for _ in range(512):
            log.append(build_batch([(b"k", value, {NOW})]), leader_epoch=0, now_ms={NOW})
        assert len(log.active.offset_index.keys) == 512  # the first page of the index is full
        with open({str(small_disk / "ballast")!r}, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(bytes(4096))
            except OSError:
                pass
        try:
            log.append(build_batch([(b"k", value, {NOW})]), leader_epoch=0, now_ms={NOW})
            print("appended")
        except errors.KafkaStorageError as exc:
            print("refused:", exc)
        print("offsets", log.log_start_offset, log.log_end_offset)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    # the index's blocks were taken ahead (ALLOCATE_STEP), before the disk filled up
    assert done.stdout.splitlines() == ["appended", "offsets 0 513"]


def test_a_checkpoint_on_a_full_disk_keeps_the_old_one_and_the_dir_online(small_disk, caplog):
    data = small_disk / "data"
    lm = LogManager([str(data)], LogConfig())
    lm.startup()
    (log,) = lm.get_or_create_logs([TP])
    log.append(build_batch([(b"k", b"v", NOW)]), leader_epoch=0, now_ms=NOW)
    lm.checkpoint()
    before = {p.name: p.read_bytes() for p in data.iterdir() if p.name.endswith("checkpoint")}
    assert before
    log.append(build_batch([(b"k", b"w", NOW)]), leader_epoch=0, now_ms=NOW)
    log.flush()  # the recovery point moves: the next checkpoint would differ
    fill_until_full(small_disk / "ballast")
    lm.checkpoint()
    assert any("checkpoint of" in m and "No space left" in m for m in caplog.messages)
    assert lm.offline_dirs == set() and not log.offline
    assert {
        p.name: p.read_bytes() for p in data.iterdir() if p.name.endswith("checkpoint")
    } == before
    assert not list(data.glob("*.tmp"))
    (small_disk / "ballast").unlink()
    lm.checkpoint()
    assert (data / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 0 2\n"
    lm.shutdown()


def idempotent_producers(log, count: int) -> None:
    """One batch from each of ``count`` idempotent producers: the producer snapshot a roll
    writes (46 bytes per producer) then needs more than the roll frees first (the spare
    blocks of the old segment's indexes, ALLOCATE_STEP each)."""
    for pid in range(count):
        batch = build_batch([(b"k", b"p", NOW)], producer_id=pid, producer_epoch=0, base_sequence=0)
        log.append(batch, leader_epoch=0, now_ms=NOW)


def test_a_roll_on_a_full_disk_refuses_the_append_and_takes_nothing_offline(small_disk):
    """Regression: the roll's producer snapshot failing for a full disk took the dir offline."""
    lm = LogManager([str(small_disk / "data")], LogConfig(segment_ms=1000))
    lm.startup()
    (log,) = lm.get_or_create_logs([TP])
    idempotent_producers(log, 5000)
    fill_until_full(small_disk / "ballast")
    later = NOW + 5000  # segment.ms has passed: this append rolls first
    with pytest.raises(errors.KafkaStorageError, match="no space left"):
        log.append(build_batch([(b"k", b"w", later)]), leader_epoch=0, now_ms=later)
    assert lm.offline_dirs == set() and not log.offline
    assert [s.base_offset for s in log.segments] == [0] and not list(log.dir.glob("*.tmp"))
    (small_disk / "ballast").unlink()
    log.append(build_batch([(b"k", b"w", later)]), leader_epoch=0, now_ms=later)
    assert [s.base_offset for s in log.segments] == [0, 5000]
    assert served(lm, TP) == [b"p"] * 5000 + [b"w"]
    lm.shutdown()


def test_retention_on_a_full_disk_deletes_what_it_can_and_the_rest_later(small_disk):
    cfg = LogConfig(retention_ms=1000, segment_bytes=200_000)
    lm = LogManager([str(small_disk / "data")], cfg)
    lm.startup()
    (log,) = lm.get_or_create_logs([TP])
    idempotent_producers(log, 5000)
    assert len(log.segments) == 2
    fill_until_full(small_disk / "ballast")
    assert lm.cleanup_logs(now_ms=NOW + 5000) == 1  # the roll cannot be written: not the active
    assert lm.offline_dirs == set() and not log.offline
    assert log.log_start_offset == log.active.base_offset > 0 and len(log.segments) == 1
    (small_disk / "ballast").unlink()
    assert lm.cleanup_logs(now_ms=NOW + 5000) == 1
    assert (log.log_start_offset, log.log_end_offset) == (5000, 5000)
    lm.shutdown()
