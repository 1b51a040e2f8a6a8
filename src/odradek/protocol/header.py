"""Request header v1/v2 parsing and response header encoding.

Parsed by hand rather than through kio because the header of a flexible request
may carry tagged fields we do not know, which the protocol says to skip (kio
refuses them), and because the header version depends on the body's schema:
flexible API versions use request header v2 and response header v1, except
ApiVersions, whose response header is always v0 so that a client that does not
yet know the broker's versions can read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.protocol import wire
from odradek.protocol.api_keys import API_VERSIONS

#: api key, api version, correlation id: the fixed 8 bytes every request starts with.
FIXED_HEADER_LEN = 8


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    #: Bytes the header takes at the start of the frame; the body follows.
    size: int


def peek_api(buf: memoryview) -> tuple[int, int, int]:
    """(api key, api version, correlation id) from the first 8 bytes of a request."""
    api_key, pos = wire.read_int16(buf, 0)
    api_version, pos = wire.read_int16(buf, pos)
    correlation_id, _ = wire.read_int32(buf, pos)
    return api_key, api_version, correlation_id


def parse_request_header(buf: memoryview, flexible: bool) -> RequestHeader:
    """Header v1 (``flexible`` False) or v2; client_id is a legacy nullable string in both."""
    api_key, api_version, correlation_id = peek_api(buf)
    client_id, pos = wire.read_string(buf, FIXED_HEADER_LEN, flexible=False)
    if flexible:
        pos = wire.skip_tagged_fields(buf, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def response_header(api_key: int, correlation_id: int, flexible: bool) -> bytes:
    """Response header v0, or v1 (an empty tagged-field section) for flexible versions."""
    if flexible and api_key != API_VERSIONS:
        return wire.int32(correlation_id) + b"\x00"
    return wire.int32(correlation_id)
