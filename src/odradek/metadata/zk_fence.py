"""The controller's fence: ZooKeeper multi-ops that commit only while their controller is current.

Kafka's zombie-controller fence: the controller remembers the version of
``/controller_epoch`` it wrote when it was elected, and every write it makes is a
multi-op whose first op checks that version. Once another broker is elected the
version moves, and a write of the old controller fails as a whole (Kafka's
ControllerMovedException). Shared by the controller's own reconciliation and by
the admin operations the controller serves (ElectLeaders).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError

from odradek.metadata import zk_layout as layout


@dataclass(frozen=True, slots=True)
class ControllerFence:
    """The epoch this controller won and the ``/controller_epoch`` version it wrote."""

    epoch: int
    zk_version: int


class ControllerMoved(RuntimeError):
    """The epoch check failed: another controller was elected since (Kafka's ControllerMovedException)."""


def fenced(client: KazooClient, fence: ControllerFence) -> TransactionRequest:
    """A multi-op that only commits while ``fence`` is the current controller's."""
    tx = client.transaction()
    tx.check(layout.CONTROLLER_EPOCH, fence.zk_version)
    return tx


def check_fence(results: list[Any]) -> None:
    """ControllerMoved if a fenced multi-op failed on its epoch check."""
    if results and isinstance(results[0], BadVersionError):
        raise ControllerMoved("/controller_epoch changed: another controller was elected")
