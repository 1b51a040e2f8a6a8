"""Idempotent producer rules against a model written here from Kafka's (ProducerAppendInfo,
ProducerStateEntry, ProducerStateManager): random requests of one to four batches from
several producers (in sequence, duplicates of recent and of old batches, gaps, stale and
bumped epochs, sequences wrapping past 2**31 - 1, batches without a producer id), clean and
unclean restarts, truncation and producer id expiration.

After every step the log's answers (offsets, duplicate or not, the error) and its producer
state (epoch, the last five batches, last timestamp per producer) must equal the model's.

Where Odradek chooses differently from Kafka the model follows Odradek, on purpose:
a retried request is answered with the original offsets of all its batches (Kafka answers
with the first duplicate found), a request mixing duplicate and new batches is out of
sequence, and an entry's last timestamp is the largest it has seen.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from spec import build_batch

from odradek.storage import Log, LogConfig, errors

NOW = 1_700_000_000_000
EXPIRATION_MS = 1000
SEQ_LIMIT = 2**31  # sequences wrap from 2**31 - 1 to 0
RETAINED = 5  # batches remembered per producer for duplicate detection
PRODUCERS = (1, 2, 3)
#: Each client's first sequence (a partition accepts any from a producer it does not know):
#: producer 3 soon wraps from 2**31 - 1 to 0.
FIRST_SEQUENCE = {1: 0, 2: 0, 3: SEQ_LIMIT - 4}
#: Big segments: snapshots are taken at close only, as the model assumes.
CONFIG = LogConfig(segment_bytes=1 << 30)


@dataclass(frozen=True)
class Sent:
    """One batch of a request, as a client sends it (producer id -1: not idempotent)."""

    pid: int
    epoch: int
    seq: int
    count: int
    ts: int

    @property
    def last_seq(self) -> int:
        return (self.seq + self.count - 1) % SEQ_LIMIT


@dataclass(frozen=True)
class Appended:
    """What the partition remembers of a producer batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    ts: int


@dataclass
class Producer:
    epoch: int
    batches: list[Appended] = field(default_factory=list)
    last_ts: int = -1

    def add(self, epoch: int, batch: Appended) -> Producer:
        """A new entry with ``batch`` added (a new epoch starts over: the old epoch's batches
        and timestamp are forgotten)."""
        if epoch != self.epoch:
            return Producer(epoch, [batch], batch.ts)
        return Producer(epoch, (self.batches + [batch])[-RETAINED:], max(self.last_ts, batch.ts))


