"""The hand-written hot-path codecs agree byte-for-byte with kio's generated ones."""

from __future__ import annotations

import io
import os
import tempfile
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from odradek.protocol import schemas
from odradek.protocol.fetch import (
    FetchPartitionResponse,
    FetchTopicResponse,
    encode_fetch_response,
)
from odradek.protocol.produce import decode_produce_request

names = st.text(alphabet="abcXYZ019._-", min_size=1, max_size=20)
blobs = st.one_of(st.none(), st.binary(max_size=300))


def _kio_bytes(entity) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    version=st.integers(3, 13),
    transactional_id=st.one_of(st.none(), names),
    acks=st.sampled_from([-1, 0, 1]),
    topics=st.lists(
        st.tuples(names, st.lists(st.tuples(st.integers(0, 2**31 - 1), blobs), max_size=4)),
        max_size=4,
    ),
)
def test_produce_request_decoder_matches_kio(version, transactional_id, acks, topics) -> None:
    module = __import__(f"kio.schema.produce.v{version}.request", fromlist=["x"])
    request = module.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=timedelta(milliseconds=1500),
        topic_data=tuple(
            schemas.build(
                module.TopicProduceData,
                name=name,
                topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
                partition_data=tuple(
                    module.PartitionProduceData(index=i, records=r) for i, r in parts
                ),
            )
            for name, parts in topics
        ),
    )
    body = memoryview(_kio_bytes(request))
    ours = decode_produce_request(version, body)
    theirs = schemas.decode_request(0, version, body.tobytes())
    assert ours.transactional_id == theirs.transactional_id
    assert ours.acks == theirs.acks
    assert ours.timeout_ms == theirs.timeout.total_seconds() * 1000
    assert [
        (
            t.name or t.topic_id,
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partitions],
        )
        for t in ours.topics
    ] == [
        (
            getattr(t, "name", None) or t.topic_id,
            [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data],
        )
        for t in theirs.topic_data
    ]


def test_produce_request_decoder_rejects_truncated_body() -> None:
    module = __import__("kio.schema.produce.v9.request", fromlist=["x"])
    request = module.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=timedelta(seconds=1),
        topic_data=(
            module.TopicProduceData(
                name="t", partition_data=(module.PartitionProduceData(index=0, records=b"x" * 50),)
            ),
        ),
    )
    body = _kio_bytes(request)
    with pytest.raises(ValueError):
        decode_produce_request(9, memoryview(body[:-10]))


@dataclass(frozen=True)
class _Region:
    file: object
    position: int
    length: int


@settings(max_examples=60, deadline=None)
@given(
    version=st.integers(4, 18),
    session_id=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 70]),
    topics=st.lists(
        st.tuples(
            names,
            st.lists(
                st.tuples(
                    st.integers(0, 1000),
                    st.sampled_from([0, 1, 3]),
                    st.integers(-1, 2**40),
                    st.one_of(
                        st.none(),
                        st.lists(
                            st.tuples(st.integers(0, 2**40), st.integers(0, 2**40)), max_size=2
                        ),
                    ),
                    st.binary(max_size=200),
                ),
                max_size=3,
            ),
        ),
        max_size=3,
    ),
)
def test_fetch_response_encoder_matches_kio(version, session_id, error_code, topics) -> None:
    module = schemas.response_module(1, version)
    with tempfile.TemporaryFile() as f:
        ours_topics = []
        for name, parts in topics:
            partitions = []
            for index, code, hw, aborted, data in parts:
                regions = []
                if data:
                    position = f.seek(0, os.SEEK_END)
                    f.write(data)
                    f.flush()
                    # Two regions per partition: records may span segments.
                    half = len(data) // 2
                    regions = [
                        _Region(f, position, half),
                        _Region(f, position + half, len(data) - half),
                    ]
                    regions = [r for r in regions if r.length]
                partitions.append(
                    FetchPartitionResponse(
                        partition_index=index,
                        error_code=code,
                        high_watermark=hw,
                        last_stable_offset=hw,
                        log_start_offset=0,
                        aborted_transactions=aborted,
                        records=regions,
                    )
                )
            ours_topics.append(
                FetchTopicResponse(name, partitions, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name))
            )
        encoded = encode_fetch_response(
            version, ours_topics, error_code=error_code, session_id=session_id
        )
        wire = b"".join(
            bytes(c)
            if isinstance(c, (bytes, memoryview))
            else os.pread(c.file.fileno(), c.length, c.position)
            for c in encoded.chunks
        )
    assert len(wire) == encoded.size
    theirs = schemas.build(
        schemas.response_schema(1, version),
        throttle_time=0,
        error_code=error_code,
        session_id=session_id,
        responses=tuple(
            schemas.build(
                module.FetchableTopicResponse,
                topic=name,
                topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
                partitions=tuple(
                    schemas.build(
                        module.PartitionData,
                        partition_index=index,
                        error_code=code,
                        high_watermark=hw,
                        last_stable_offset=hw,
                        log_start_offset=0,
                        aborted_transactions=None
                        if aborted is None
                        else tuple(
                            module.AbortedTransaction(producer_id=p, first_offset=o)
                            for p, o in aborted
                        ),
                        records=data,
                    )
                    for index, code, hw, aborted, data in parts
                ),
            )
            for name, parts in topics
        ),
    )
    assert wire == schemas.encode(theirs)


def test_unknown_tagged_fields_in_request_bodies_are_skipped() -> None:
    from kio.schema.fetch.v12 import request as fetch12

    request = fetch12.FetchRequest(
        replica_id=-1,
        max_wait=timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1000,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch12.FetchTopic(
                topic="t",
                partitions=(
                    fetch12.FetchPartition(
                        partition=3,
                        current_leader_epoch=-1,
                        fetch_offset=7,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=100,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="r",
    )
    body = _kio_bytes(request)
    unknown = b"\x01" + b"\x63\x02zz"  # one tagged field, tag 99, two bytes
    # Both the top level and the nested partition end with an empty tagged-field section (b"\x00").
    top_level = body[:-1] + unknown
    assert schemas.decode_request(1, 12, top_level) == request
    partition_end = body.index(b"\x00\x00\x00\x64") + 4  # partition_max_bytes=100, then its tags
    nested = body[:partition_end] + unknown + body[partition_end + 1 :]
    assert schemas.decode_request(1, 12, nested) == request
