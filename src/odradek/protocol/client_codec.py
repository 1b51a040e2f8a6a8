"""A client's side of the wire: request frames out, response frames in (sans-I/O).

Used by every connection this project opens to a broker (the Spark source and
sink's blocking socket, the follower fetcher's asyncio stream), so the header
rules live once: request header v1 (v2 for flexible versions: an empty tagged
field section after the client id), response header v0, or v1 (tagged fields)
for flexible versions except ApiVersions, whose response keeps header v0 so
that any client can read it whatever version it asked for.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kio.serial import entity_reader

from odradek.protocol import schemas
from odradek.protocol.tolerant import tolerant_reader
from odradek.protocol.wire import skip_tagged_fields

API_VERSIONS = 18
_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")


def client_id_field(client_id: str) -> bytes:
    """The request header's client id (a nullable int16-length string)."""
    encoded = client_id.encode()
    return struct.pack(">h", len(encoded)) + encoded


def encode_request(request: Any, correlation_id: int, client_id: bytes) -> bytes:
    """The whole frame of ``request`` (a kio request entity): size prefix, header, body."""
    return frame_request(
        RequestKind.of(request), schemas.encode(request), correlation_id, client_id
    )


class RequestKind(NamedTuple):
    """What a request's header and its response's header depend on."""

    api_key: int
    version: int
    flexible: bool

    @classmethod
    def of(cls, request: Any) -> RequestKind:
        """The kind of ``request``, a kio request entity."""
        return cls(int(request.__api_key__), int(request.__version__), request.__flexible__)


def frame_request(kind: RequestKind, body: bytes, correlation_id: int, client_id: bytes) -> bytes:
    """The whole frame of a request of ``kind`` whose ``body`` is encoded already."""
    header = _REQUEST_HEADER.pack(kind.api_key, kind.version, correlation_id) + client_id
    frame = header + (b"\x00" if kind.flexible else b"") + body
    return _SIZE.pack(len(frame)) + frame


def response_correlation_id(frame: bytes | memoryview) -> int:
    """The correlation id of a response frame (without its size prefix)."""
    (correlation_id,) = _SIZE.unpack_from(frame)
    return int(correlation_id)


def response_body(request: Any, frame: bytes | memoryview) -> memoryview:
    """The body of ``frame`` (a response to ``request``, a kio request entity, size prefix
    removed): what follows its header, read-only."""
    return kind_response_body(RequestKind.of(request), frame)


def kind_response_body(kind: RequestKind, frame: bytes | memoryview) -> memoryview:
    """The body of ``frame``, a response to a request of ``kind``."""
    view = memoryview(frame).toreadonly()  # kio reads read-only memoryviews, never bytearrays
    flexible = kind.flexible and kind.api_key != API_VERSIONS
    return view[skip_tagged_fields(view, 4) if flexible else 4 :]


def decode_response(request: Any, frame: bytes | memoryview) -> Any:
    """The kio response entity in ``frame`` (a response to ``request``, size prefix removed).

    Unknown tagged fields, which kio refuses, are skipped as the protocol says.
    """
    schema = schemas.response_schema(int(request.__api_key__), int(request.__version__))
    body = response_body(request, frame)
    try:
        return entity_reader(schema)(body, 0)[0]
    except KeyError:
        return tolerant_reader(schema)(body, 0)[0]
