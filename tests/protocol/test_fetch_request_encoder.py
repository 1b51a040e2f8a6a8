"""The follower's hand-written Fetch request encoder writes exactly what kio writes."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import schemas
from odradek.protocol.fetch import FetchRequestPartition, encode_follower_fetch_request

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
partitions = st.builds(FetchRequestPartition, int32, int32, int64, int32, int64, int32)
topics = st.lists(st.tuples(st.uuids(), st.lists(partitions, max_size=4)), max_size=4)
forgotten = st.lists(st.tuples(st.uuids(), st.lists(int32, max_size=4)), max_size=3)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(15, 18),
    replica_id=int32,
    replica_epoch=int64,
    fixed=st.tuples(st.integers(0, 2**31 - 1), int32, int32, int32, int32),
    topics=topics,
    forgotten=forgotten,
)
def test_the_encoder_writes_what_kio_writes(
    version: int, replica_id: int, replica_epoch: int, fixed, topics, forgotten
) -> None:
    max_wait_ms, min_bytes, max_bytes, session_id, session_epoch = fixed
    module = schemas.request_module(1, version)
    request = module.FetchRequest(
        cluster_id=None,
        replica_state=module.ReplicaState(replica_id=replica_id, replica_epoch=replica_epoch),
        max_wait=timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=tuple(
            module.FetchTopic(
                topic_id=topic_id,
                partitions=tuple(module.FetchPartition(**p._asdict()) for p in ps),
            )
            for topic_id, ps in topics
        ),
        forgotten_topics_data=tuple(
            module.ForgottenTopic(topic_id=topic_id, partitions=tuple(ps))
            for topic_id, ps in forgotten
        ),
        rack_id="",
    )
    assert encode_follower_fetch_request(
        version,
        replica_id=replica_id,
        replica_epoch=replica_epoch,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=topics,
        forgotten=forgotten,
    ) == bytes(schemas.encode(request))


@pytest.mark.parametrize("version", [14, 19])
def test_versions_a_follower_does_not_send_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match=f"v{version}"):
        encode_follower_fetch_request(
            version,
            replica_id=1,
            replica_epoch=1,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=1,
            session_id=0,
            session_epoch=0,
            topics=[(uuid.uuid4(), [])],
            forgotten=[],
        )
