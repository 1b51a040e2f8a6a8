"""Old change notifications are deleted, as Kafka's ZkNodeChangeNotificationListener does.

Config and ACL changes are announced by persistent sequential znodes
(``/config/changes/config_change_N``, ``/kafka-acl-changes/acl_changes_N`` and its extended
twin). A notification is only needed while brokers catch up with it: one that starts later
reads the configs and ACLs themselves. Kafka's listener therefore deletes, each time it has
processed a change path's children, those created more than 15 minutes (its
``changeExpirationMs``) before now; without that a path grows by one znode per change for
ever, and the children list every watch reads grows with it.

Every broker purges the ACL change paths after processing them, as in Kafka (two brokers
deleting the same znode is harmless: the second finds it gone). Brokers here read
``/config/changes`` only to find new ``users/<user>/clients/<client-id>`` znodes (they watch
the config znodes themselves, see zk_store), so that path is purged by the broker that adds
a notification to it, which bounds it just the same.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

#: How old a notification is when it is deleted (Kafka's changeExpirationMs, 15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def purge_obsolete_notifications(
    client: KazooClient, path: str, children: Iterable[str], now_ms: float | None = None
) -> list[str]:
    """Delete the notifications among ``children`` of ``path`` that have expired; their names.

    Sequential names sort in creation order (ZooKeeper pads the counter to ten digits), so
    the oldest are looked at first and the first young one ends the walk: a purge costs a
    read per expired notification plus one, not one per notification of the last 15 minutes.
    """
    now = time.time() * 1000 if now_ms is None else now_ms
    purged = []
    for child in sorted(children):
        node = f"{path}/{child}"
        stat = client.exists(node)
        if stat is None:
            continue
        if now - stat.ctime <= CHANGE_EXPIRATION_MS:
            break
        try:
            client.delete(node)
        except NoNodeError:  # another broker purged it first
            continue
        purged.append(child)
    return purged
