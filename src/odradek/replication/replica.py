"""A leader's view of one follower: its log end offset and when it last caught up.

As Kafka's Replica.updateFetchStateOrThrow: a fetch at offset ``o`` says the
follower's log end offset is ``o``. The follower is *caught up* at the time of
a fetch that reached the leader's log end offset, and also at the time of its
previous fetch when this one reached the leader log end offset seen then (it
had everything that existed at that earlier moment). A follower not caught up
for ``replica.lag.time.max.ms`` leaves the ISR. Timing by the fetch that
proves progress, not by fetch arrival, is what lets a slow-but-moving follower
stay while a stuck one (fetching the same offset over and over) is removed.
"""

from __future__ import annotations

#: A follower's log end offset before its first fetch to this leader (Kafka's UnifiedLog.UnknownOffset).
UNKNOWN_OFFSET = -1


class FollowerReplica:
    __slots__ = (
        "broker_epoch",
        "last_caught_up_ms",
        "last_fetch_leader_log_end_offset",
        "last_fetch_ms",
        "log_end_offset",
        "replica_id",
    )

    def __init__(self, replica_id: int) -> None:
        self.replica_id = replica_id
        #: The follower's broker epoch as its fetches state it (Fetch ReplicaState, KIP-903).
        self.broker_epoch = -1
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_caught_up_ms = 0
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def reset(self, now_ms: int, in_sync: bool) -> None:
        """A new leadership: nothing known of the follower's log; an ISR member counts as
        caught up now, so it is not removed before it had a chance to fetch (Kafka's
        resetReplicaState for a new leader)."""
        self.broker_epoch = -1
        self.log_end_offset = UNKNOWN_OFFSET
        self.last_caught_up_ms = now_ms if in_sync else 0
        self.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
        self.last_fetch_ms = 0

    def update_fetch_state(
        self, fetch_offset: int, fetch_time_ms: int, leader_log_end_offset: int, broker_epoch: int
    ) -> None:
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.broker_epoch = broker_epoch
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = fetch_time_ms

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        return (
            leader_log_end_offset == self.log_end_offset
            or now_ms - self.last_caught_up_ms <= max_lag_ms
        )

    def reset_reelected(self, now_ms: int, leader_log_end_offset: int, in_sync: bool) -> None:
        """A new epoch of the same leadership: the follower's log end offset still holds, but
        a replica outside the ISR must fetch again before it can rejoin (Kafka's
        resetReplicaState for a re-elected leader)."""
        self.last_caught_up_ms = now_ms if in_sync else 0
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_ms = now_ms if in_sync else 0
