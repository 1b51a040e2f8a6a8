"""The .properties format as java.util.Properties.load reads it (server.properties,
client.properties).

Kafka's files are read by Java, and what users write relies on its rules, most of all
the backslash at the end of a line that continues it on the next, which every
multi-line ``sasl.jaas.config`` in Kafka's documentation uses. The rules:

- a line ending in an odd number of backslashes continues on the next one, whose leading
  whitespace is skipped;
- a line whose first non-blank character is ``#`` or ``!`` is a comment; blank lines are
  skipped;
- the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace and one ``=``
  or ``:`` after it are skipped, and the rest is the value (so ``key value`` and ``key``
  alone are entries too);
- ``\\t``, ``\\n``, ``\\r``, ``\\f`` and ``\\uXXXX`` are escapes, any other escaped character
  stands for itself.

Values are stripped of surrounding whitespace, as Kafka's ConfigDef trims what it parses.
Imports nothing of ours: the broker and the client tools both read with it.
"""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=:"


def parse_properties(text: str) -> dict[str, str]:
    """Every entry of ``text``, the last one winning for a key given twice (as Java)."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _entry(line)
        props[key] = value
    return props


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending: str | None = None
    for natural in text.splitlines():
        if pending is None:
            stripped = natural.lstrip()
            if not stripped or stripped[0] in "#!":
                continue
        else:
            stripped = natural.lstrip()
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            stripped = stripped[:-1]
        pending = stripped if pending is None else pending + stripped
        if not continued:
            lines.append(pending)
            pending = None
    if pending is not None:  # a continuation at the end of the file ends the line
        lines.append(pending)
    return lines


def _entry(line: str) -> tuple[str, str]:
    """Split a logical line into its key and value, both unescaped."""
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in _SEPARATORS or c.isspace():
            break
        i += 1
    key = line[:i]
    while i < n and line[i].isspace():
        i += 1
    if i < n and line[i] in _SEPARATORS:
        i += 1
    return _unescape(key), _unescape(line[i:]).strip()


def _unescape(text: str) -> str:
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= n:
            try:
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
