from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.hashing import java_string_hash, partition_for


def test_java_string_hash_known_values():
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    # Famous Java string whose hashCode is Integer.MIN_VALUE; Kafka's Utils.abs maps it to 0.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    # Characters outside the BMP hash as two UTF-16 code units, as in Java.
    assert java_string_hash("\U0001f600") == 31 * 0xD83D + 0xDE00


@given(st.text(), st.integers(1, 200))
def test_partition_in_range(group_id, n):
    assert 0 <= partition_for(group_id, n) < n
