"""AlterClientQuotas and DescribeClientQuotas as raw kio requests: neither confluent-kafka
nor kafka-python has these Admin calls."""

from __future__ import annotations

from typing import Any

from kio.schema.alter_client_quotas.v1 import request as alter
from kio.schema.describe_client_quotas.v1 import request as describe

from tests.admin.kio_client import KioClient

#: An entity as the wire names it: entity type -> name (None: the default).
Entity = dict[str, str | None]


def alter_quotas(
    bootstrap: str,
    entries: list[tuple[Entity, dict[str, float | None]]],
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    """(error code, message) per entry; a None value removes that key."""
    request = alter.AlterClientQuotasRequest(
        entries=tuple(
            alter.EntryData(
                entity=tuple(
                    alter.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()
                ),
                ops=tuple(
                    alter.OpData(key=k, value=0.0 if v is None else v, remove=v is None)
                    for k, v in ops.items()
                ),
            )
            for entity, ops in entries
        ),
        validate_only=validate_only,
    )
    with KioClient(bootstrap) as client:
        response = client.send(request)
    return [(int(e.error_code), e.error_message) for e in response.entries]


def describe_quotas(
    bootstrap: str, components: list[tuple[str, int, str | None]], strict: bool = False
) -> Any:
    """The DescribeClientQuotas response for (entity type, match type, match) components."""
    request = describe.DescribeClientQuotasRequest(
        components=tuple(
            describe.ComponentData(entity_type=t, match_type=m, match=name)
            for t, m, name in components
        ),
        strict=strict,
    )
    with KioClient(bootstrap) as client:
        return client.send(request)


def described(response: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """A DescribeClientQuotas response's entries: entity parts -> quota values."""
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }
