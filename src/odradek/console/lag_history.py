"""A short memory of consumer groups' total lag, for the group page's chart.

Kafka keeps no history of lag (a group's committed offsets and the log end offsets are all
there is at any moment), so the console samples it itself: a group's page, once viewed,
makes the console sample that group's total lag every ``--lag-interval-ms`` for as long as
someone looked at it within the window (15 minutes), and the page draws the samples of the
window. Only viewed groups are sampled: a cluster may have thousands of groups, each costing
an offsets request per sample, and nobody reads a chart of a group nobody opens.

Bounded memory whatever the cluster or the interval: at most ``MAX_GROUPS`` groups (the one
viewed longest ago is forgotten first) of at most ``MAX_POINTS`` samples each, and samples
older than the window are dropped. Everything lives in the console process: a restarted
console starts with empty charts, which is what "over the last minutes" can promise.

Sans-I/O: times are passed in (milliseconds), the sampling loop is the web application's.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

#: How far back the chart looks, and how long after its last view a group is sampled.
WINDOW_MS = 15 * 60 * 1000
#: Most groups remembered at once.
MAX_GROUPS = 50
#: Most samples kept per group (a 1 s interval fills the window with 900).
MAX_POINTS = 900


@dataclass(frozen=True)
class LagPoint:
    at_ms: int
    lag: int


@dataclass
class _Group:
    viewed_ms: int
    points: deque[LagPoint] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))


class LagHistory:
    """Total lag samples of the groups viewed within the window."""

    def __init__(self, window_ms: int = WINDOW_MS, max_groups: int = MAX_GROUPS) -> None:
        self.window_ms = window_ms
        self.max_groups = max_groups
        self._groups: OrderedDict[str, _Group] = OrderedDict()

    def viewed(self, group_id: str, now_ms: int, lag: int) -> None:
        """A page showed the group with ``lag``: remember it, and sample it from now on."""
        group = self._groups.get(group_id)
        if group is None:
            group = self._groups[group_id] = _Group(now_ms)
            while len(self._groups) > self.max_groups:
                self._groups.popitem(last=False)
        group.viewed_ms = now_ms
        self._groups.move_to_end(group_id)
        self.record(group_id, now_ms, lag)

    def record(self, group_id: str, now_ms: int, lag: int) -> None:
        """A sample of the group's total lag (ignored for a group no longer remembered)."""
        group = self._groups.get(group_id)
        if group is None:
            return
        if group.points and group.points[-1].at_ms > now_ms:
            return  # a clock step back: keep the points in time order
        group.points.append(LagPoint(now_ms, lag))
        self._expire(group, now_ms)

    def due(self, now_ms: int) -> list[str]:
        """The groups to sample now: those viewed within the window; the others are forgotten."""
        for group_id in [
            g for g, v in self._groups.items() if now_ms - v.viewed_ms > self.window_ms
        ]:
            del self._groups[group_id]
        return list(self._groups)

    def points(self, group_id: str, now_ms: int) -> list[LagPoint]:
        """The group's samples within the window, oldest first."""
        group = self._groups.get(group_id)
        if group is None:
            return []
        self._expire(group, now_ms)
        return list(group.points)

    def _expire(self, group: _Group, now_ms: int) -> None:
        while group.points and now_ms - group.points[0].at_ms > self.window_ms:
            group.points.popleft()
