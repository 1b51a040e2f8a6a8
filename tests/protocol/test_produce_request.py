"""The Produce request decoder reads struct fields directly; every cut of a valid body is refused.

From v13 topics are named by id: the decoder returns the id and an empty name.
"""

from __future__ import annotations

import io
import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from odradek.protocol import schemas
from odradek.protocol.produce import decode_produce_request

names = st.text(min_size=1, max_size=8)


def body(
    version: int,
    transactional_id: str | None,
    topics: list[tuple[str, list[tuple[int, bytes | None]]]],
) -> bytes:
    module = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    request = module.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout=timedelta(milliseconds=30000),
        topic_data=tuple(
            schemas.build(
                module.TopicProduceData,
                name=name,
                topic_id=topic_id(name),
                partition_data=tuple(
                    module.PartitionProduceData(index=i, records=r) for i, r in parts
                ),
            )
            for name, parts in topics
        ),
    )
    buf = io.BytesIO()
    entity_writer(type(request))(buf, request)
    return buf.getvalue()


def topic_id(name: str) -> uuid.UUID:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


@settings(max_examples=40, deadline=None)
@given(
    version=st.integers(3, 13),
    transactional_id=st.one_of(st.none(), names),
    topics=st.lists(
        st.tuples(
            names,
            st.lists(
                st.tuples(st.integers(0, 99), st.one_of(st.none(), st.binary(max_size=40))),
                max_size=2,
            ),
        ),
        max_size=2,
    ),
)
def test_every_truncation_is_a_value_error(version, transactional_id, topics) -> None:
    data = body(version, transactional_id, topics)
    decoded = decode_produce_request(version, memoryview(data))
    by_id = version >= 13
    assert [
        (
            (t.topic_id, t.name) if by_id else (t.name, t.topic_id),
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partitions],
        )
        for t in decoded.topics
    ] == [((topic_id(name), "") if by_id else (name, None), parts) for name, parts in topics]
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            decode_produce_request(version, memoryview(data[:cut]))


def test_records_are_views_of_the_frame_not_copies() -> None:
    data = body(9, None, [("t", [(0, b"batch bytes")])])
    frame = memoryview(data)
    records = decode_produce_request(9, frame).topics[0].partitions[0].records
    assert isinstance(records, memoryview) and records.obj is frame.obj


def test_v13_topic_id_is_read_in_place_of_the_name() -> None:
    data = body(13, "tx", [("orders", [(4, b"batch")])])
    topic = decode_produce_request(13, memoryview(data)).topics[0]
    assert (topic.name, topic.topic_id) == ("", topic_id("orders"))
    assert [(p.index, bytes(p.records)) for p in topic.partitions] == [(4, b"batch")]
