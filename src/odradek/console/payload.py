"""How the message browser shows records: their bytes as text, pretty-printed JSON, or hex.

Keys, values and header values are arbitrary bytes. A value that decodes as UTF-8 and parses
as a JSON object or array is shown indented; other valid UTF-8 without control characters
(tab and newlines allowed) is shown as text; anything else as hex, so a binary payload never
turns into replacement characters or breaks the page. Long payloads are cut at ``MAX_SHOWN``
bytes with the full length stated: a page of fifty 1 MB values would otherwise weigh 50 MB.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAX_SHOWN = 16 * 1024

_ALLOWED_CONTROL = frozenset("\t\n\r")


@dataclass(frozen=True)
class Shown:
    """Bytes as the page shows them: ``kind`` is "null", "json", "text" or "hex"."""

    kind: str
    text: str
    size: int
    truncated: bool = False


def _is_text(text: str) -> bool:
    return not any((ch < " " and ch not in _ALLOWED_CONTROL) or ch == "\x7f" for ch in text)


def hex_dump(data: bytes) -> str:
    """Bytes as hex pairs, 16 to a line with the offset first (as ``xxd`` without ASCII)."""
    lines = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        lines.append(f"{start:08x}  {chunk.hex(' ')}")
    return "\n".join(lines)


def _decode(head: bytes, truncated: bool) -> str | None:
    """UTF-8 text of ``head``, or None; a cut payload may end inside a multi-byte character."""
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.reason == "unexpected end of data":
            return head[: exc.start].decode("utf-8")
        return None


def show(data: bytes | None) -> Shown:
    """The displayed form of a key, value or header value (None is a null key or value)."""
    if data is None:
        return Shown("null", "null", 0)
    size = len(data)
    truncated = size > MAX_SHOWN
    head = bytes(data[:MAX_SHOWN])
    text = _decode(head, truncated)
    if text is None or not _is_text(text):
        return Shown("hex", hex_dump(head), size, truncated)
    if not truncated and text.lstrip()[:1] in ("{", "["):
        try:
            parsed = json.loads(text)
        except ValueError:
            pass
        else:
            return Shown("json", json.dumps(parsed, indent=2, ensure_ascii=False), size)
    return Shown("text", text, size, truncated)


@dataclass(frozen=True)
class Message:
    """A record as the message browser shows it (the page, or a live tail's event)."""

    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str
    key: Shown
    value: Shown
    headers: list[tuple[str, Shown]]


_TIMESTAMP_TYPES = {1: "CreateTime", 2: "LogAppendTime"}


def message_of(record: Any) -> Message:
    """The shown form of a confluent-kafka ``Message`` that holds a record (not an error)."""
    kind, ms = record.timestamp()
    return Message(
        record.partition(),
        record.offset(),
        ms if kind in _TIMESTAMP_TYPES else None,
        _TIMESTAMP_TYPES.get(kind, "none"),
        show(record.key()),
        show(record.value()),
        [(name, show(value)) for name, value in record.headers() or []],
    )


def format_ms(ms: int | None) -> str:
    """A record timestamp as the pages show it: ISO 8601 in UTC to the millisecond, or -."""
    if ms is None or ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
