"""Partition: one topic-partition's replication state machine around its log.

Sans-I/O: a plain object driven by method calls that take ``now_ms``; it sends
nothing and waits for nothing. Its inputs are the partition state from the
metadata (``apply_state``), appends, follower fetches arriving at a leader,
the controller's answers to ISR proposals, and, on a follower, the leader's
answers to OffsetForLeaderEpoch and Fetch. Its outputs are values the shell
acts on: the next request a follower should send (``next_follower_request``),
an ISR change to propose (``alter_partition_in_flight``), whether an acks=all
append is complete (``check_enough_replicas_reach_offset``). A simulation can
therefore drive three of them and a controller model through any schedule of
losses, delays, crashes and elections (tests/replication/).

The rules are Kafka's (Partition.scala, Replica.scala, AbstractFetcherThread):

- Leader: the high watermark is the smallest log end offset among the
  *maximal* ISR (``partition_state.IsrState``) and the followers that are
  caught up and about to join, never moving back, and it does not move at all
  while the committed ISR is smaller than ``min.insync.replicas`` (Kafka 4's
  ``isUnderMinIsr``). A follower outside the ISR joins once its log end offset
  reaches the high watermark and this leader epoch's start offset (so it has
  truncated against this leader); an ISR member not caught up for
  ``replica.lag.time.max.ms`` leaves. Either change is only *proposed*: one
  proposal at a time, applied when the controller commits it.
- Follower: after a new leader epoch it asks the leader for the end offset of
  its own latest epoch (KIP-101) and truncates to the divergence point, asking
  again with an older epoch when the leader answered with an epoch it does not
  have (KIP-279), before it fetches. So a divergent tail is gone before any of
  it could count towards a high watermark or be served. It takes the leader's
  high watermark, capped at its own log end offset.

Responses are matched against the request the state machine would send now, so
a late, duplicated or reordered answer (a previous epoch's, a fetch at an offset
already passed) is ignored rather than applied twice.

The log is reached only through ``ReplicaLog``: the storage ``Log`` in the
broker, an in-memory log in the simulation (thousands of schedules per second,
where a real log's files and fsyncs would allow only a few); both keep their
epochs in storage's ``LeaderEpochFileCache``, so the truncation arithmetic the
simulation checks is the production code.

A partition opens with the high watermark its broker last checkpointed (Kafka's
replication-offset-checkpoint), capped at its log end offset: a restarted leader does
not hide what was committed before, and nothing above it was ever exposed. Without a
checkpoint entry, a partition with other replicas starts at its log start offset, which
hides nothing committed for ever (it rises with the followers' next fetches) and never
exposes an uncommitted tail; a partition whose only replica is this broker (the single
node) starts at its log end offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from odradek.metrics.stats import ISR_CHANGES
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.partition_state import AlterPartition, IsrState, PartitionState
from odradek.replication.replica import FollowerReplica
from odradek.storage import LogConfig
from odradek.storage.leader_epoch import UNDEFINED, LeaderEpochFileCache

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

#: Kafka's default replica.lag.time.max.ms.
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000
NO_LEADER = -1


class NotEnoughReplicas(KafkaError):
    error_code = ErrorCode.not_enough_replicas


class NotLeaderOrFollower(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


class FencedLeaderEpoch(KafkaError):
    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpoch(KafkaError):
    error_code = ErrorCode.unknown_leader_epoch


class ReplicaLog(Protocol):
    """What the state machine needs of a log (storage's ``Log`` is the production one)."""

    @property
    def log_end_offset(self) -> int: ...
    @property
    def config(self) -> LogConfig: ...

    topic_partition: Any
    log_start_offset: int
    leader_epoch_cache: LeaderEpochFileCache
    #: Set after an I/O error: reads and appends fail (KafkaStorageError) until a restart.
    offline: bool

    def append(
        self,
        records: Any,
        *,
        leader_epoch: int,
        now_ms: int,
        assign_offsets: bool = True,
        from_client: bool = True,
        verification_guard: Any = None,
        transaction_version: int = 0,
    ) -> Any: ...
    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        aborted_transactions: bool = False,
    ) -> Any: ...
    def truncate_to(self, offset: int) -> None: ...
    def last_stable_offset(self, high_watermark: int) -> int: ...