class Model:
    def __init__(self) -> None:
        self.log: list[
            tuple[int, Sent, Appended]
        ] = []  # (epoch, what was sent, where it went) in offset order
        self.producers: dict[int, Producer] = {}
        self.snapshots: dict[
            int, dict[int, Producer]
        ] = {}  # offset -> the producers then (last batch only)

    @property
    def log_end_offset(self) -> int:
        return self.log[-1][2].last_offset + 1 if self.log else 0

    def append(self, request: list[Sent]) -> tuple[int, int, bool] | str:
        """(first offset, last offset, duplicate) or the name of the error; all or nothing."""
        view = dict(self.producers)  # the state as the request's earlier batches left it
        duplicates: list[Appended] = []
        added: list[tuple[Sent, Appended]] = []
        offset = self.log_end_offset
        for sent in request:
            p = view.get(sent.pid) if sent.pid >= 0 else None
            if p is not None:
                if sent.epoch < p.epoch:
                    return "INVALID_PRODUCER_EPOCH"
                if sent.epoch > p.epoch:
                    if sent.seq != 0:  # a bumped epoch starts over at 0
                        return "OUT_OF_ORDER_SEQUENCE_NUMBER"
                else:
                    same = [
                        b
                        for b in p.batches
                        if (b.first_seq, b.last_seq) == (sent.seq, sent.last_seq)
                    ]
                    if same:
                        duplicates.append(same[0])
                        continue
                    if p.batches and sent.seq != (p.batches[-1].last_seq + 1) % SEQ_LIMIT:
                        return "OUT_OF_ORDER_SEQUENCE_NUMBER"
            batch = Appended(sent.seq, sent.last_seq, offset, offset + sent.count - 1, sent.ts)
            offset += sent.count
            added.append((sent, batch))
            if sent.pid >= 0:
                view[sent.pid] = (p or Producer(sent.epoch)).add(sent.epoch, batch)
        if duplicates:
            contiguous = all(
                b.first_offset == a.last_offset + 1 for a, b in itertools.pairwise(duplicates)
            )
            if added or not contiguous:
                return "OUT_OF_ORDER_SEQUENCE_NUMBER"
            return duplicates[0].first_offset, duplicates[-1].last_offset, True
        self.producers = view
        self.log += [(sent.epoch, sent, batch) for sent, batch in added]
        return added[0][1].first_offset, added[-1][1].last_offset, False

    def snapshot(self) -> None:
        """What a close writes at the log end offset: each producer with its last batch only;
        the two newest snapshots are kept."""
        self.snapshots[self.log_end_offset] = {
            pid: Producer(
                p.epoch, [replace(b, ts=p.last_ts) for b in p.batches[-1:]], p.last_ts
            )  # one timestamp
            for pid, p in self.producers.items()
        }
        for offset in sorted(self.snapshots)[:-2]:
            del self.snapshots[offset]

    def reload(self) -> None:
        """Recovery and truncation: the newest snapshot at or below the log end offset, then
        every producer batch after it replayed (no checks); later snapshots are deleted."""
        leo = self.log_end_offset
        self.snapshots = {o: s for o, s in self.snapshots.items() if o <= leo}
        start = max(self.snapshots, default=0)
        self.producers = {
            pid: Producer(p.epoch, list(p.batches), p.last_ts)
            for pid, p in self.snapshots.get(start, {}).items()
        }
        for epoch, sent, batch in self.log:
            if sent.pid >= 0 and batch.first_offset >= start:
                self.producers[sent.pid] = self.producers.get(sent.pid, Producer(epoch)).add(
                    epoch, batch
                )

    def truncate(self, offset: int) -> None:
        self.log = [entry for entry in self.log if entry[2].first_offset < offset]
        self.reload()

    def expire(self, now: int) -> None:
        self.producers = {
            pid: p for pid, p in self.producers.items() if now - p.last_ts < EXPIRATION_MS
        }


ERRORS = {
    errors.InvalidProducerEpoch: "INVALID_PRODUCER_EPOCH",
    errors.OutOfOrderSequence: "OUT_OF_ORDER_SEQUENCE_NUMBER",
}


