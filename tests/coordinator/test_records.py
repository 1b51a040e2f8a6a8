from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator import records as rec

texts = st.text(max_size=20)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)


def test_offset_commit_key_bytes_match_kafka_layout():
    data = rec.encode_offset_commit_key(rec.OffsetCommitKey("g", "t", 7))
    assert data == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x07"
    assert rec.decode_key(data) == rec.OffsetCommitKey("g", "t", 7)


def test_group_metadata_key_bytes():
    data = rec.encode_group_metadata_key(rec.GroupMetadataKey("grp"))
    assert data == b"\x00\x02\x00\x03grp"
    assert rec.decode_key(data) == rec.GroupMetadataKey("grp")


def test_offset_commit_value_v3_layout():
    data = rec.encode_offset_commit_value(rec.OffsetCommitValue(5, "m", 1000, leader_epoch=2))
    assert data == (
        b"\x00\x03"
        + (5).to_bytes(8, "big")
        + (2).to_bytes(4, "big")
        + b"\x00\x01m"
        + (1000).to_bytes(8, "big")
    )


def test_offset_commit_value_v4_flexible_is_read():
    data = (
        b"\x00\x04"
        + (9).to_bytes(8, "big")
        + (1).to_bytes(4, "big")
        + b"\x03hi"
        + (77).to_bytes(8, "big")
        + b"\x00"
    )
    assert rec.decode_offset_commit_value(data) == rec.OffsetCommitValue(9, "hi", 77, 1)


@given(ints64, texts, ints64, ints32, st.one_of(st.just(-1), st.integers(0, 2**62)))
def test_offset_commit_value_round_trip(offset, metadata, ts, epoch, expire):
    value = rec.OffsetCommitValue(offset, metadata, ts, epoch if expire < 0 else -1, expire)
    assert rec.decode_offset_commit_value(rec.encode_offset_commit_value(value)) == value


members = st.builds(
    rec.MemberMetadata,
    texts,
    texts,
    texts,
    ints32,
    ints32,
    st.binary(max_size=20),
    st.binary(max_size=20),
    st.one_of(st.none(), texts),
)


@given(
    texts,
    ints32,
    st.one_of(st.none(), texts),
    st.one_of(st.none(), texts),
    ints64,
    st.lists(members, max_size=4),
)
def test_group_metadata_value_round_trip(ptype, gen, protocol, leader, ts, ms):
    value = rec.GroupMetadataValue(ptype, gen, protocol, leader, ts, ms)
    assert rec.decode_group_metadata_value(rec.encode_group_metadata_value(value)) == value
