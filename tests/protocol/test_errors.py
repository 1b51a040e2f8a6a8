from odradek.protocol.errors import ErrorCode, KafkaError


def test_kafka_error_carries_code() -> None:
    err = KafkaError("bad batch", ErrorCode.corrupt_message)
    assert err.error_code == ErrorCode.corrupt_message
    assert err.error_code.value == 2
    assert str(err) == "bad batch"


def test_default_code_is_unknown_server_error() -> None:
    assert KafkaError().error_code.value == -1
