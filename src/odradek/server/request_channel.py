"""From a frame to a response: header, API table lookup, decode, handler, encode.

The network layer hands every frame here and writes back whatever comes out.
Requests it cannot answer raise CloseConnection (the network layer logs and
closes that one connection), with one exception the protocol mandates: an
ApiVersions request of a version we do not know gets a v0-format reply carrying
UNSUPPORTED_VERSION and our version list (KIP-511), so a newer client can
downgrade instead of failing.

A version of any other API that we do not serve but Kafka defines (kio has its
schema) is answered with that version's error response carrying UNSUPPORTED_VERSION in every error
field (protocol.error_response, Kafka's getErrorResponse). A version Kafka does not
define at all closes the connection, as Kafka 4 does (SocketServer.parseRequestHeader:
"Received request api key ... with version ... which is not enabled"): no response
could be trusted to decode.

With metrics on (``metrics.http.listener``), each answered request is counted in the
broker's RequestMetrics by API and version: its time from the frame's dispatch until the
network layer has written its response (``EncodedResponse.on_sent``), split into the
handler running (local) and waiting (remote, see ``timed``), the response waiting in its
connection and being written; its size and its response's, and the error codes the
response carries. The request is counted when its response is sent, as Kafka counts it,
so a scrape never sees a request whose parts are not all known. Off, the handler is
awaited directly and nothing is measured.

Once a client quota is configured (``server.throttling``), each request's size and handler
time are recorded against its client's quotas too; a throttled response carries the
throttle time and mutes its connection for it (the listener does the muting). Without
quotas that is one check of three flags per request.
"""

from __future__ import annotations

import importlib
import logging
import time
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

from odradek.network.listener import CloseConnection, ConnectionInfo
from odradek.protocol import schemas
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.error_counts import error_counts
from odradek.protocol.error_response import error_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.frames import SIZE_PREFIX_LEN
from odradek.protocol.header import parse_request_header, peek_api, response_header
from odradek.protocol.response import EncodedResponse
from odradek.server.apis import API_TABLE, ApiSpec
from odradek.server.context import BrokerServices, RequestContext
from odradek.server.handlers.api_versions import api_versions_response
from odradek.server.handlers.fetch import replica
from odradek.server.throttling import active, mute_first, throttle

log = logging.getLogger(__name__)
T = TypeVar("T")


def _with_header(
    response: Any, api_key: int, correlation_id: int, flexible: bool
) -> EncodedResponse:
    """The response with its header in front, as the bytes the network layer sends."""
    head = response_header(api_key, correlation_id, flexible)
    if isinstance(response, EncodedResponse):
        response.chunks.insert(0, head)
        response.size += len(head)
        return response
    out = EncodedResponse()
    out.add(head)
    out.add(schemas.encode(response))
    return out


@types.coroutine
def timed(coro: Coroutine[Any, Any, T]) -> Generator[Any, None, tuple[T, float]]:
    """Run a handler; also return how long it was suspended (Kafka's remote time).

    ``await timed(handler(...))`` steps the handler itself, as ``await`` would, and adds
    up the time between handing what it waits on to the event loop and being resumed:
    a long poll in the purgatory, a coordinator's write. The time it runs is local.
    """
    clock, waited = time.perf_counter, 0.0
    try:
        pending = coro.send(None)
    except StopIteration as done:
        return done.value, waited
    while True:
        suspended = clock()
        try:
            yield pending
        except BaseException as e:
            waited += clock() - suspended
            try:
                pending = coro.throw(e)
            except StopIteration as done:
                return done.value, waited
        else:
            waited += clock() - suspended
            try:
                pending = coro.send(None)
            except StopIteration as done:
                return done.value, waited


def _mute(out: EncodedResponse, mute_ms: int, api_key: int, api_version: int) -> int:
    """Mute the connection for the longer of a quota's throttle and what the handler asked
    (a throttled fetch), before the response for a client too old to hold back itself;
    the time muted."""
    out.mute_ms = max(out.mute_ms, mute_ms)
    out.mute_first = bool(out.mute_ms) and mute_first(api_key, api_version)
    return out.mute_ms


