"""The hand-written Fetch response decoder reads what kio writes, every version it serves
(v13-v18), tagged fields included, and hands records out as slices of the frame."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.fetch import LAST_DECODED_VERSION, decode_fetch_response
from odradek.protocol.wire import Truncated

VERSIONS = range(13, LAST_DECODED_VERSION + 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)

partitions = st.fixed_dictionaries(
    {
        "partition_index": st.integers(0, 2**31 - 1),
        "error_code": st.sampled_from([0, 1, 6, 74, 75]),
        "high_watermark": int64,
        "last_stable_offset": int64,
        "log_start_offset": int64,
        "aborted": st.one_of(st.none(), st.lists(st.tuples(int64, int64), max_size=3)),
        "preferred_read_replica": int32,
        "records": st.one_of(st.none(), st.binary(max_size=300)),
        # Tagged fields: written by kio only when they differ from their defaults.
        "diverging": st.one_of(st.none(), st.tuples(int32, int64)),
        "leader": st.one_of(st.none(), st.tuples(int32, int32)),
        "snapshot": st.one_of(st.none(), st.tuples(int64, int32)),
    }
)
responses = st.tuples(
    st.sampled_from(VERSIONS),
    st.sampled_from([0, 7, 87]),
    st.lists(st.tuples(st.uuids(), st.lists(partitions, max_size=3)), max_size=3),
    st.lists(st.tuples(int32, st.text(max_size=10), st.integers(0, 65535)), max_size=2),
)


def kio_body(version: int, error_code: int, topics, endpoints, session_id: int = 0) -> bytes:
    module = schemas.response_module(ApiKey.FETCH, version)
    built_topics = []
    for topic_id, parts in topics:
        built = []
        for p in parts:
            extra = {}
            if p["diverging"] is not None:
                extra["diverging_epoch"] = schemas.build(
                    module.EpochEndOffset, epoch=p["diverging"][0], end_offset=p["diverging"][1]
                )
            if p["leader"] is not None:
                extra["current_leader"] = schemas.build(
                    module.LeaderIdAndEpoch, leader_id=p["leader"][0], leader_epoch=p["leader"][1]
                )
            if p["snapshot"] is not None:
                extra["snapshot_id"] = schemas.build(
                    module.SnapshotId, end_offset=p["snapshot"][0], epoch=p["snapshot"][1]
                )
            built.append(
                schemas.build(
                    module.PartitionData,
                    partition_index=p["partition_index"],
                    error_code=p["error_code"],
                    high_watermark=p["high_watermark"],
                    last_stable_offset=p["last_stable_offset"],
                    log_start_offset=p["log_start_offset"],
                    aborted_transactions=None
                    if p["aborted"] is None
                    else tuple(
                        schemas.build(
                            module.AbortedTransaction, producer_id=pid, first_offset=first
                        )
                        for pid, first in p["aborted"]
                    ),
                    preferred_read_replica=p["preferred_read_replica"],
                    records=p["records"],
                    **extra,
                )
            )
        built_topics.append(
            schemas.build(module.FetchableTopicResponse, topic_id=topic_id, partitions=tuple(built))
        )
    node_endpoints = (
        tuple(
            schemas.build(module.NodeEndpoint, node_id=n, host=h, port=port, rack=None)
            for n, h, port in endpoints
        )
        if version >= 16  # the field (tag 0) is new in v16
        else ()
    )
    return schemas.encode(
        schemas.build(
            module.FetchResponse,
            throttle_time=3,
            error_code=error_code,
            session_id=session_id,
            responses=tuple(built_topics),
            node_endpoints=node_endpoints,
        )
    )


@settings(max_examples=300, deadline=None)
@given(responses, st.integers(0, 2**31 - 1))
def test_the_decoder_reads_what_kio_writes(response, session_id: int) -> None:
    version, error_code, topics, endpoints = response
    body = memoryview(kio_body(version, error_code, topics, endpoints, session_id))
    decoded_error, decoded_session, decoded = decode_fetch_response(version, body)
    assert (decoded_error, decoded_session) == (error_code, session_id)
    assert [t for t, _ in decoded] == [t for t, _ in topics]
    for (_, got), (_, wanted) in zip(decoded, topics, strict=True):
        assert [
            (
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
                p.aborted_transactions,
                p.preferred_read_replica,
                None if p.records is None else bytes(p.records),
            )
            for p in got
        ] == [
            (
                w["partition_index"],
                w["error_code"],
                w["high_watermark"],
                w["last_stable_offset"],
                w["log_start_offset"],
                w["aborted"],
                w["preferred_read_replica"],
                w["records"],
            )
            for w in wanted
        ]


def test_records_are_a_slice_of_the_frame_not_a_copy() -> None:
    records = b"r" * 1000
    topics = [(uuid.uuid4(), [_partition(records)])]
    frame = bytearray(kio_body(16, 0, topics, []))
    decoded = decode_fetch_response(16, memoryview(frame)).topics
    view = decoded[0][1][0].records
    assert view is not None and view.obj is frame


@pytest.mark.parametrize("cut", [1, 5, 30, 60])
def test_a_short_body_is_an_error(cut: int) -> None:
    body = kio_body(16, 0, [(uuid.uuid4(), [_partition(b"x" * 40)])], [])
    with pytest.raises(Truncated):
        decode_fetch_response(16, memoryview(body[:-cut]))


def test_versions_without_topic_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="v12"):
        decode_fetch_response(12, memoryview(b""))


def _partition(records: bytes) -> dict:
    return {
        "partition_index": 0,
        "error_code": 0,
        "high_watermark": 1,
        "last_stable_offset": 1,
        "log_start_offset": 0,
        "aborted": None,
        "preferred_read_replica": -1,
        "records": records,
        "diverging": None,
        "leader": None,
        "snapshot": None,
    }
