"""The sans-I/O quota core: Kafka's precedence of quota entities, its Rate windows and its
throttle times, and the managers' recording."""

from __future__ import annotations

import pytest

from odradek.quota.entity import (
    DEFAULT,
    InvalidQuota,
    QuotaEntity,
    resolve,
    validate_value,
)
from odradek.quota.manager import (
    ClientQuotaManager,
    ClientQuotas,
    ControllerMutationQuota,
    QuotaType,
)
from odradek.quota.rate import Rate, TokenBucket, throttle_time_ms

D = DEFAULT

#: Kafka's eight levels, most specific first, each with a bound of its own.
LEVELS = [
    (QuotaEntity("alice", "app"), ("alice", "app")),
    (QuotaEntity("alice", D), ("alice", "app")),
    (QuotaEntity("alice"), ("alice", "")),
    (QuotaEntity(D, "app"), ("alice", "app")),
    (QuotaEntity(D, D), ("alice", "app")),
    (QuotaEntity(D), ("alice", "")),
    (QuotaEntity(client_id="app"), ("", "app")),
    (QuotaEntity(client_id=D), ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_configured_entity_wins(level):
    """With every level from ``level`` down configured, the quota and the sensor's tags come
    from ``level``: removing the more specific ones one by one walks down Kafka's order."""
    quotas = {entity: float(i + 1) for i, (entity, _) in enumerate(LEVELS) if i >= level}
    tags, bound = resolve(quotas, "alice", "app")
    assert bound == level + 1
    assert tags == LEVELS[level][1]


def test_no_quota_for_an_unconfigured_pair():
    assert resolve({QuotaEntity("bob"): 5.0}, "alice", "app") == (("", "app"), None)


def test_a_user_quota_is_shared_by_the_users_client_ids():
    manager = ClientQuotaManager(QuotaType.PRODUCE, 11, 1)
    manager.update({QuotaEntity("alice"): 1000.0})
    manager.record("alice", "one", 6000, 0)
    manager.record("alice", "two", 6000, 0)
    assert list(manager.sensors) == [("alice", "")]
    # 12,000 bytes over the minimum span of ten windows: 1,200 B/s against 1,000.
    assert manager.record("alice", "three", 0, 0) == throttle_time_ms(1200, 1000, 10_000)


def test_rate_counts_at_least_num_minus_one_windows():
    rate = Rate(11, 1000)
    rate.record(10_000, 0)
    assert rate.window_ms(0) == 10_000
    assert rate.measure(0) == 1000
    # 5 s later both samples count, over the minimum span still.
    rate.record(5_000, 5_000)
    assert rate.measure(5_000) == 1500
    # 15 s after the first, only the second is kept: over 10 s.
    assert rate.measure(15_000) == 500
    assert rate.window_ms(15_000) == 10_000


def test_old_samples_expire_after_all_windows():
    rate = Rate(3, 1000)
    rate.record(100, 0)
    rate.record(100, 1000)
    assert rate.total(1500) == 200
    assert rate.total(3000) == 100  # the first window started 3 s ago: reset
    assert rate.total(4000) == 0


def test_throttle_time_is_kafkas_formula():
    """QuotaUtils.throttleTime: (value - bound) / bound * window."""
    assert throttle_time_ms(1500, 1000, 10_000) == 5000
    assert throttle_time_ms(1001, 1000, 10_000) == 10


def test_a_client_that_keeps_to_its_quota_is_never_throttled():
    manager = ClientQuotaManager(QuotaType.PRODUCE, 11, 1)
    manager.update({QuotaEntity(client_id=D): 1000.0})
    throttles = [manager.record("u", "c", 90, t * 100) for t in range(300)]
    assert throttles == [0] * 300


def test_a_client_over_its_quota_is_throttled_until_its_rate_is_back():
    manager = ClientQuotaManager(QuotaType.PRODUCE, 11, 1)
    manager.update({QuotaEntity(client_id="c"): 1000.0})
    throttle = manager.record("u", "c", 20_000, 0)
    assert throttle == 10_000  # 2,000 B/s over ten windows is 10 s of silence
    # As in Kafka the sample counts until all windows have passed over it.
    assert manager.record("u", "c", 0, 11_000) == 0


def test_request_quota_throttle_is_bounded_by_one_window():
    manager = ClientQuotaManager(QuotaType.REQUEST, 11, 1, bounded=True)
    manager.update({QuotaEntity("u"): 1.0})
    assert manager.record("u", "c", 500, 0) == 1000


def test_unrecord_takes_a_value_back():
    manager = ClientQuotaManager(QuotaType.FETCH, 11, 1)
    manager.update({QuotaEntity("u"): 1000.0})
    assert manager.record("u", "c", 50_000, 0) > 0
    manager.unrecord("u", "c", 50_000, 0)
    assert manager.record("u", "c", 0, 0) == 0


def test_disabled_until_a_quota_of_its_kind_exists():
    quotas = ClientQuotas(11, 1, 11, 1)
    assert not any(m.enabled for m in quotas.managers())
    quotas.update({QuotaEntity("u"): {"consumer_byte_rate": 10.0}})
    assert [m.enabled for m in quotas.managers()] == [False, True, False, False]
    assert quotas.fetch.max_value_in_window("u", "x") == 100.0
    assert quotas.produce.max_value_in_window("u", "x") is None


def test_changed_quotas_apply_to_the_next_request():
    manager = ClientQuotaManager(QuotaType.PRODUCE, 11, 1)
    manager.update({QuotaEntity("u"): 1000.0})
    assert manager.record("u", "c", 15_000, 0) > 0
    manager.update({QuotaEntity("u"): 1_000_000.0})
    assert manager.record("u", "c", 0, 0) == 0


def test_token_bucket_strict_and_permissive():
    """KIP-599: the bucket starts full (burst = samples * window * rate); a mutation past
    it leaves a debt that throttles for the time it takes to refill."""
    manager = ClientQuotaManager(QuotaType.CONTROLLER_MUTATION, 11, 1)
    manager.update({QuotaEntity("u"): 2.0})
    assert manager.exceeded("u", "c", 100_000) == 0
    assert manager.record("u", "c", 22, 100_000) == 0  # the whole burst
    assert manager.record("u", "c", 4, 100_000) == 2000
    assert manager.exceeded("u", "c", 101_000) == 1000
    assert manager.exceeded("u", "c", 102_000) == 0
    bucket = TokenBucket(1, 1000)
    assert bucket.measure(5.0, 10_000) == 5.0


@pytest.mark.parametrize(
    ("key", "value", "stored"),
    [
        ("producer_byte_rate", 1024.0, 1024.0),
        ("consumer_byte_rate", 2048.0000001, 2048.0),
        ("request_percentage", 12.5, 12.5),
        ("controller_mutation_rate", 0.5, 0.5),
    ],
)
def test_valid_values(key, value, stored):
    assert validate_value(key, value) == stored


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("producer_byte_rate", 10.5),
        ("consumer_byte_rate", -1.0),
        ("request_percentage", float("nan")),
        ("no_such_quota", 1.0),
        ("SCRAM-SHA-256", 1.0),
    ],
)
def test_invalid_values(key, value):
    with pytest.raises(InvalidQuota):
        validate_value(key, value)