def _resolve(path: str) -> Callable[..., Any]:
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class RequestChannel:
    """Routes frames to the handlers of the API table."""

    def __init__(self, broker: BrokerServices, table: dict[int, ApiSpec] = API_TABLE) -> None:
        self._broker = broker
        self._table = table
        #: None when metrics are off (and for a channel without a broker, in network tests).
        self._metrics = getattr(broker, "request_metrics", None)
        #: The broker's client quotas (None for a channel without a broker, as above).
        self._quotas = getattr(broker, "client_quotas", None)
        # Resolved up front: a handler that fails to import stops start-up, not a request.
        self._handlers = {key: _resolve(spec.handler) for key, spec in table.items()}
        self._decoders = {
            key: _resolve(spec.decoder) for key, spec in table.items() if spec.decoder
        }

    async def dispatch(self, connection: ConnectionInfo, frame: bytes) -> EncodedResponse | None:
        started = time.perf_counter()
        buf = memoryview(frame)
        try:
            api_key, api_version, correlation_id = peek_api(buf)
        except ValueError as e:
            raise CloseConnection(f"request shorter than a header: {e}") from None
        spec = self._table.get(api_key)
        if spec is None:
            raise CloseConnection(f"unknown or unsupported api key {api_key}")
        if not spec.min_version <= api_version <= spec.max_version:
            if api_key == ApiKey.API_VERSIONS:
                return self._unsupported_api_versions(correlation_id)
            return self._unsupported_version(buf, spec, api_version, correlation_id)
        flexible = schemas.is_flexible(api_key, api_version)
        try:
            header = parse_request_header(buf, flexible)
            body = buf[header.size :]
            decoder = self._decoders.get(api_key)
            if decoder is not None:
                request = decoder(api_version, body)
            else:
                request = schemas.decode_request(api_key, api_version, body)
        except Exception as e:  # any decoding failure means the bytes are not a valid request
            raise CloseConnection(
                f"malformed {ApiKey(api_key).name} v{api_version} request: {e!r}"
            ) from None
        ctx = RequestContext(self._broker, connection, header, api_version, int(time.time() * 1000))
        metrics, quotas = self._metrics, self._quotas
        throttled = quotas is not None and active(quotas)
        if metrics is None and not throttled:
            response = await self._handlers[api_key](ctx, request)
            if response is None:
                return None
            out = _with_header(response, api_key, correlation_id, flexible)
            _mute(out, 0, api_key, api_version)  # a fetch over its consumer_byte_rate
            return out
        response, waited = await timed(self._handlers[api_key](ctx, request))
        handled = time.perf_counter()
        mute_ms = 0
        if throttled:
            assert quotas is not None
            local = handled - started - waited
            response, mute_ms = throttle(ctx, quotas, request, response, local, len(frame))
        silent = isinstance(response, EncodedResponse) and response.silent
        if metrics is None:
            if response is None or silent:
                return response
            out = _with_header(response, api_key, correlation_id, flexible)
            _mute(out, mute_ms, api_key, api_version)
            return out
        errors = None if silent else error_counts(response)
        stats = metrics.stats(api_key, api_version)
        request_size = len(frame) + SIZE_PREFIX_LEN
        if response is None or silent:  # acks=0: nothing to send, so nothing to wait for
            stats.record(handled - started, waited, 0.0, 0.0, request_size, 0, errors, mute_ms)
            return response
        out = _with_header(response, api_key, correlation_id, flexible)
        mute_ms = _mute(out, mute_ms, api_key, api_version)
        response_size = out.size + SIZE_PREFIX_LEN

        # Kafka times a Fetch twice: as Fetch, and as FetchFollower or FetchConsumer (errors
        # are counted under Fetch only), so consumers' latency is not lost among long polls.
        kind = None
        if api_key == ApiKey.FETCH:
            follower = replica(request)[0] >= 0
            kind = metrics.stats(api_key, api_version, "Follower" if follower else "Consumer")

        def sent(writing: float, written: float) -> None:
            times = (written - started, waited, writing - handled, written - writing)
            stats.record(*times, request_size, response_size, errors, mute_ms)
            if kind is not None:
                kind.record(*times, request_size, response_size, None, mute_ms)

        out.on_sent = sent
        return out

    def _unsupported_version(
        self, buf: memoryview, spec: ApiSpec, api_version: int, correlation_id: int
    ) -> EncodedResponse:
        """UNSUPPORTED_VERSION in the error response of a version Kafka defines; else CloseConnection."""
        message = (
            f"Received request api key {ApiKey(spec.api_key).name} with version {api_version} which is not "
            f"enabled (supported {spec.min_version}-{spec.max_version})"
        )
        try:
            response_schema = schemas.response_schema(spec.api_key, api_version)
        except schemas.UnknownApi:
            raise CloseConnection(message) from None
        try:
            flexible = schemas.is_flexible(spec.api_key, api_version)
            header = parse_request_header(buf, flexible)
            request = schemas.decode_request(spec.api_key, api_version, buf[header.size :])
        except Exception as e:  # undecodable bytes: nothing to answer
            raise CloseConnection(f"{message}; malformed request: {e!r}") from None
        log.warning("%s: answered UNSUPPORTED_VERSION", message)
        out = EncodedResponse()
        out.add(response_header(spec.api_key, correlation_id, flexible))
        out.add(
            schemas.encode(error_response(response_schema, request, ErrorCode.unsupported_version))
        )
        return out

    def _unsupported_api_versions(self, correlation_id: int) -> EncodedResponse:
        out = EncodedResponse()
        out.add(response_header(ApiKey.API_VERSIONS, correlation_id, flexible=False))
        out.add(
            schemas.encode(api_versions_response(0, self._table, ErrorCode.unsupported_version))
        )
        return out
