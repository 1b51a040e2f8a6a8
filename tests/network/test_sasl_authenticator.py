"""The per-connection SASL state machine, sans-I/O: frames in, answers and decisions out."""

from __future__ import annotations

import pytest
from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.sasl_handshake.v0 import request as handshake_v0
from kio.schema.sasl_handshake.v1 import request as handshake_v1
from sasl_frames import answer, authenticate, frame

from odradek.network.principal import KafkaPrincipal
from odradek.network.sasl_authenticator import SaslServerAuthenticator
from odradek.network.sasl_channel import SaslChannel
from odradek.protocol.errors import ErrorCode

USERS = {"alice": "alice-secret"}


def authenticator(
    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256"),
) -> SaslServerAuthenticator:
    return SaslChannel(mechanisms, USERS).authenticator()


HANDSHAKE_PLAIN = handshake_v1.SaslHandshakeRequest(mechanism="PLAIN")
API_VERSIONS = api_versions_v3.ApiVersionsRequest(
    client_software_name="test", client_software_version="1"
)
METADATA = metadata_v12.MetadataRequest(
    topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
)


def test_plain_login_after_api_versions() -> None:
    sasl = authenticator()
    assert sasl.receive(frame(API_VERSIONS)).dispatch
    step = sasl.receive(frame(HANDSHAKE_PLAIN))
    assert not step.close
    response = answer(HANDSHAKE_PLAIN, step.response)
    assert (response.error_code, response.mechanisms) == (
        ErrorCode.none,
        ("PLAIN", "SCRAM-SHA-256"),
    )
    request = authenticate(b"\0alice\0alice-secret")
    step = sasl.receive(frame(request))
    assert answer(request, step.response).error_code == ErrorCode.none
    assert not step.close and sasl.complete
    assert sasl.principal == KafkaPrincipal("User", "alice")


def test_wrong_password_answers_and_closes() -> None:
    sasl = authenticator()
    sasl.receive(frame(HANDSHAKE_PLAIN))
    request = authenticate(b"\0alice\0nope")
    step = sasl.receive(frame(request))
    response = answer(request, step.response)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == "Authentication failed: Invalid username or password"
    assert step.close and step.reason and sasl.principal is None


def test_scram_failure_detail_stays_in_the_log() -> None:
    sasl = authenticator()
    sasl.receive(frame(handshake_v1.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")))
    request = authenticate(b"n,,n=nobody,r=abc")
    step = sasl.receive(frame(request))
    assert answer(request, step.response).error_message == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-256"
    )
    assert step.close and "Invalid user credentials" in step.reason


def test_a_mechanism_not_enabled_gets_the_enabled_list_then_the_close() -> None:
    sasl = authenticator(("SCRAM-SHA-512",))
    step = sasl.receive(frame(HANDSHAKE_PLAIN))
    response = answer(HANDSHAKE_PLAIN, step.response)
    assert (response.error_code, response.mechanisms) == (
        ErrorCode.unsupported_sasl_mechanism,
        ("SCRAM-SHA-512",),
    )
    assert step.close


@pytest.mark.parametrize("before", [[], [API_VERSIONS]], ids=["first", "after-api-versions"])
def test_another_request_before_the_handshake_closes_without_an_answer(before: list) -> None:
    sasl = authenticator()
    for request in before:
        sasl.receive(frame(request))
    step = sasl.receive(frame(METADATA))
    assert step.close and step.response is None
    assert "Unexpected Kafka request of type METADATA during SASL handshake" in step.reason


def test_api_versions_only_once() -> None:
    sasl = authenticator()
    sasl.receive(frame(API_VERSIONS))
    step = sasl.receive(frame(API_VERSIONS))
    assert step.close and not step.dispatch


def test_another_request_during_authentication_gets_illegal_sasl_state() -> None:
    sasl = authenticator()
    sasl.receive(frame(HANDSHAKE_PLAIN))
    step = sasl.receive(frame(API_VERSIONS))
    assert step.close
    assert answer(API_VERSIONS, step.response).error_code == ErrorCode.illegal_sasl_state
    assert "API_VERSIONS during SASL authentication" in step.reason


def test_handshake_v0_is_followed_by_bare_tokens() -> None:
    sasl = authenticator()
    request = handshake_v0.SaslHandshakeRequest(mechanism="PLAIN")
    step = sasl.receive(frame(request))
    assert answer(request, step.response).error_code == ErrorCode.none
    step = sasl.receive(memoryview(b"\0alice\0alice-secret"))
    assert step.response == b"" and not step.close
    assert sasl.principal == KafkaPrincipal("User", "alice")


def test_a_bare_token_that_fails_closes_without_an_answer() -> None:
    sasl = authenticator()
    sasl.receive(frame(handshake_v0.SaslHandshakeRequest(mechanism="PLAIN")))
    step = sasl.receive(memoryview(b"\0alice\0wrong"))
    assert step.close and step.response is None


def test_garbage_closes() -> None:
    step = authenticator().receive(memoryview(b"\x01"))
    assert step.close and step.response is None


def test_unsupported_mechanisms_cannot_make_a_channel() -> None:
    with pytest.raises(ValueError, match="GSSAPI"):
        SaslChannel(("GSSAPI",))


def reauthenticating(mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256")):
    channel = SaslChannel(mechanisms, {**USERS, "bob": "bob-secret"}, max_reauth_ms={"PLAIN": 1000})
    sasl = channel.authenticator()
    sasl.receive(frame(HANDSHAKE_PLAIN))
    request = authenticate(b"\0alice\0alice-secret")
    assert (
        answer(request, sasl.receive(frame(request)).response).session_lifetime.total_seconds() == 1
    )
    return sasl


def test_a_session_lifetime_is_told_and_renewed_with_the_same_mechanism_and_principal() -> None:
    renewal = reauthenticating().for_reauthentication()
    assert renewal.renewing
    assert answer(HANDSHAKE_PLAIN, renewal.receive(frame(HANDSHAKE_PLAIN)).response).error_code == 0
    request = authenticate(b"\0alice\0alice-secret")
    step = renewal.receive(frame(request))
    assert answer(request, step.response).error_code == ErrorCode.none and not step.close
    assert renewal.principal == KafkaPrincipal("User", "alice")
    assert renewal.session_lifetime_ms == 1000


def test_reauthentication_cannot_change_the_principal() -> None:
    renewal = reauthenticating().for_reauthentication()
    renewal.receive(frame(HANDSHAKE_PLAIN))
    request = authenticate(b"\0bob\0bob-secret")
    step = renewal.receive(frame(request))
    response = answer(request, step.response)
    assert response.error_code == ErrorCode.sasl_authentication_failed
    assert response.error_message == (
        "Cannot change principals during re-authentication from User:alice: User:bob"
    )
    assert step.close


def test_reauthentication_cannot_change_the_mechanism() -> None:
    renewal = reauthenticating().for_reauthentication()
    scram = handshake_v1.SaslHandshakeRequest(mechanism="SCRAM-SHA-256")
    assert answer(scram, renewal.receive(frame(scram)).response).error_code == ErrorCode.none
    request = authenticate(b"n,,n=alice,r=abc")
    step = renewal.receive(frame(request))
    assert answer(request, step.response).error_message == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )
    assert step.close


def test_reauthentication_starts_with_the_handshake() -> None:
    step = reauthenticating().for_reauthentication().receive(frame(API_VERSIONS))
    assert step.close and step.response is None
