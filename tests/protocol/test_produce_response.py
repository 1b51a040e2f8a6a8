"""The hand-written Produce response encoder agrees byte-for-byte with kio's, every version
(v13 keys topics by id)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import schemas
from odradek.protocol.errors import ErrorCode
from odradek.protocol.produce import (
    ProducePartitionResponse,
    encode_produce_response,
    throttle_time_position,
)

names = st.text(min_size=1, max_size=20)
messages = st.one_of(st.none(), st.text(max_size=40))
partitions = st.builds(
    ProducePartitionResponse,
    index=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from(
        [
            ErrorCode.none,
            ErrorCode.invalid_record,
            ErrorCode.unknown_topic_or_partition,
            ErrorCode.invalid_timestamp,
        ]
    ),
    base_offset=st.integers(-1, 2**63 - 1),
    log_append_time_ms=st.one_of(st.just(-1), st.integers(0, 2**42)),
    log_start_offset=st.integers(-1, 2**63 - 1),
    error_message=messages,
    record_errors=st.lists(st.tuples(st.integers(0, 2**31 - 1), messages), max_size=3),
)


def kio_response(
    version: int,
    topics: list[tuple[str | uuid.UUID, list[ProducePartitionResponse]]],
    throttle_ms: int,
) -> bytes:
    module = schemas.response_module(0, version)
    return schemas.encode(
        schemas.build(
            schemas.response_schema(0, version),
            throttle_time=throttle_ms,
            responses=tuple(
                schemas.build(
                    module.TopicProduceResponse,
                    name=key,
                    topic_id=key,
                    partition_responses=tuple(
                        schemas.build(
                            module.PartitionProduceResponse,
                            index=p.index,
                            error_code=p.error_code,
                            base_offset=p.base_offset,
                            log_append_time=None
                            if p.log_append_time_ms < 0
                            else datetime.fromtimestamp(p.log_append_time_ms / 1000, tz=UTC),
                            log_start_offset=p.log_start_offset,
                            error_message=p.error_message,
                            record_errors=tuple(
                                module.BatchIndexAndErrorMessage(
                                    batch_index=i, batch_index_error_message=m
                                )
                                for i, m in p.record_errors
                            )
                            if version >= 8
                            else (),
                        )
                        for p in parts
                    ),
                )
                for key, parts in topics
            ),
        )
    )


@settings(max_examples=150, deadline=None)
@given(
    version=st.integers(3, 13),
    topics=st.lists(st.tuples(names, st.lists(partitions, max_size=4)), max_size=4),
    throttle_ms=st.integers(0, 2**31 - 1),
)
def test_produce_response_encoder_matches_kio(version, topics, throttle_ms) -> None:
    if version < 8:
        for _, parts in topics:
            for p in parts:
                p.record_errors, p.error_message = [], None  # fields these versions do not have
    if version >= 13:
        topics = [(uuid.uuid5(uuid.NAMESPACE_DNS, name), parts) for name, parts in topics]
    assert encode_produce_response(version, topics, throttle_ms) == kio_response(
        version, topics, throttle_ms
    )


@settings(max_examples=50, deadline=None)
@given(version=st.integers(3, 13), throttle_ms=st.integers(0, 2**31 - 1))
def test_throttle_time_position_finds_the_field_the_encoder_wrote(version, throttle_ms) -> None:
    parts = [ProducePartitionResponse(index=0, error_code=ErrorCode.none, base_offset=5)]
    key: str | uuid.UUID = uuid.uuid4() if version >= 13 else "t"
    body = encode_produce_response(version, [(key, parts)], throttle_ms)
    at = throttle_time_position(version, body)
    assert int.from_bytes(body[at : at + 4], "big") == throttle_ms
