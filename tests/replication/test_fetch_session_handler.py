"""The follower's fetch sessions (KIP-227) against the leader's session cache.

The leader side here is the broker's own FetchSessionCache plus the session bookkeeping of
the Fetch handler (a full fetch opens a session with what it names, an incremental one
replaces what it names and drops what it forgets), so the property test checks the two
halves agree: after every answered request, what the leader holds is exactly what the
follower wanted, whatever was lost, evicted or refused on the way.
"""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.replication.fetch_session_handler import (
    INITIAL_EPOCH,
    MAX_EPOCH,
    FetchSessionHandler,
    SessionRequest,
)
from odradek.server.fetch_session import FetchSessionCache
from odradek.storage import TopicPartition

A, B, C = (TopicPartition("t", p) for p in range(3))


def answer(handler: FetchSessionHandler, request: SessionRequest, session_id: int) -> None:
    assert handler.handle_response(request, ErrorCode.none, session_id)


def test_a_full_request_opens_the_session_then_only_moved_partitions_are_sent() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    first = handler.build({A: 0, B: 0})
    assert (first.session_id, first.epoch, first.to_send, first.to_forget) == (
        0,
        INITIAL_EPOCH,
        {A: 0, B: 0},
        {},
    )
    answer(handler, first, 77)
    quiet = handler.build({A: 0, B: 0})
    assert (quiet.session_id, quiet.epoch, quiet.to_send, quiet.to_forget) == (77, 1, {}, {})
    answer(handler, quiet, 77)
    moved = handler.build({A: 5, C: 0})
    assert (moved.epoch, moved.to_send, moved.to_forget) == (2, {A: 5, C: 0}, {B: 0})
    assert moved.session == {A: 5, C: 0}


def test_without_a_session_id_every_request_stays_full() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    answer(handler, handler.build({A: 0}), 0)
    again = handler.build({A: 0})
    assert (again.session_id, again.epoch, again.to_send) == (0, INITIAL_EPOCH, {A: 0})


def test_the_epoch_wraps_to_one() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    answer(handler, handler.build({A: 0}), 5)
    handler.epoch = MAX_EPOCH
    answer(handler, handler.build({A: 0}), 5)
    assert handler.build({A: 0}).epoch == 1


def test_a_lost_session_starts_over_and_other_failures_close_it() -> None:
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    answer(handler, handler.build({A: 0}), 9)
    assert not handler.handle_response(
        handler.build({A: 1}), ErrorCode.fetch_session_id_not_found, 0
    )
    assert (handler.build({A: 1}).session_id, handler.build({A: 1}).epoch) == (0, INITIAL_EPOCH)

    for fail in (
        lambda h, r: h.handle_response(r, ErrorCode.invalid_fetch_session_epoch, 0),
        lambda h, r: h.handle_response(r, ErrorCode.none, 10),  # another session's answer
        lambda h, r: h.handle_error(),  # no answer at all
    ):
        handler = FetchSessionHandler()
        answer(handler, handler.build({A: 0}), 9)
        fail(handler, handler.build({A: 1}))
        # Full again, naming the old session so the leader closes it.
        request = handler.build({A: 1})
        assert (request.session_id, request.epoch, request.to_send) == (9, INITIAL_EPOCH, {A: 1})


def test_a_partition_answered_with_an_error_is_named_again() -> None:
    # The leader keeps out of its session a partition whose topic id it does not know yet;
    # a follower that thought it held it would send empty requests, answered at once, for ever.
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    answer(handler, handler.build({A: 0, B: 0}), 3)
    handler.resend(B)
    assert handler.build({A: 0, B: 0}).to_send == {B: 0}


class Leader:
    """The leader's half: FetchSessionCache and the Fetch handler's session bookkeeping."""

    def __init__(self) -> None:
        self.cache = FetchSessionCache(max_sessions=2)
        self.held: dict[int, OrderedDict[TopicPartition, int]] = {}

    def fetch(self, request: SessionRequest[int], unknown: set[TopicPartition]) -> tuple[int, int]:
        """(error code, session id) as the handler answers; ``unknown`` partitions are not
        taken (a topic id the leader does not know) and are answered with an error."""
        taken = OrderedDict((tp, v) for tp, v in request.to_send.items() if tp not in unknown)
        try:
            if request.epoch == INITIAL_EPOCH:
                if request.session_id:
                    self.cache.remove(request.session_id)
                session = self.cache.new_session(OrderedDict(), 0)
                self.held[session.session_id] = taken
                return ErrorCode.none, session.session_id
            session = self.cache.incremental(request.session_id, request.epoch, 0)
        except KafkaError as e:
            return e.error_code, 0
        held = self.held[session.session_id]
        held.update(taken)
        for tp in request.to_forget:
            held.pop(tp, None)
        return ErrorCode.none, session.session_id


steps = st.lists(
    st.tuples(
        st.dictionaries(st.sampled_from([A, B, C]), st.integers(0, 3), min_size=1),
        st.sampled_from(["answered", "lost request", "lost response", "evicted", "unknown B"]),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_the_leader_holds_what_the_follower_wants(steps) -> None:
    leader = Leader()
    handler: FetchSessionHandler[int] = FetchSessionHandler()
    for wanted, event in steps:
        request = handler.build(wanted)
        if event == "evicted":  # two other fetchers push this session out of the cache
            for _ in range(2):
                leader.cache.new_session(OrderedDict(), 0)
        if event == "lost request":
            handler.handle_error()
            continue
        unknown = {B} if event == "unknown B" else set()
        error_code, session_id = leader.fetch(request, unknown)
        if event == "lost response":
            handler.handle_error()
            continue
        if handler.handle_response(request, error_code, session_id):
            refused = unknown & request.to_send.keys()
            for tp in refused:
                handler.resend(tp)
            if session_id:
                # Refused partitions go again in the next request; all others are as wanted.
                held = leader.held[session_id]
                assert {tp: v for tp, v in held.items() if tp not in refused} == {
                    tp: v for tp, v in wanted.items() if tp not in refused
                }
