"""Kafka's quota measurements: the windowed ``Rate`` and the controller's ``TokenBucket``.

``Rate`` is Kafka's ``Rate`` over a ``SampledStat``: ``quota.window.num`` samples of
``quota.window.size.seconds`` each; a value goes into the current sample, a sample older
than all the windows together is reset before it is read, and the rate is the samples' sum
over the time they span, counted as at least ``num - 1`` whole windows (so a client's first
second is not measured over one second alone and throttled for a burst). Recording a
negative value takes it back (Kafka's ``unrecordQuotaSensor``, a throttled fetch).

``throttle_time_ms`` is Kafka's ``QuotaUtils.throttleTime``: how long the client must stay
silent for the rate to come back to the bound, ``(value - bound) / bound * window``;
``ClientRequestQuotaManager`` bounds it by one window (``boundedThrottleTime``).

``TokenBucket`` is KIP-599's measure of controller mutations: it refills at the quota's
rate up to a burst of ``num * size`` seconds of it, each mutation takes tokens, and a
negative balance is a violation whose throttle time is the time the bucket needs to come
back to zero.
"""

from __future__ import annotations


class Rate:
    """Kafka's ``Rate`` (per second) over ``samples`` windows of ``window_ms``."""

    __slots__ = ("_current", "_num", "_samples", "_starts", "_window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self._num, self._window_ms = samples, window_ms
        #: Each sample's sum and the start of its window (Kafka's Sample.value, lastWindowMs).
        self._samples: list[float] = []
        self._starts: list[int] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        """Kafka's SampledStat.record: into the current window, a new one when it is full."""
        if not self._samples:
            self._samples.append(0.0)
            self._starts.append(now_ms)
        elif now_ms - self._starts[self._current] >= self._window_ms:
            self._current = (self._current + 1) % self._num
            if self._current >= len(self._samples):
                self._samples.append(0.0)
                self._starts.append(now_ms)
            else:
                self._samples[self._current], self._starts[self._current] = 0.0, now_ms
        self._samples[self._current] += value

    def _purge(self, now_ms: int) -> None:
        expire = self._num * self._window_ms
        for i, start in enumerate(self._starts):
            if now_ms - start >= expire:
                self._samples[i], self._starts[i] = 0.0, now_ms

    def window_ms(self, now_ms: int) -> float:
        """Kafka's Rate.windowSize: the time the samples span, at least ``samples - 1`` windows."""
        self._purge(now_ms)
        oldest = min(self._starts, default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self._window_ms
        if full < self._num - 1:
            elapsed += (self._num - 1 - full) * self._window_ms
        return float(max(elapsed, 1))

    def total(self, now_ms: int) -> float:
        """The sum of the samples still inside the windows (Kafka's SampledStat.measure)."""
        self._purge(now_ms)
        return sum(self._samples)

    def measure(self, now_ms: int) -> float:
        """The rate per second at ``now_ms``."""
        window = self.window_ms(now_ms)
        return sum(self._samples) / (window / 1000.0)


def throttle_time_ms(value: float, bound: float, window_ms: float) -> int:
    """Kafka's QuotaUtils.throttleTime: long enough for ``value`` to fall back to ``bound``."""
    return round((value - bound) / bound * window_ms)


class TokenBucket:
    """Kafka's TokenBucket: ``rate`` tokens a second, at most ``samples * window`` seconds' worth."""

    __slots__ = ("_last_ms", "_num", "_tokens", "_window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self._num, self._window_ms = samples, window_ms
        self._tokens = 0.0
        self._last_ms = 0

    def _refill(self, rate: float, now_ms: int) -> None:
        burst = self._num * self._window_ms / 1000.0 * rate
        self._tokens = min(burst, self._tokens + rate * (now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms

    def measure(self, rate: float, now_ms: int) -> float:
        """The tokens left; below zero the quota is exceeded."""
        self._refill(rate, now_ms)
        return self._tokens

    def record(self, value: float, rate: float, now_ms: int) -> None:
        self._refill(rate, now_ms)
        self._tokens -= value


def token_throttle_time_ms(tokens: float, rate: float) -> int:
    """Kafka's ControllerMutationQuotaManager.throttleTimeMs: time to refill a negative balance."""
    return round(-tokens / rate * 1000)
