"""The follower's half of fetch sessions (KIP-227), as Kafka's FetchSessionHandler.

Why: without a session every Fetch a follower sends names every partition it follows
from that leader, and every answer repeats each of them. A broker following one busy
partition and the quiet third of ``__consumer_offsets`` (50 partitions at replication
factor 3) then builds, sends, decodes and walks some twenty entries per round of
replication to move one partition's records. With a session the leader remembers the
partitions and their positions: a request carries only the partitions that are new or
whose position moved, plus the ones to forget, and the answer only the partitions with
news (records, an error, a moved high watermark or log start offset). The leader's half
is ``server/fetch_session.py``; it still reads every partition of the session on each
fetch, which is what records the follower's progress on the quiet ones (ISR).

The rules are Kafka's (FetchSessionHandler.Builder.build and handleResponse):

- Without a session (epoch 0) the request is full. The answer's session id opens the
  session at epoch 1; an answer with session id 0 means the leader keeps none, and every
  request stays full.
- In a session the epoch goes up by one with each answered request (after 2^31-1 it
  wraps to 1, as the leader's does).
- A partition answered with an error is named again in the next request, in case the
  leader did not keep it (Kafka's fetcher drops such a partition from its fetches for a
  back-off and adds it back, to the same effect).
- FETCH_SESSION_ID_NOT_FOUND starts over without a session. Any other top-level error,
  an answer naming another session, or a request left unanswered (the connection failed,
  the response was unreadable) closes the session with the next request: its id with
  epoch 0, which the leader takes as "drop that session, open a new one", so the leader
  never holds positions the follower is not sure it has sent.

Sans-I/O: the fetcher asks for a request's contents and reports the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from odradek.protocol.errors import ErrorCode
from odradek.storage import TopicPartition

#: The epoch of a request that opens a session (or, with a session id, replaces it).
INITIAL_EPOCH = 0
#: The largest epoch; the next one is 1.
MAX_EPOCH = 2**31 - 1

#: What a request says about one partition (the fetcher's topic id and position); compared
#: with what the leader holds to decide whether the partition goes in the next request.
PartitionT = TypeVar("PartitionT")


@dataclass(frozen=True, slots=True)
class SessionRequest(Generic[PartitionT]):
    """The contents of the next Fetch."""

    session_id: int
    epoch: int
    #: Partitions the request names: all of them in a full request, else the new and moved.
    to_send: dict[TopicPartition, PartitionT]
    #: Partitions the leader should drop from the session (forgotten_topics_data).
    to_forget: dict[TopicPartition, PartitionT]
    #: What the leader holds once it has taken this request.
    session: dict[TopicPartition, PartitionT]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler(Generic[PartitionT]):
    """One fetcher's session with one leader."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        #: The partitions as the leader holds them for this session.
        self._held: dict[TopicPartition, PartitionT] = {}
        #: Held partitions the next request names even if they did not move.
        self._resend: set[TopicPartition] = set()

    def build(self, wanted: Mapping[TopicPartition, PartitionT]) -> SessionRequest[PartitionT]:
        """The next request for the partitions ``wanted`` now (their latest positions)."""
        session = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return SessionRequest(self.session_id, INITIAL_EPOCH, session, {}, session)
        held, resend = self._held, self._resend
        to_send = {
            tp: value for tp, value in session.items() if held.get(tp) != value or tp in resend
        }
        to_forget = {tp: value for tp, value in held.items() if tp not in session}
        return SessionRequest(self.session_id, self.epoch, to_send, to_forget, session)

    def handle_response(
        self, request: SessionRequest[PartitionT], error_code: int, session_id: int
    ) -> bool:
        """Take the answer to ``request``; False if it answers nothing (a top-level error)."""
        if error_code == ErrorCode.fetch_session_id_not_found:
            self.session_id = 0
            self._forget_session()
            return False
        if error_code != ErrorCode.none or (not request.full and session_id != self.session_id):
            self._forget_session()
            return False
        if request.full:
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == 0 else 1
        else:
            self.epoch = 1 if self.epoch == MAX_EPOCH else self.epoch + 1
        self._held = request.session if self.session_id else {}
        self._resend = set()
        return True

    def resend(self, tp: TopicPartition) -> None:
        """The leader answered ``tp`` with an error: name it in the next request again.

        A leader leaves out of its session what it could not take (a topic id it does not
        know yet, for one); left out of the next requests too, such a partition would never
        be fetched, and a session left empty is answered at once, round after round. It
        stays held meanwhile, so that a follower that stops wanting it still forgets it.
        """
        if tp in self._held:
            self._resend.add(tp)

    def handle_error(self) -> None:
        """The last request went unanswered: what the leader holds is unknown."""
        self._forget_session()

    def _forget_session(self) -> None:
        """The next request is full; with ``session_id`` set it also closes that session."""
        self.epoch = INITIAL_EPOCH
        self._held = {}
        self._resend = set()
