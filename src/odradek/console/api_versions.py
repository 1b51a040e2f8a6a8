"""What each broker speaks, from its ApiVersions answer: the overview's "version" column.

Kafka's brokers do not state their release on the wire, and confluent-kafka keeps the
ApiVersions answer it receives to itself; so, as kafka-broker-api-versions.sh does, the
console asks each broker for ApiVersions and shows the version ranges of the APIs a user
recognizes. It opens its own plain TCP connection for this, so it is asked only when the
client configuration's ``security.protocol`` is PLAINTEXT (the default); over TLS or SASL
the column says it was not asked rather than guessing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from odradek.network.client import AsyncBrokerConnection, BrokerConnectionError
from odradek.protocol.api_keys import ApiKey

#: The APIs named in the summary, in this order.
SHOWN = (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA)


def summary(versions: Mapping[int, tuple[int, int]]) -> str:
    """``N APIs; Produce v3-v12, Fetch v4-v17, Metadata v0-v13`` for an ApiVersions answer."""
    ranges = [
        f"{key.name.title()} v{versions[key][0]}-v{versions[key][1]}"
        for key in SHOWN
        if key in versions
    ]
    return "; ".join(
        [f"{len(versions)} APIs", ", ".join(ranges)] if ranges else [f"{len(versions)} APIs"]
    )


async def _ask(host: str, port: int, timeout_s: float) -> str:
    try:
        connection = await AsyncBrokerConnection.connect(host, port, "odradek-console", timeout_s)
    except BrokerConnectionError as exc:
        return f"no answer ({exc})"
    connection.close()
    return summary(connection.versions)


async def broker_versions(
    brokers: Iterable[tuple[int, str, int]], config: Mapping[str, Any], timeout_s: float
) -> dict[int, str]:
    """The summary of each (node id, host, port), asked of all brokers at once."""
    listed = list(brokers)
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol != "PLAINTEXT":
        return {node: f"not asked over {protocol}" for node, _, _ in listed}
    answers = await asyncio.gather(*(_ask(host, port, timeout_s) for _, host, port in listed))
    return {node: answer for (node, _, _), answer in zip(listed, answers)}
