"""Broker components started after the replicas and before the listeners (coordinators...).

Each entry is "name": "module:factory"; ``factory(broker)`` returns an object
with ``async start()`` and ``async stop()``. The broker starts them in this
order, stops them in reverse, and exposes them as ``broker.components[name]``,
so a room adds its coordinator with one line here and no change to Broker.
"""

from __future__ import annotations

COMPONENTS: dict[str, str] = {
    "dynamic_broker_configs": "odradek.server.handlers.configs:DynamicBrokerConfigs",
    "dynamic_listener_config": "odradek.server.dynamic_listener_config:DynamicListenerConfig",
    "producer_ids": "odradek.server.handlers.producer_ids:ProducerIds",
    "group_coordinator": "odradek.coordinator.service:GroupCoordinatorService",
    "transaction_coordinator": (
        "odradek.coordinator.transaction.service:TransactionCoordinatorService"
    ),
    "add_partitions_to_txn": (
        "odradek.server.add_partitions_to_txn_manager:AddPartitionsToTxnManager"
    ),
    # Last: it reports on the components before it; serves only with metrics.http.listener.
    "metrics": "odradek.metrics.service:MetricsService",
}
