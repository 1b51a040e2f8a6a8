"""RequestContext: what every API handler gets besides its request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.network.listener import ConnectionInfo
from odradek.protocol.header import RequestHeader

if TYPE_CHECKING:
    from odradek.server.broker import Broker


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request's surroundings.

    ``broker`` gives handlers the broker's parts (``broker.config``,
    ``broker.metadata``, ``broker.log_manager``, ``broker.replica_manager``,
    ``broker.fetch_purgatory``, coordinators); ``connection`` the peer;
    ``header`` the parsed request header; ``now_ms`` the wall clock at the
    moment the request was read, so one request sees one time.
    """

    broker: Broker
    connection: ConnectionInfo
    header: RequestHeader
    api_version: int
    now_ms: int
