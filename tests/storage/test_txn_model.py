"""Transactions in one partition's log against a model: random interleavings of
transactional and idempotent appends, COMMIT and ABORT markers across producers, clean
and unclean restarts, a torn tail, truncation and cleanings.

After every step:
- the last stable offset is the first offset of the earliest open transaction, or the
  log end offset (a single replica: the high watermark), so it never passes an open
  transaction;
- what a read_committed consumer makes of a fetch up to the last stable offset (the
  batches read plus the aborted transactions the log answers, applied as Kafka's
  consumer does) is exactly the model's committed and non-transactional records;
- the segments' .txnindex entries are the model's aborted transactions, each with its
  last stable offset as of its marker;
- every producer's open transaction is the model's.
Segments are small, so rolls (with producer snapshots) happen often and aborted
transactions span segments; restarts and truncation must rebuild the same state.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from spec import build_batch

from odradek.protocol import records as rb
from odradek.storage import Log, LogConfig, errors
from odradek.storage.cleaner import LogCleaner
from odradek.storage.txn_index import AbortedTxn

NOW = 1_700_000_000_000
PRODUCERS = (1, 2, 3)
EPOCH = 0
#: Compacted, so cleanings (of unique keys: only the transaction rules remove anything) run too.
CONFIG = LogConfig(
    segment_bytes=600,
    cleanup_policy=("compact",),
    min_cleanable_dirty_ratio=0.01,
    delete_retention_ms=1000,
)


@dataclass(frozen=True)
class Batch:
    """A written batch as the model sees it."""

    pid: int
    base: int
    last: int
    transactional: bool
    #: For a marker: True COMMIT, False ABORT; None for data.
    commit: bool | None = None
    seq: int = -1


class Model:
    """Kafka's rules, restated: a transaction opens at a producer's first transactional
    batch and ends at its marker; the last stable offset is the earliest open one's first
    offset; an aborted transaction's index entry carries the first offset of another
    producer's transaction open at its marker (or the marker's offset + 1)."""

    def __init__(self, batches: list[Batch]) -> None:
        self.batches = batches

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last + 1 if self.batches else 0

    def replay(self) -> tuple[dict[int, int], list[AbortedTxn], set[int]]:
        """(open transactions: producer -> first offset, aborted index entries, aborted offsets)."""
        open_txns: dict[int, int] = {}
        members: dict[int, list[Batch]] = {}
        aborted: list[AbortedTxn] = []
        aborted_offsets: set[int] = set()
        for b in self.batches:
            if b.commit is None:
                if b.transactional:
                    open_txns.setdefault(b.pid, b.base)
                    members.setdefault(b.pid, []).append(b)
                continue
            first = open_txns.pop(b.pid, None)
            done = members.pop(b.pid, [])
            if first is None or b.commit:
                continue
            others = [f for pid, f in open_txns.items() if pid != b.pid and f < b.base]
            aborted.append(AbortedTxn(b.pid, first, b.base, min(others, default=b.base + 1)))
            for m in done:
                aborted_offsets.update(range(m.base, m.last + 1))
        return open_txns, aborted, aborted_offsets

    def next_seq(self, pid: int) -> int:
        for b in reversed(self.batches):
            if b.pid == pid and b.commit is None:
                return b.seq + (b.last - b.base) + 1
        return 0


def read_committed_offsets(log: Log, lso: int) -> list[int]:
    """The offsets a read_committed consumer delivers from a fetch of everything below ``lso``,
    as Kafka's consumer filters (CompletedFetch): aborted transactions are taken in first
    offset order as batches pass them, a producer's batches are dropped until its ABORT
    marker, control batches never reach the application."""
    data = log.read(0, 1 << 30, max_offset=lso, aborted_transactions=True)
    assert data.aborted_transactions is not None
    pending = [(t.first_offset, t.producer_id) for t in data.aborted_transactions]
    heapq.heapify(pending)
    aborted_pids: set[int] = set()
    out: list[int] = []
    blob = b"".join(region.read_bytes() for region in data.regions)
    for batch in rb.iter_batches(blob, strict_count=False):  # cleaned: maybe empty
        pid = batch.producer_id
        if batch.is_transactional:
            while pending and pending[0][0] <= batch.last_offset:
                aborted_pids.add(heapq.heappop(pending)[1])
        if batch.is_control:
            marker = rb.end_txn_marker(blob, batch.position, batch.size_in_bytes)
            if marker is not None and not marker.commit:
                aborted_pids.discard(pid)
            continue
        if (batch.is_transactional and pid in aborted_pids) or not batch.records_count:
            continue
        out.extend(range(batch.base_offset, batch.last_offset + 1))
    return out


class TxnLogMachine(RuleBasedStateMachine):
    @initialize()
    def open_log(self) -> None:
        self.tmp = Path(tempfile.mkdtemp())
        self.dir = self.tmp / "txn-0"
        self.log = Log(self.dir, CONFIG, now_ms=NOW)
        self.model = Model([])
        self.keys = 0
        #: The high watermark as the cleanings saw it: a cleaning reaches at most up to it, and
        #: nothing below it is ever truncated or lost (what a real high watermark promises).
        self.hw = 0

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(pid=st.sampled_from(PRODUCERS), count=st.integers(1, 4), transactional=st.booleans())
    def produce(self, pid: int, count: int, transactional: bool) -> None:
        open_txns, _, _ = self.model.replay()
        seq = self.model.next_seq(pid)
        self.keys += count
        records = [(b"k%d" % (self.keys - i), b"v" * 20, NOW) for i in range(count)]
        batch = build_batch(
            records,
            producer_id=pid,
            producer_epoch=EPOCH,
            base_sequence=seq,
            attributes=rb.TRANSACTIONAL_MASK if transactional else 0,
        )
        if pid in open_txns and not transactional:
            try:
                self.log.append(batch, leader_epoch=0, now_ms=NOW)
            except errors.InvalidTxnState:
                return
            raise AssertionError("a non-transactional batch inside a transaction was accepted")
        info = self.log.append(batch, leader_epoch=0, now_ms=NOW)
        assert info.first_offset == self.model.log_end_offset
        self.model.batches.append(
            Batch(pid, info.first_offset, info.last_offset, transactional, seq=seq)
        )

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans())
    def end_transaction(self, pid: int, commit: bool) -> None:
        marker = rb.control_batch(pid, EPOCH, commit, 0, NOW)
        info = self.log.append(marker, leader_epoch=0, now_ms=NOW, from_client=False)
        self.model.batches.append(Batch(pid, info.first_offset, info.first_offset, True, commit))

    @rule(kind=st.sampled_from(("clean restart", "crash", "torn tail", "truncate")), data=st.data())
    def disrupt(self, kind: str, data: st.DataObject) -> None:
        """One rule for every restart and truncation, so appends and markers make up most
        steps: a clean restart, a crash (recovery from the start), a crash with the last
        batch half written (recovery cuts it), a follower's truncation to a batch boundary."""
        batches = self.model.batches
        if kind == "truncate":
            above = [i for i, b in enumerate(batches) if b.base >= self.hw]
            if above:
                i = data.draw(st.sampled_from(above))
                self.log.truncate_to(batches[i].base)
                del batches[i:]
            return
        if kind == "clean restart":
            self.log.close()
        else:
            for seg in self.log.segments:
                seg.close()
            if kind == "torn tail" and batches and batches[-1].base >= self.hw:
                last = max(self.dir.glob("*.log"), key=lambda p: int(p.name[:20]))
                if last.stat().st_size:
                    os.truncate(last, last.stat().st_size - 1)
                    self.model.batches.pop()
        self.log = Log(self.dir, CONFIG, clean_shutdown=kind == "clean restart", now_ms=NOW)

    @rule(later_ms=st.sampled_from((10, 10**6)))
    def clean(self, later_ms: int) -> None:
        """A cleaning: keys are unique, so it may remove only aborted transactions' records and
        markers (after delete.retention.ms), which must change nothing a reader sees."""
        self.log.roll(NOW)
        self.hw = self.log.log_end_offset
        cleaner = LogCleaner()
        plan = cleaner.prepare(self.log, NOW + later_ms, upper_bound=self.hw)
        if plan is not None:
            cleaner.install(self.log, plan, NOW + later_ms)

    @invariant()
    def same_transactions(self) -> None:
        if not hasattr(self, "log"):
            return
        log, model = self.log, self.model
        assert log.log_end_offset == model.log_end_offset
        open_txns, aborted, aborted_offsets = model.replay()
        leo = model.log_end_offset
        lso = min(open_txns.values(), default=leo)
        assert log.last_stable_offset(leo) == lso
        assert {
            pid: e.current_txn_first_offset
            for pid, e in log.producer_state.producers.items()
            if e.current_txn_first_offset >= 0
        } == open_txns
        assert [t for seg in log.segments for t in seg.txn_index.entries] == aborted
        visible = [
            o
            for b in model.batches
            if b.commit is None and b.last < lso
            for o in range(b.base, b.last + 1)
            if o not in aborted_offsets
        ]
        assert read_committed_offsets(log, lso) == visible


TestTxnLog = TxnLogMachine.TestCase
TestTxnLog.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
