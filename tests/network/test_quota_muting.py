"""Channel muting for client quotas, over real sockets: a response's ``mute_ms`` keeps its
connection from reading and answering anything for that long; ``mute_first`` sends the
response itself only afterwards (clients before KIP-219); a ``silent`` response (acks=0)
mutes without sending anything. The times checked are lower bounds only: the broker may be
slower, never faster."""

from __future__ import annotations

import time

from odradek.protocol.response import EncodedResponse
from odradek.server.request_channel import RequestChannel
from tests.network.test_listener import TABLE, api_versions_request, connect, read_response, run

MUTE_MS = 400


def run_muting(scenario, mute: dict[int, dict]) -> None:
    """A listener answering ApiVersions whose responses to the correlation ids in ``mute``
    get those fields (a silent one replaces the answer)."""
    channel = RequestChannel(None, TABLE)

    async def dispatch(connection, frame):
        correlation_id = int.from_bytes(frame[4:8], "big")
        fields = mute.get(correlation_id)
        if fields is not None and fields.get("silent"):
            return EncodedResponse(**fields)
        response = await channel.dispatch(connection, frame)
        for name, value in (fields or {}).items():
            setattr(response, name, value)
        return response

    run(scenario, dispatch=dispatch)


def test_a_throttled_response_is_sent_then_the_connection_is_muted() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        sent = time.monotonic()
        writer.write(api_versions_request(1) + api_versions_request(2))
        assert (await read_response(reader))[0] == 1
        assert (await read_response(reader))[0] == 2
        assert time.monotonic() - sent >= MUTE_MS / 1000
        writer.close()

    run_muting(scenario, {1: {"mute_ms": MUTE_MS}})


def test_a_client_before_kip_219_gets_its_response_after_the_mute() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        sent = time.monotonic()
        writer.write(api_versions_request(1))
        assert (await read_response(reader))[0] == 1
        assert time.monotonic() - sent >= MUTE_MS / 1000
        writer.close()

    run_muting(scenario, {1: {"mute_ms": MUTE_MS, "mute_first": True}})


def test_a_silent_response_mutes_without_an_answer() -> None:
    async def scenario(port: int) -> None:
        reader, writer = await connect(port)
        sent = time.monotonic()
        writer.write(api_versions_request(1) + api_versions_request(2))
        assert (await read_response(reader))[0] == 2  # 1 has no answer, as acks=0
        assert time.monotonic() - sent >= MUTE_MS / 1000
        writer.close()

    run_muting(scenario, {1: {"mute_ms": MUTE_MS, "silent": True}})
