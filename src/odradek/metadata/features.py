"""Feature versions (KIP-584): what this broker supports and what the cluster has finalized.

Clients read them from ApiVersions (v3+) to decide which protocol behaviours
they may use, so they must describe what is implemented, not what Kafka 4 ships:

- ``metadata.version`` 4.0-IV3 (level 25), the metadata version of Kafka 4.0,
  whose request versions this broker speaks; supported from 3.3-IV3 (level 7),
  the oldest Kafka 4 accepts.
- ``group.version`` 1: the consumer group protocol of KIP-848
  (ConsumerGroupHeartbeat) is served.
- ``transaction.version`` 2, as Kafka 4 finalizes it: KIP-890's transactions (the
  epoch bumped at every transaction's end, partitions added implicitly by their
  leaders, EndTxn v5 answering the next epoch) are served, and so are clients of
  levels 0 and 1, which keep the earlier protocol: the version is chosen per request
  (EndTxn and Produce versions), as Kafka chooses it. From level 1 the
  __transaction_state value is written in version 1 (with the client's transaction
  version); supported is 0 to 2.
- ``kraft.version`` 0: Kafka always lists it (the controller quorum's version);
  this broker has no dynamic quorum (KIP-853), so it is 0, as on a Kafka
  cluster with a static quorum.

On the wire Kafka drops every finalized feature at level 0 (a level of 0 means
"not enabled", and its ApiVersionsResponse.createFinalizedFeatureKeys omits it),
and before ApiVersions v4 it also drops supported features whose minimum is 0
(older clients fail to read them, KAFKA-17492); ``finalized_on_wire`` and
``supported_on_wire`` apply those rules, so kraft.version is finalized at 0 and
reported as Kafka reports level 0.

The features never change on a single node, so their epoch is a constant.
"""

from __future__ import annotations

from collections.abc import Mapping

METADATA_VERSION = "metadata.version"
GROUP_VERSION = "group.version"
TRANSACTION_VERSION = "transaction.version"
KRAFT_VERSION = "kraft.version"

#: Feature name -> (min level, max level) this broker supports.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (7, 25),
    GROUP_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 2),
    KRAFT_VERSION: (0, 0),
}

#: Feature name -> finalized level.
FINALIZED_FEATURES: Mapping[str, int] = {
    METADATA_VERSION: 25,
    GROUP_VERSION: 1,
    TRANSACTION_VERSION: 2,
    KRAFT_VERSION: 0,
}

#: The epoch of FINALIZED_FEATURES (Kafka: the metadata offset that last changed them).
FINALIZED_FEATURES_EPOCH = 0

#: ApiVersions v4 is the first whose readers accept a supported minimum of 0.
SUPPORTED_MIN_ZERO_SINCE = 4


def supported_on_wire(api_version: int) -> dict[str, tuple[int, int]]:
    """The supported features an ApiVersions response of ``api_version`` lists."""
    keep_zero = api_version >= SUPPORTED_MIN_ZERO_SINCE
    return {n: r for n, r in SUPPORTED_FEATURES.items() if keep_zero or r[0] != 0}


def finalized_on_wire() -> dict[str, int]:
    """The finalized features ApiVersions lists: those above level 0."""
    return {name: level for name, level in FINALIZED_FEATURES.items() if level != 0}
