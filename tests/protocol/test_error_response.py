"""Error responses built from kio's schemas: every response Kafka defines can be built and
round-trips through kio with the error in every error code field."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from kio.serial import entity_reader

from odradek.protocol import schemas
from odradek.protocol.error_response import error_response
from odradek.protocol.errors import ErrorCode


def every_response_schema() -> list[tuple[int, int]]:
    out = []
    for api_key in range(100):
        for version in range(25):
            try:
                schemas.response_schema(api_key, version)
            except schemas.UnknownApi:
                continue
            out.append((api_key, version))
    return out


def error_codes(entity) -> list[ErrorCode]:
    found = []
    for f in dataclasses.fields(entity):
        value = getattr(entity, f.name)
        if f.metadata.get("kafka_type") == "error_code":
            found.append(value)
        elif dataclasses.is_dataclass(value):
            found += error_codes(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    found += error_codes(item)
    return found


@pytest.mark.parametrize(("api_key", "version"), every_response_schema())
def test_every_schema_gets_an_error_response(api_key: int, version: int) -> None:
    schema = schemas.response_schema(api_key, version)
    response = error_response(schema, None, ErrorCode.unsupported_version)
    decoded, _ = entity_reader(schema)(schemas.encode(response), 0)
    assert decoded == response
    assert set(error_codes(decoded)) <= {ErrorCode.unsupported_version}


def test_list_offsets_repeats_the_requested_partitions() -> None:
    from kio.schema.list_offsets.v11 import request

    req = request.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        timeout=timedelta(seconds=1),
        topics=(
            request.ListOffsetsTopic(
                name="t",
                partitions=tuple(
                    request.ListOffsetsPartition(
                        partition_index=i, current_leader_epoch=5, timestamp=1234
                    )
                    for i in (0, 7)
                ),
            ),
        ),
    )
    response = error_response(schemas.response_schema(2, 11), req, ErrorCode.unsupported_version)
    assert [t.name for t in response.topics] == ["t"]
    assert [
        (p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
        for p in response.topics[0].partitions
    ] == [
        (0, ErrorCode.unsupported_version, -1, -1, -1),
        (7, ErrorCode.unsupported_version, -1, -1, -1),
    ]


def test_init_producer_id_has_no_producer() -> None:
    response = error_response(schemas.response_schema(22, 6), None, ErrorCode.unsupported_version)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.unsupported_version,
        -1,
        -1,
    )