def test_entity_from_and_to_the_wire():
    assert QuotaEntity.from_wire({"user": None, "client-id": "x"}) == QuotaEntity(D, "x")
    assert QuotaEntity(D, "x").to_wire() == {"user": None, "client-id": "x"}
    for bad in ({}, {"ip": "1.2.3.4"}, {"user": "a", "group": "g"}):
        with pytest.raises(InvalidQuota):
            QuotaEntity.from_wire(bad)


def test_controller_mutation_quota_strict_refuses_permissive_throttles():
    manager = ClientQuotaManager(QuotaType.CONTROLLER_MUTATION, 2, 1)
    manager.update({QuotaEntity(client_id="c"): 1.0})
    strict = ControllerMutationQuota(manager, "u", "c", strict=True)
    assert strict.record(2, 10_000)  # the whole burst
    assert strict.record(1, 10_000)  # not yet overdrawn: made, and overdraws
    assert not strict.record(1, 10_000)
    assert strict.throttle_time_ms(10_000) == 1000
    assert strict.throttle_time_ms(10_400) == 600  # counted from when it was decided
    permissive = ControllerMutationQuota(manager, "u", "c", strict=False)
    assert permissive.record(3, 10_000)
    assert permissive.throttle_time_ms(10_000) == 4000


def test_idle_sensors_expire_after_an_hour():
    """Kafka's InactiveSensorExpirationTimeSeconds: a client id seen once is not kept."""
    manager = ClientQuotaManager(QuotaType.PRODUCE, 11, 1)
    manager.update({QuotaEntity(client_id=D): 1000.0})
    manager.record("u", "once", 10, 0)
    manager.record("u", "busy", 10, 0)
    manager.record("u", "busy", 10, 3_000_000)
    manager.record("u", "new", 10, 3_600_000)  # a new sensor sweeps: "once" is an hour idle
    assert set(manager.sensors) == {("", "busy"), ("", "new")}
