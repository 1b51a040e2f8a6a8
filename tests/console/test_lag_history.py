"""The lag history and its chart, sans-I/O: bounded memory, the window, and where points go."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.console.lag_chart import HEIGHT, MIN_SPAN_MS, WIDTH, layout, round_up
from odradek.console.lag_history import MAX_POINTS, LagHistory, LagPoint

MINUTE = 60_000


def test_a_viewed_group_is_sampled_until_the_window_passes_without_a_view():
    history = LagHistory(window_ms=15 * MINUTE)
    assert history.due(0) == []
    history.viewed("g", 0, 7)
    history.record("g", MINUTE, 5)
    history.record("never-viewed", MINUTE, 1)  # not remembered: ignored
    assert history.due(10 * MINUTE) == ["g"]
    assert history.points("g", 10 * MINUTE) == [LagPoint(0, 7), LagPoint(MINUTE, 5)]
    assert history.points("never-viewed", MINUTE) == []
    # Samples older than the window are dropped; a group unviewed for the window is forgotten.
    assert history.points("g", 15 * MINUTE + 1) == [LagPoint(MINUTE, 5)]
    assert history.due(15 * MINUTE + 1) == []
    assert history.points("g", 15 * MINUTE + 1) == []


def test_memory_is_bounded_in_groups_and_points():
    history = LagHistory(window_ms=10**12, max_groups=3)
    for i in range(5):
        history.viewed(f"g{i}", i, i)
    history.viewed("g2", 10, 2)  # viewed again: the most recent
    assert sorted(history.due(11)) == ["g2", "g3", "g4"]
    for t in range(MAX_POINTS + 10):
        history.record("g4", 100 + t, t)
    points = history.points("g4", 10**6)
    assert len(points) == MAX_POINTS and points[-1].lag == MAX_POINTS + 9


def test_a_sample_from_before_the_last_is_ignored():
    history = LagHistory()
    history.viewed("g", 1000, 3)
    history.record("g", 500, 9)
    assert history.points("g", 1000) == [LagPoint(1000, 3)]


@given(st.integers(min_value=0, max_value=10**15))
def test_round_up_is_a_1_2_5_step_at_or_above(value):
    top = round_up(value)
    assert top >= max(value, 1)
    assert int(str(top)[0]) in (1, 2, 5) and set(str(top)[1:]) <= {"0"}
    assert top < 2.5 * max(value, 1)


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=30 * MINUTE), st.integers(0, 10**9)),
        max_size=50,
    )
)
def test_every_point_of_the_window_is_drawn_inside_the_plot(raw):
    now = 30 * MINUTE
    samples = [LagPoint(t, lag) for t, lag in sorted(raw)]
    chart = layout(samples, now, 15 * MINUTE)
    start = now - min(max(now - samples[0].at_ms, MIN_SPAN_MS), 15 * MINUTE) if samples else now
    assert [p.lag for p in chart.points] == [s.lag for s in samples if s.at_ms >= start]
    for p in chart.points:
        assert chart.left <= p.x <= chart.right <= WIDTH
        assert chart.top <= p.y <= chart.bottom <= HEIGHT
    assert chart.y_max >= max((p.lag for p in chart.points), default=0)
    xs = [p.x for p in chart.points]
    assert xs == sorted(xs)
    assert (chart.line == "") == (len(chart.points) < 2)


def test_the_largest_lag_reaches_the_top_and_zero_the_bottom():
    chart = layout([LagPoint(0, 0), LagPoint(MINUTE, 50)], MINUTE, 15 * MINUTE)
    low, high = chart.points
    assert (chart.y_max, low.y, high.y) == (50, chart.bottom, chart.top)
    assert (low.x, high.x) == (chart.left, chart.right)
    assert high.label == "00:01:00 UTC: lag 50"