class ProducerStateMachine(RuleBasedStateMachine):
    @initialize()
    def open_log(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="producer-model-"))
        self.path = self.tmp / "t-0"
        self.log = Log(self.path, CONFIG, producer_id_expiration_ms=EXPIRATION_MS)
        self.model = Model()
        self.sent: dict[int, list[Sent]] = {
            pid: [] for pid in PRODUCERS
        }  # what each producer got appended
        self.epochs = dict.fromkeys(
            PRODUCERS, 0
        )  # each client's epoch (kept when the partition forgets it)
        self.requests: list[list[Sent]] = []  # the requests appended

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def draw_batch(self, data: st.DataObject, client: dict[int, tuple[int, int]]) -> Sent:
        """One batch; ``client`` is each producer's (epoch, next sequence) as this request goes."""
        kind = data.draw(
            st.sampled_from(["next", "next", "next", "duplicate", "gap", "stale", "bump", "plain"])
        )
        pid = data.draw(st.sampled_from(PRODUCERS))
        count = data.draw(st.integers(1, 3))
        ts = NOW + data.draw(st.integers(0, 3 * EXPIRATION_MS))
        epoch, seq = client[pid]
        if kind == "plain":
            return Sent(-1, -1, -1, count, ts)
        if kind == "duplicate" and self.sent[pid]:
            old = data.draw(st.sampled_from(self.sent[pid]))
            return Sent(pid, old.epoch, old.seq, old.count, old.ts)
        if kind == "stale" and epoch > 0:
            return Sent(pid, epoch - 1, seq, count, ts)
        if kind == "bump":
            return Sent(pid, epoch + 1, data.draw(st.sampled_from([0, 0, 1])), count, ts)
        if kind == "gap":
            seq = (seq + data.draw(st.integers(1, 3))) % SEQ_LIMIT
        return Sent(pid, epoch, seq, count, ts)

    @rule(data=st.data(), size=st.sampled_from([1, 1, 2, 3, 4]))
    def append(self, data: st.DataObject, size: int) -> None:
        client = {
            pid: (
                self.epochs[pid],
                (sent[-1].last_seq + 1) % SEQ_LIMIT if sent else FIRST_SEQUENCE[pid],
            )
            for pid, sent in self.sent.items()
        }
        request = []
        for _ in range(size):
            sent = self.draw_batch(data, client)
            request.append(sent)
            if sent.pid >= 0:
                client[sent.pid] = (sent.epoch, (sent.last_seq + 1) % SEQ_LIMIT)
        self.send(request)

    @precondition(lambda self: self.requests)
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        """A whole earlier request sent again (its response was lost)."""
        recent = data.draw(
            st.booleans()
        )  # a recent one usually is still among its producers' last five
        self.send(data.draw(st.sampled_from(self.requests[-2:] if recent else self.requests)))

    def send(self, request: list[Sent]) -> None:
        blob = b"".join(
            build_batch(
                [(b"k", b"v", s.ts)] * s.count,
                producer_id=s.pid,
                producer_epoch=s.epoch,
                base_sequence=s.seq,
            )
            for s in request
        )
        if any(
            s.pid >= 0
            and s.seq == 0
            and s.pid in self.model.producers
            and self.model.producers[s.pid].batches
            and self.model.producers[s.pid].batches[-1].last_seq == SEQ_LIMIT - 1
            for s in request
        ):
            event("a batch follows one that ended at 2**31 - 1")
        expected = self.model.append(request)
        try:
            info = self.log.append(blob, leader_epoch=0, now_ms=NOW)
            got: tuple[int, int, bool] | str = (info.first_offset, info.last_offset, info.duplicate)
        except (errors.InvalidProducerEpoch, errors.OutOfOrderSequence) as exc:
            got = ERRORS[type(exc)]
        assert got == expected, request
        multi = "multi-batch " if len(request) > 1 else ""
        event(
            multi
            + (
                expected
                if isinstance(expected, str)
                else "duplicate"
                if expected[2]
                else "appended"
            )
        )
        if any(s.pid >= 0 and s.last_seq < s.seq for s in request):
            event("a batch's sequences wrapped")
        if isinstance(expected, tuple) and not expected[2]:
            self.requests.append(request)
            for sent in request:
                if sent.pid >= 0:
                    self.sent[sent.pid].append(sent)
                    self.epochs[sent.pid] = max(self.epochs[sent.pid], sent.epoch)

    @rule()
    def restart_clean(self) -> None:
        self.log.close()
        self.model.snapshot()
        self.log = Log(
            self.path,
            CONFIG,
            clean_shutdown=True,
            recovery_point=self.model.log_end_offset,
            producer_id_expiration_ms=EXPIRATION_MS,
        )
        self.model.reload()

    @rule()
    def restart_unclean(self) -> None:
        for seg in self.log.segments:  # a crash: no snapshot, no clean-shutdown marker
            seg.close()
        self.log = Log(
            self.path, CONFIG, clean_shutdown=False, producer_id_expiration_ms=EXPIRATION_MS
        )
        self.model.reload()

    @precondition(lambda self: self.model.log)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from([batch.first_offset for _, _, batch in self.model.log]))
        self.log.truncate_to(offset)
        self.model.truncate(offset)

    @rule(after=st.integers(0, 4 * EXPIRATION_MS))
    def expire(self, after: int) -> None:
        self.log.producer_state.remove_expired(NOW + after)
        self.model.expire(NOW + after)

    @invariant()
    def same_state(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.model.log_end_offset
        got = {
            pid: (
                e.epoch,
                [
                    (b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
                    for b in e.batches
                ],
                e.last_timestamp,
            )
            for pid, e in self.log.producer_state.producers.items()
        }
        expected = {
            pid: (
                p.epoch,
                [(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.ts) for b in p.batches],
                p.last_ts,
            )
            for pid, p in self.model.producers.items()
        }
        assert got == expected


ProducerStateMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None
)
TestProducerState = ProducerStateMachine.TestCase
