"""What each (user, client id) does against its quotas, and how long to throttle it.

One ``ClientQuotaManager`` per kind of quota, as Kafka has ClientQuotaManager for Produce
and Fetch bytes, ClientRequestQuotaManager for request time and
ControllerMutationQuotaManager for partition mutations: ``record`` adds what a request did
to its sensor (the rate of the entity its quota comes from, ``entity.resolve``) and answers
the throttle time when the sensor is above its bound, 0 otherwise. The value is recorded
even when it violates the quota, as Kafka's sensors do, so a client that keeps sending is
throttled until its rate is back under the bound.

Until a quota of a kind is configured anywhere, ``enabled`` is False and the server asks
nothing (Kafka's ``quotasEnabled``); with quotas configured, a request costs one dict
lookup of its (user, client id), resolved once and kept until the quotas change.

``throttled`` records the throttle time each sensor was given, which is what the
``throttle-time`` metric averages; ``byte-rate`` (or ``request-time``, ``tokens``) is the
sensor's rate. A sensor nobody recorded into for an hour is dropped, with the resolved
quotas of the clients that were seen (Kafka's InactiveSensorExpirationTimeSeconds), so a
broker that meets many short-lived client ids does not keep them all; the sweep runs when a
new sensor is made, at most once a minute.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from odradek.quota.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    MetricTags,
    QuotaEntity,
    quota_limit,
    resolve,
)
from odradek.quota.rate import Rate, TokenBucket, throttle_time_ms, token_throttle_time_ms

#: A sensor unused this long is dropped (Kafka's InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000
#: The longest between two sweeps for inactive sensors.
SWEEP_INTERVAL_MS = 60 * 1000


class QuotaType(Enum):
    """A kind of client quota: Kafka's QuotaType, its metric group and its config."""

    PRODUCE = ("Produce", PRODUCER_BYTE_RATE, "byte-rate")
    FETCH = ("Fetch", CONSUMER_BYTE_RATE, "byte-rate")
    REQUEST = ("Request", REQUEST_PERCENTAGE, "request-time")
    CONTROLLER_MUTATION = ("ControllerMutation", CONTROLLER_MUTATION_RATE, "tokens")

    def __init__(self, group: str, config: str, metric: str) -> None:
        self.group, self.config, self.metric = group, config, metric


@dataclass(slots=True)
class Sensor:
    """One (user, client id) tag pair's measurement of one kind of quota."""

    rate: Rate | TokenBucket
    #: Throttle times given and how many, over the same windows (the throttle-time average).
    throttle_sum: Rate
    throttle_count: Rate
    bound: float | None = field(default=None)
    #: When a value was last recorded (the sensor's expiry counts from it).
    last_used_ms: int = 0

    def throttle_time_avg(self, now_ms: int) -> float:
        count = self.throttle_count.total(now_ms)
        return self.throttle_sum.total(now_ms) / count if count else 0.0

    def value(self, now_ms: int) -> float:
        """The rate per second (a byte rate, a percentage), or a token bucket's tokens."""
        if isinstance(self.rate, TokenBucket):
            return self.rate.measure(self.bound or 0.0, now_ms)
        return self.rate.measure(now_ms)