LogT = TypeVar("LogT", bound=ReplicaLog)


@dataclass(frozen=True, slots=True)
class EpochQuery:
    """A follower's OffsetForLeaderEpoch request: where does ``leader_epoch`` end on the leader?"""

    leader_id: int
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """A follower's Fetch request: records from ``fetch_offset`` (its log end offset)."""

    leader_id: int
    current_leader_epoch: int
    fetch_offset: int


class Partition(Generic[LogT]):
    def __init__(
        self,
        log: LogT,
        node_id: int,
        state: PartitionState,
        now_ms: int,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        checkpointed_high_watermark: int | None = None,
    ) -> None:
        self.log = log
        self.topic_partition = log.topic_partition
        self.node_id = node_id
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.leader_id = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self._isr_state = IsrState.committed(frozenset())
        #: The leader's view of each follower; empty on a follower and on a single node.
        self._remote: dict[int, FollowerReplica] = {}
        #: The log end offset when this broker became leader of the current epoch.
        self.leader_epoch_start_offset = -1
        #: The first leader epoch of this broker's current, uninterrupted leadership: a
        #: controller's ISR change bumps the epoch (ZooKeeper mode) without this broker ever
        #: following, so its log, and the appends waiting for replication, stay as they were.
        self.leader_since_epoch = -1
        #: A follower must find its divergence point before it fetches.
        self._truncating = False
        if state.replicas == (node_id,):
            self.high_watermark = log.log_end_offset
        elif checkpointed_high_watermark is not None:
            self.high_watermark = max(
                log.log_start_offset, min(checkpointed_high_watermark, log.log_end_offset)
            )
        else:
            self.high_watermark = log.log_start_offset
        self.apply_state(state, now_ms)

    # -- views ---------------------------------------------------------------------------
    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest unstable transaction (open, or its marker not yet
        replicated), or the high watermark: what read_committed readers may read below."""
        return self.log.last_stable_offset(self.high_watermark)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    @property
    def isr(self) -> frozenset[int]:
        """The committed ISR (what Metadata reports and NOT_ENOUGH_REPLICAS counts)."""
        return self._isr_state.isr

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self._isr_state.maximal_isr

    @property
    def alter_partition_in_flight(self) -> AlterPartition | None:
        """The ISR change proposed and not yet answered: the shell sends it (again) to the controller."""
        return self._isr_state.pending

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a client's epoch older than ours is fenced, a newer one unknown to us."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpoch(f"epoch {current_leader_epoch} < {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpoch(f"epoch {current_leader_epoch} > {self.leader_epoch}")

    def _check_leader(self) -> None:
        if self.leader_id != self.node_id:
            raise NotLeaderOrFollower(
                f"Leader not local for partition {self.topic_partition} on broker {self.node_id}"
            )

    # -- role changes --------------------------------------------------------------------
    def apply_state(self, state: PartitionState, now_ms: int) -> bool:
        """Bring the partition to ``state`` from the metadata; False if it is not newer.

        A higher leader epoch is a new leadership (become leader, or follow the new
        leader after truncating); the same epoch with a higher partition epoch only
        changes the ISR or the assignment (it also settles a proposal whose answer was
        lost). Anything older is a late message and changes nothing.
        """
        if state.leader_epoch < self.leader_epoch or (
            state.leader_epoch == self.leader_epoch
            and state.partition_epoch <= self.partition_epoch
        ):
            return False
        new_epoch = state.leader_epoch > self.leader_epoch
        was_leader = self.is_leader
        if was_leader and not new_epoch:  # the controller changed the ISR of a partition led here
            ISR_CHANGES.changed(self._isr_state.isr, frozenset(state.isr))
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        if self.is_leader and not was_leader:
            self.leader_since_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = state.replicas
        self._isr_state = IsrState.committed(frozenset(state.isr))
        if state.leader == self.node_id:
            self._make_leader(new_epoch, was_leader, now_ms)
        else:
            self._remote = {}
            if new_epoch:
                self._start_truncation()
        return True

    def _make_leader(self, new_epoch: bool, was_leader: bool, now_ms: int) -> None:
        self._truncating = False
        isr = self._isr_state.isr
        remote = {r: self._remote.get(r) or FollowerReplica(r) for r in self.replicas}
        remote.pop(self.node_id, None)
        self._remote = remote
        if new_epoch:
            leo = self.log.log_end_offset
            self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
            self.leader_epoch_start_offset = leo
            for replica in remote.values():
                if was_leader:
                    replica.reset_reelected(now_ms, leo, replica.replica_id in isr)
                else:
                    replica.reset(now_ms, replica.replica_id in isr)
        self._maybe_increment_high_watermark(now_ms)

    # -- leader: appends, follower fetches, ISR ----------------------------------------------
    def append_records_to_leader(
        self,
        records: Any,
        required_acks: int,
        now_ms: int,
        from_client: bool = True,
        verification_guard: Any = None,
        transaction_version: int = 0,
    ) -> Any:
        """Append as leader; acks=-1 needs min.insync.replicas in the committed ISR first.
        ``from_client`` False is a coordinator's write (a transaction marker);
        ``verification_guard`` and ``transaction_version`` as ``Log.append``'s."""
        if self.leader_id != self.node_id:
            self._check_leader()
        if required_acks == -1 and len(self._isr_state.isr) < self.log.config.min_insync_replicas:
            raise NotEnoughReplicas(
                f"The size of the current ISR {len(self._isr_state.isr)} is insufficient to "
                f"satisfy the min.isr requirement of {self.log.config.min_insync_replicas}"
            )
        info = self.log.append(
            records,
            leader_epoch=self.leader_epoch,
            now_ms=now_ms,
            from_client=from_client,
            verification_guard=verification_guard,
            transaction_version=transaction_version,
        )
        self._maybe_increment_high_watermark(now_ms)
        return info

    def _maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Kafka's maybeIncrementLeaderHW; True if the high watermark moved."""
        if len(self._isr_state.isr) < self.log.config.min_insync_replicas:
            return False
        new_hw = self.log.log_end_offset
        if self._remote:
            leo, maximal, lag = new_hw, self._isr_state.maximal_isr, self.replica_lag_time_max_ms
            for replica in self._remote.values():
                if replica.log_end_offset < new_hw and (
                    replica.replica_id in maximal or replica.is_caught_up(leo, now_ms, lag)
                ):
                    new_hw = replica.log_end_offset
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def fetch_for_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        current_leader_epoch: int,
        max_bytes: int,
        now_ms: int,
        replica_epoch: int = -1,
    ) -> Any:
        """A follower's fetch: its offset is its log end offset; records up to our log end offset.
        ``replica_epoch`` is the follower's broker epoch from the request (-1 if not sent).

        The read comes first, so a fetch that fails (offset out of range) updates
        nothing, as Kafka's ReplicaManager updates follower state only after a good read.
        The high watermark to send back is ``high_watermark`` after this call.
        """
        replica = self._fetching_follower(replica_id, current_leader_epoch)
        data = self.log.read(fetch_offset, max_bytes)
        before = replica.log_end_offset
        replica.update_fetch_state(fetch_offset, now_ms, self.log.log_end_offset, replica_epoch)
        self._maybe_expand_isr(replica)
        if replica.log_end_offset != before:
            self._maybe_increment_high_watermark(now_ms)
        return data

    def fetch_for_idle_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        current_leader_epoch: int,
        now_ms: int,
        replica_epoch: int = -1,
    ) -> bool:
        """``fetch_for_follower`` for a follower with nothing to read, in one step: True when
        the follower is in the ISR and at our log end offset, as a follower of an idle
        partition stays; its fetch time is then all that changes (the read would find
        nothing, the ISR and the high watermark stay). False (nothing changed) leaves the
        fetch to ``fetch_for_follower``; the errors are the same.

        Why: a follower's fetch session holds every partition it follows from us (about a
        third of __consumer_offsets' fifty), and a fetch goes over all of them each time; for
        the idle ones this is most of a follower fetch's cost.
        """
        replica = self._fetching_follower(replica_id, current_leader_epoch)
        leo = self.log.log_end_offset
        if (
            fetch_offset != leo
            or replica.log_end_offset != leo
            or replica_id not in self._isr_state.isr
            or self.log.offline
        ):
            return False
        replica.update_fetch_state(fetch_offset, now_ms, leo, replica_epoch)
        return True

    def _fetching_follower(self, replica_id: int, current_leader_epoch: int) -> FollowerReplica:
        """The replica whose fetch this is, once this broker leads in the epoch it names."""
        self._check_leader()
        self.check_leader_epoch(current_leader_epoch)
        replica = self._remote.get(replica_id)
        if replica is None:
            raise NotLeaderOrFollower(
                f"Replica {replica_id} is not a replica of {self.topic_partition}"
            )
        return replica

    def _maybe_expand_isr(self, replica: FollowerReplica) -> None:
        state = self._isr_state
        if state.pending is not None or replica.replica_id in state.isr:
            return
        if (
            replica.log_end_offset >= self.high_watermark
            and replica.log_end_offset >= self.leader_epoch_start_offset
        ):
            self._propose(state.isr | {replica.replica_id}, state.isr | {replica.replica_id})

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartition | None:
        """Propose removing ISR members not caught up for replica.lag.time.max.ms (the shell
        calls this every replica.lag.time.max.ms / 2, as Kafka's isr-expiration task)."""
        state = self._isr_state
        if self.leader_id != self.node_id or state.pending is not None:
            return None
        leo, lag = self.log.log_end_offset, self.replica_lag_time_max_ms
        out = {
            r
            for r in state.isr
            if r != self.node_id
            and (r not in self._remote or not self._remote[r].is_caught_up(leo, now_ms, lag))
        }
        if not out:
            return None
        # The leaving replicas stay in the maximal ISR until the controller has answered.
        return self._propose(state.isr - out, state.isr)

    def _propose(self, new_isr: frozenset[int], maximal: frozenset[int]) -> AlterPartition:
        isr = tuple(sorted(new_isr))
        remote = self._remote
        epochs = tuple(remote[r].broker_epoch if r in remote else -1 for r in isr)
        proposal = AlterPartition(
            self.node_id, self.leader_epoch, self.partition_epoch, isr, epochs
        )
        self._isr_state = IsrState(self._isr_state.isr, frozenset(maximal), proposal)
        return proposal

    def on_alter_partition_response(
        self, proposal: AlterPartition, result: PartitionState | ErrorCode, now_ms: int
    ) -> bool:
        """The controller's answer to ``proposal``; True if the high watermark moved.

        A committed state ends the proposal. OPERATION_NOT_ATTEMPTED and
        INELIGIBLE_REPLICA say the change was not made: back to the committed ISR.
        Any other error (fenced leader epoch, stale partition epoch) leaves the
        proposal pending, maximal ISR and all, until the metadata brings the
        partition's real state: the change may have been committed by a retry
        whose answer was lost, and forgetting it could count a replica out of the
        high watermark that the controller already counts in.
        """
        state = self._isr_state
        if self.leader_id != self.node_id or state.pending != proposal:
            return False
        if isinstance(result, PartitionState):
            if (
                result.leader_epoch != self.leader_epoch
                or result.partition_epoch < self.partition_epoch
            ):
                return False
            self.partition_epoch = result.partition_epoch
            ISR_CHANGES.changed(state.isr, frozenset(result.isr))
            self._isr_state = IsrState.committed(frozenset(result.isr))
            return self._maybe_increment_high_watermark(now_ms)
        if result in (ErrorCode.operation_not_attempted, ErrorCode.ineligible_replica):
            self._isr_state = IsrState.committed(state.isr)
        return False

    def check_enough_replicas_reach_offset(
        self, required_offset: int, leader_epoch: int
    ) -> tuple[bool, ErrorCode]:
        """Is an acks=all append, made in ``leader_epoch`` and ending before ``required_offset``,
        complete? (Kafka's checkEnoughReplicasReachOffset for DelayedProduce.)

        A partition that stopped leading since that epoch answers NOT_LEADER_OR_FOLLOWER
        (Kafka completes the delayed produces of a partition that becomes a follower); a
        later epoch of the same leadership (the controller removed a dead follower from the
        ISR) keeps waiting, as Kafka's DelayedProduce does. The ISR shrinking below
        min.insync.replicas meanwhile gives NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        """
        if not self.is_leader or not self.leader_since_epoch <= leader_epoch <= self.leader_epoch:
            return True, ErrorCode.not_leader_or_follower
        if self.high_watermark < required_offset:
            return False, ErrorCode.none
        if len(self._isr_state.maximal_isr) < self.log.config.min_insync_replicas:
            return True, ErrorCode.not_enough_replicas_after_append
        return True, ErrorCode.none

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch on the leader: (largest epoch <= ``leader_epoch``, its end offset)."""
        self._check_leader()
        self.check_leader_epoch(current_leader_epoch)
        return self.log.leader_epoch_cache.end_offset_for_epoch(leader_epoch)

    # -- follower ------------------------------------------------------------------------
    def next_follower_request(self) -> EpochQuery | FetchPosition | None:
        """What a follower sends its leader now: an epoch query while truncating, else a fetch."""
        if self.leader_id == self.node_id or self.leader_id == NO_LEADER:
            return None
        if self._truncating:
            latest = self.log.leader_epoch_cache.latest_epoch
            return EpochQuery(self.leader_id, self.leader_epoch, latest)
        return FetchPosition(self.leader_id, self.leader_epoch, self.log.log_end_offset)

    def _start_truncation(self) -> None:
        """Find the divergence point before fetching; a log without epochs (nothing written
        under any leader since it was empty) has nothing to compare, so, as Kafka, it only
        cuts back to its high watermark."""
        if self.log.leader_epoch_cache.latest_epoch == UNDEFINED:
            self._truncate(self.high_watermark)
            self._truncating = False
        else:
            self._truncating = True

    def on_epoch_end_offset(self, query: EpochQuery, epoch: int, end_offset: int) -> None:
        """The leader's answer to ``query``: truncate to the divergence point (KIP-101/279)."""
        if not self._truncating or query != self.next_follower_request():
            return
        leo = self.log.log_end_offset
        if end_offset == UNDEFINED:
            target, done = self.high_watermark, True
        else:
            own_epoch, own_end = self.log.leader_epoch_cache.end_offset_for_epoch(epoch)
            if own_end == UNDEFINED:
                target, done = min(end_offset, leo), True
            elif own_epoch != epoch:
                # The leader has an epoch we lack: cut to where our older epoch ends, ask again.
                target, done = min(own_end, leo), False
            else:
                target, done = min(own_end, end_offset, leo), True
        self._truncate(target)
        self._truncating = not done

    def _truncate(self, offset: int) -> None:
        self.log.truncate_to(offset)
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def on_fetch_response(
        self, fetch: FetchPosition, records: Any, leader_high_watermark: int, now_ms: int
    ) -> bool:
        """Append the leader's records as follower; False if the response is stale."""
        if self._truncating or fetch != self.next_follower_request():
            return False
        if len(records):
            self.log.append(
                records, leader_epoch=self.leader_epoch, now_ms=now_ms, assign_offsets=False
            )
        high_watermark = min(leader_high_watermark, self.log.log_end_offset)
        if high_watermark > self.high_watermark:
            self.high_watermark = high_watermark
        return True

    def on_fetch_error(self, fetch: FetchPosition, error: ErrorCode) -> None:
        """OFFSET_OUT_OF_RANGE: the logs no longer line up, find the divergence point again.

        Epoch errors need newer metadata on one side; they change nothing here.
        """
        if error == ErrorCode.offset_out_of_range and fetch == self.next_follower_request():
            self._start_truncation()

    # -- reads ---------------------------------------------------------------------------
    def read(
        self, fetch_offset: int, max_bytes: int, isolation_level: int, min_one_message: bool
    ) -> Any:
        """Records from ``fetch_offset`` up to the high watermark; for read_committed up to the
        last stable offset, with the aborted transactions overlapping them."""
        if self.leader_id != self.node_id:
            self._check_leader()
        committed = isolation_level == READ_COMMITTED
        return self.log.read(
            fetch_offset,
            max_bytes,
            max_offset=self.last_stable_offset if committed else self.high_watermark,
            min_one_message=min_one_message,
            aborted_transactions=committed,
        )
