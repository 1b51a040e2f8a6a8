"""RequestContext: what every API handler gets besides its request.

Handlers see the broker through ``BrokerServices``, the parts they may use,
rather than through the Broker class: the Broker builds the RequestChannel
that builds contexts, so naming the class here would close an import circle
(broker -> request_channel -> context -> broker). Broker satisfies the
protocol structurally; a test or a future node type can too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from odradek.metadata.store import MetadataStore
from odradek.metrics.stats import BrokerTopicStats, RequestMetrics
from odradek.network.listener import ConnectionInfo
from odradek.protocol.header import RequestHeader
from odradek.quota.manager import ClientQuotas
from odradek.replication.purgatory import Purgatory
from odradek.replication.replica_manager import ReplicaManager
from odradek.server.config import BrokerConfig
from odradek.server.fetch_session import FetchSessionCache
from odradek.storage import LogManager

if TYPE_CHECKING:
    from odradek.server.authorization import Authorizer


class BrokerServices(Protocol):
    """The parts of a running broker that request handling uses."""

    config: BrokerConfig
    log_manager: LogManager
    replica_manager: ReplicaManager
    fetch_purgatory: Purgatory
    fetch_sessions: FetchSessionCache
    #: Started components by name (server/components.py), e.g. "group_coordinator".
    components: dict[str, Any]
    node_id: int
    #: None: every operation is allowed (Kafka without authorizer.class.name).
    authorizer: Authorizer | None
    #: BrokerTopicMetrics counters, updated by the Produce and Fetch handlers.
    topic_stats: BrokerTopicStats
    #: RequestMetrics by API and version; None when metrics are off (nothing is timed).
    request_metrics: RequestMetrics | None
    #: The client quota managers, fed the configured quotas by the metadata store.
    client_quotas: ClientQuotas

    @property
    def metadata(self) -> MetadataStore:
        """A read-only member, so the single node's store and a cluster's both satisfy it."""

    @property
    def advertised(self) -> tuple[str, int]: ...

    def advertised_endpoint(self, listener_name: str) -> tuple[str, int] | None: ...


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request's surroundings.

    ``broker`` gives handlers the broker's parts (``broker.config``,
    ``broker.metadata``, ``broker.log_manager``, ``broker.replica_manager``,
    ``broker.fetch_purgatory``, coordinators); ``connection`` the peer;
    ``header`` the parsed request header; ``now_ms`` the wall clock at the
    moment the request was read, so one request sees one time.
    """

    broker: BrokerServices
    connection: ConnectionInfo
    header: RequestHeader
    api_version: int
    now_ms: int
