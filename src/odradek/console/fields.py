"""The values a page or a live tail takes from its user, parsed into what Kafka accepts.

Every field a user types reaches a Kafka request as one of the protocol's fixed-size
integers (a partition is an INT32, an offset or a timestamp an INT64, a replication factor
an INT16); a number outside its type would fail deep in the client library with an
overflow, so it is refused here with a sentence, as is anything that is not a number.
Sans-I/O: strings in, values or ``ConsoleError`` (400) out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from odradek.console.errors import ConsoleError


def whole_number(
    raw: str | None, name: str, default: int | None = None, bits: int = 64
) -> int | None:
    """A numeric field of a ``bits``-bit Kafka integer; blank is ``default``."""
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConsoleError(f"{name} must be a whole number, not {raw.strip()!r}") from None
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise ConsoleError(f"{name} {value} is out of range (at most {limit - 1})")
    return value


def parse_timestamp(raw: str) -> int:
    """Milliseconds since the epoch, or an ISO 8601 time (UTC unless it names a zone).

    Not before 1970: ListOffsets reads the negative timestamps -1 and -2 as "latest" and
    "earliest", so a negative time cannot be asked for.
    """
    text = raw.strip()
    if text.lstrip("-").isdigit():
        ms = whole_number(text, "timestamp")
        assert ms is not None
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ConsoleError(
                f"timestamp {text!r} is neither milliseconds nor an ISO 8601 time"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        ms = int(moment.timestamp() * 1000)
    if ms < 0:
        raise ConsoleError(f"timestamp {text!r} is before 1970")
    return ms


def parse_pairs(text: str, what: str) -> list[tuple[str, str]]:
    """``name=value`` lines (blank lines skipped), as Kafka's tools take configs."""
    pairs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ConsoleError(f"{what}: expected name=value, got {line.strip()!r}")
        pairs.append((name.strip(), value.strip()))
    return pairs