class ClientQuotaManager:
    """The sensors and configured quotas of one QuotaType."""

    def __init__(
        self, kind: QuotaType, samples: int, window_seconds: int, bounded: bool = False
    ) -> None:
        self.kind = kind
        self.samples, self.window_ms = samples, window_seconds * 1000
        #: ClientRequestQuotaManager's bound on a throttle: one window.
        self._max_throttle_ms = self.window_ms if bounded else None
        self._quotas: dict[QuotaEntity, float] = {}
        self._resolved: dict[tuple[str, str], tuple[MetricTags, float | None]] = {}
        self.sensors: dict[MetricTags, Sensor] = {}
        self.enabled = False
        self._next_sweep_ms = 0

    def update(self, quotas: Mapping[QuotaEntity, float]) -> None:
        """Take this kind's configured quotas (all of them); sensors keep their history."""
        self._quotas = dict(quotas)
        self._resolved.clear()
        self.enabled = bool(self._quotas)
        for tags, sensor in self.sensors.items():
            sensor.bound = quota_limit(self._quotas, *tags)

    def quota(self, user: str, client_id: str) -> tuple[MetricTags, float | None]:
        """The tags of the sensor ``user`` and ``client_id`` record into, and its bound."""
        key = (user, client_id)
        found = self._resolved.get(key)
        if found is None:
            found = self._resolved[key] = resolve(self._quotas, user, client_id)
        return found

    def _sensor(self, tags: MetricTags, bound: float | None, now_ms: int) -> Sensor:
        sensor = self.sensors.get(tags)
        if sensor is not None:
            sensor.last_used_ms = now_ms
            return sensor
        if now_ms >= self._next_sweep_ms:
            self._sweep(now_ms)
        rate: Rate | TokenBucket
        if self.kind is QuotaType.CONTROLLER_MUTATION:
            rate = TokenBucket(self.samples, self.window_ms)
        else:
            rate = Rate(self.samples, self.window_ms)
        throttle = Rate(self.samples, self.window_ms), Rate(self.samples, self.window_ms)
        sensor = self.sensors[tags] = Sensor(rate, *throttle, bound, now_ms)
        return sensor

    def _sweep(self, now_ms: int) -> None:
        """Drop the sensors idle for INACTIVE_SENSOR_EXPIRATION_MS, and the resolved quotas."""
        self._next_sweep_ms = now_ms + SWEEP_INTERVAL_MS
        idle = [
            tags
            for tags, sensor in self.sensors.items()
            if now_ms - sensor.last_used_ms >= INACTIVE_SENSOR_EXPIRATION_MS
        ]
        for tags in idle:
            del self.sensors[tags]
        self._resolved.clear()

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record ``value``; the throttle time in ms if the sensor is now above its bound."""
        tags, bound = self.quota(user, client_id)
        sensor = self._sensor(tags, bound, now_ms)
        rate = sensor.rate
        if isinstance(rate, TokenBucket):
            if bound is None:
                return 0
            rate.record(value, bound, now_ms)
            tokens = rate.measure(bound, now_ms)
            return token_throttle_time_ms(tokens, bound) if tokens < 0 else 0
        rate.record(value, now_ms)
        if bound is None:
            return 0
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle = throttle_time_ms(measured, bound, rate.window_ms(now_ms))
        if self._max_throttle_ms is not None:
            throttle = min(throttle, self._max_throttle_ms)
        return max(throttle, 0)

    def exceeded(self, user: str, client_id: str, now_ms: int) -> int:
        """A strict controller mutation quota's check before any mutation (Kafka's
        ``checkQuotas``): the throttle time when the tokens are already spent, else 0."""
        tags, bound = self.quota(user, client_id)
        if bound is None:
            return 0
        rate = self._sensor(tags, bound, now_ms).rate
        assert isinstance(rate, TokenBucket)
        tokens = rate.measure(bound, now_ms)
        return token_throttle_time_ms(tokens, bound) if tokens < 0 else 0

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch answers no data: Kafka's
        ``unrecordQuotaSensor``)."""
        tags, bound = self.quota(user, client_id)
        rate = self._sensor(tags, bound, now_ms).rate
        assert isinstance(rate, Rate)
        rate.record(-value, now_ms)

    def throttled(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """Count a throttle time given to this sensor (its throttle-time metric)."""
        tags, bound = self.quota(user, client_id)
        sensor = self._sensor(tags, bound, now_ms)
        sensor.throttle_sum.record(throttle_ms, now_ms)
        sensor.throttle_count.record(1, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most a client may take in the windows before being throttled, None without a
        quota (Kafka's getMaxValueInQuotaWindow: the bound times ``samples - 1`` windows)."""
        bound = self.quota(user, client_id)[1]
        if bound is None:
            return None
        return bound * (self.samples - 1) * self.window_ms / 1000


class ControllerMutationQuota:
    """One request's partition mutations against its controller_mutation_rate (KIP-599).

    Strict, as Kafka's StrictControllerMutationQuota for the versions that know the error
    (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a mutation is refused
    (``record`` answers False, the topic gets THROTTLING_QUOTA_EXCEEDED) once the tokens
    are spent, and otherwise made even if it overdraws them. Permissive for older versions
    (PermissiveControllerMutationQuota): every mutation is made and the overdraft throttles.
    The throttle time left is counted from when it was decided (``throttle_time_ms``).
    """

    def __init__(
        self, manager: ClientQuotaManager, user: str, client_id: str, strict: bool
    ) -> None:
        self._manager, self._user, self._client_id = manager, user, client_id
        self.strict = strict
        self._throttle_ms = 0
        self._decided_ms = 0

    def record(self, partitions: int, now_ms: int) -> bool:
        """Count ``partitions`` mutations; False when a strict quota refuses them."""
        manager, user, client_id = self._manager, self._user, self._client_id
        if self.strict:
            spent = manager.exceeded(user, client_id, now_ms)
            if spent:
                self._throttle_ms, self._decided_ms = spent, now_ms
                return False
            manager.record(user, client_id, partitions, now_ms)
            return True
        throttle = manager.record(user, client_id, partitions, now_ms)
        if throttle:
            self._throttle_ms, self._decided_ms = throttle, now_ms
        return True

    def throttle_time_ms(self, now_ms: int) -> int:
        """The throttle time left at ``now_ms`` (Kafka's throttleTime)."""
        return max(0, self._throttle_ms - (now_ms - self._decided_ms))


class ClientQuotas:
    """The four managers of a broker, fed the configured quotas of every entity."""

    def __init__(
        self, samples: int, window_seconds: int, controller_samples: int, controller_window: int
    ) -> None:
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, samples, window_seconds)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, samples, window_seconds)
        self.request = ClientQuotaManager(QuotaType.REQUEST, samples, window_seconds, True)
        self.controller_mutation = ClientQuotaManager(
            QuotaType.CONTROLLER_MUTATION, controller_samples, controller_window
        )

    def managers(self) -> Iterator[ClientQuotaManager]:
        yield from (self.produce, self.fetch, self.request, self.controller_mutation)

    def update(self, configured: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """Take every entity's quota configs (what the metadata store holds)."""
        for manager in self.managers():
            manager.update(
                {
                    entity: values[manager.kind.config]
                    for entity, values in configured.items()
                    if manager.kind.config in values
                }
            )
