"""MemoryPool (queued.max.request.bytes): muting while exhausted, resuming on release, and the pass
that lets partly received requests finish instead of waiting for each other."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.network.memory_pool import MemoryPool


class Member:
    """A connection as the pool sees it: whether it holds part of a request, and whether it is muted."""

    def __init__(self, partial: bool = True) -> None:
        self.partial = partial
        self.muted = False

    def resume(self) -> None:
        assert self.muted
        self.muted = False


def mute(pool: MemoryPool, member: Member) -> None:
    member.muted = True
    pool.mute(member)


def test_unbounded_pool_is_never_exhausted() -> None:
    pool = MemoryPool(-1)
    pool.used += 10**12
    assert not pool.exhausted


def test_exhausted_at_its_size_and_muted_connections_resume_when_memory_frees() -> None:
    pool = MemoryPool(100)
    pool.used += 99
    assert not pool.exhausted
    pool.used += 1
    assert pool.exhausted
    holder, a, b = Member(), Member(partial=False), Member(partial=False)
    assert pool.may_read(holder)  # in the middle of a request: it takes the pass
    assert not pool.may_read(a)
    mute(pool, a)
    mute(pool, b)
    assert pool.muted == 2
    pool.release(1)
    assert not pool.exhausted
    assert not a.muted and not b.muted and pool.muted == 0


def test_the_pass_goes_to_the_longest_muted_partial_request_in_turn() -> None:
    pool = MemoryPool(100)
    pool.used += 150
    first, idle, second, third = Member(), Member(partial=False), Member(), Member()
    assert pool.may_read(first)
    assert pool.may_read(first)  # it keeps the pass until its request is complete
    for member in (idle, second, third):
        assert not pool.may_read(member)
        mute(pool, member)
    pool.request_completed(first)
    assert not second.muted and idle.muted and third.muted
    assert pool.may_read(second) and not pool.may_read(first)
    pool.leave(second)  # the holder closed: the pass moves on
    assert not third.muted and idle.muted
    pool.request_completed(idle)  # not the holder: nothing changes
    assert pool.may_read(third) and idle.muted


def test_a_release_that_leaves_the_pool_exhausted_hands_out_the_pass() -> None:
    pool = MemoryPool(100)
    pool.used += 120
    waiting, done = Member(), Member(partial=False)
    mute(pool, done)
    mute(pool, waiting)
    # Nobody held the pass when ``waiting`` was muted: it got it at once.
    assert not waiting.muted
    assert pool.may_read(waiting)
    pool.leave(waiting)
    pool.release(10)
    assert pool.exhausted and done.muted


@settings(max_examples=200, deadline=None)
@given(
    capacity=st.integers(1, 5000),
    requests=st.lists(
        st.lists(st.integers(1, 3000), min_size=1, max_size=4), min_size=1, max_size=8
    ),
    chunk=st.integers(1, 1000),
    order=st.randoms(use_true_random=False),
)
def test_every_request_completes_and_usage_stays_within_one_request_of_the_pool(
    capacity: int, requests: list[list[int]], chunk: int, order
) -> None:
    """Connections receive their requests a chunk at a time, in any order, as the listener does:
    each read is charged, a complete request is handled (released) at once, a connection that may
    not read is muted. No set of partly received requests ever waits forever, and usage never
    passes the pool's size by more than one request and the reads under way."""
    pool = MemoryPool(capacity)

    class Connection(Member):
        def __init__(self, sizes: list[int]) -> None:
            super().__init__(partial=False)
            self.sizes = list(sizes)
            self.got = 0

    connections = [Connection(sizes) for sizes in requests]
    peak = 0
    for _ in range(100_000):
        ready = [c for c in connections if c.sizes and not c.muted]
        if not ready:
            break
        c = order.choice(ready)
        n = min(chunk, c.sizes[0] - c.got)
        c.got += n
        c.partial = True
        pool.used += n
        peak = max(peak, pool.used)
        if c.got == c.sizes[0]:
            size = c.sizes.pop(0)
            c.got, c.partial = 0, False
            pool.request_completed(c)
            pool.release(size)
        if pool.exhausted and not pool.may_read(c):
            mute(pool, c)
    assert all(not c.sizes for c in connections), "requests left waiting for memory forever"
    assert pool.used == 0 and pool.muted == 0
    assert peak <= capacity + max(max(r) for r in requests) + chunk * len(connections)
