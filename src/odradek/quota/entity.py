"""Quota entities, quota configs, and which configured quota applies to a connection.

An entity is Kafka's ClientQuotaEntity for users and client ids: a user, a client id, or a
user and a client id together, where either name may be the default (``DEFAULT``, null on
the wire, ``<default>`` in ZooKeeper) that applies to every user or client id without a
quota of its own. Its quota configs are Kafka's four: ``producer_byte_rate`` and
``consumer_byte_rate`` (bytes a second, integers), ``request_percentage`` (percent of one
request handler's time a second) and ``controller_mutation_rate`` (partitions created or
deleted a second).

A connection's quota of one kind comes from the first of these that sets it (Kafka's
"Quotas" precedence, DefaultQuotaCallback):

1. ``/config/users/<user>/clients/<client-id>``
2. ``/config/users/<user>/clients/<default>``
3. ``/config/users/<user>``
4. ``/config/users/<default>/clients/<client-id>``
5. ``/config/users/<default>/clients/<default>``
6. ``/config/users/<default>``
7. ``/config/clients/<client-id>``
8. ``/config/clients/<default>``

and the entity that sets it also decides who shares the measurement (Kafka's quota metric
tags): a quota of a user alone (3, 6) is shared by all that user's client ids, one of a
client id alone (7, 8) by all users of that client id, the others are per user and client
id. ``resolve`` returns both, as the key of the rate to record into and the bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Literal


class _Default(Enum):
    DEFAULT = "<default>"


#: The default entity name: the quota of every user (or client id) without one of its own.
DEFAULT: Final = _Default.DEFAULT
#: A user's or client id's name in an entity: a name, or DEFAULT.
EntityName = str | Literal[_Default.DEFAULT]

USER = "user"
CLIENT_ID = "client-id"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: Kafka's quota configs of users and client ids, and whether each takes integers only
#: (LONG in Kafka's QuotaConfig) or any positive number (DOUBLE).
QUOTA_CONFIGS: Final[Mapping[str, bool]] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}


class InvalidQuota(ValueError):
    """An entity or quota value Kafka answers INVALID_REQUEST."""


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Who a quota is for; None where the entity does not name that part."""

    user: EntityName | None = None
    client_id: EntityName | None = None

    @classmethod
    def from_wire(cls, parts: Mapping[str, str | None]) -> QuotaEntity:
        """From AlterClientQuotas' and DescribeClientQuotas' (type -> name, None: default)."""
        unknown = set(parts) - {USER, CLIENT_ID}
        if unknown or not parts:
            raise InvalidQuota("Invalid client quota entity")
        user, client = parts.get(USER, ""), parts.get(CLIENT_ID, "")
        return cls(
            None if USER not in parts else DEFAULT if user is None else user,
            None if CLIENT_ID not in parts else DEFAULT if client is None else client,
        )

    def to_wire(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for kind, name in ((USER, self.user), (CLIENT_ID, self.client_id)):
            if name is not None:
                out[kind] = None if name is DEFAULT else name
        return out

    def __str__(self) -> str:
        return ", ".join(
            f"{kind}={'<default>' if name is None else name!r}"
            for kind, name in self.to_wire().items()
        )


def validate_value(key: str, value: float) -> float:
    """The value Kafka stores for ``key``: InvalidQuota for an unknown key, a fraction where
    the key takes integers, or a value that is not a positive number."""
    integral = QUOTA_CONFIGS.get(key)
    if integral is None:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuota(f"Configuration {key} must be a positive number, not {value}")
    if integral:
        whole = math.floor(value + 1e-6)
        if abs(whole - value) > 1e-6:
            raise InvalidQuota(f"Configuration {key} must be a LONG value")
        return float(whole)
    return value


#: (user, client id) as a rate is kept and reported: "" where the quota's entity leaves a
#: part out (Kafka's quota metric tags).
MetricTags = tuple[str, str]


def resolve(
    quotas: Mapping[QuotaEntity, float], user: str, client_id: str
) -> tuple[MetricTags, float | None]:
    """(the tags of the rate to record into, the bound or None) for one kind of quota.

    Kafka's DefaultQuotaCallback: the tags come from the most specific entity that sets a
    quota (``quotaMetricTags``), then the bound is looked up from those tags
    (``quotaLimit``), both along the precedence of the module docstring.
    """
    u, c, d = user, client_id, DEFAULT
    tags: MetricTags
    if QuotaEntity(u, c) in quotas or QuotaEntity(u, d) in quotas:
        tags = (u, c)
    elif QuotaEntity(u) in quotas:
        tags = (u, "")
    elif QuotaEntity(d, c) in quotas or QuotaEntity(d, d) in quotas:
        tags = (u, c)
    elif QuotaEntity(d) in quotas:
        tags = (u, "")
    else:
        tags = ("", c)
    return tags, quota_limit(quotas, *tags)


def quota_limit(quotas: Mapping[QuotaEntity, float], user: str, client_id: str) -> float | None:
    """The bound of the sensor tagged (``user``, ``client_id``): Kafka's quotaLimit."""
    d = DEFAULT
    if user and client_id:
        order = [QuotaEntity(user, client_id), QuotaEntity(user, d)]
        order += [QuotaEntity(d, client_id), QuotaEntity(d, d)]
    elif user:
        order = [QuotaEntity(user), QuotaEntity(d)]
    elif client_id:
        order = [QuotaEntity(client_id=client_id), QuotaEntity(client_id=d)]
    else:
        return None
    for entity in order:
        bound = quotas.get(entity)
        if bound is not None:
            return bound
    return None
