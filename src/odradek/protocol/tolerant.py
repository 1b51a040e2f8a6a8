"""A schema-driven request reader that skips unknown tagged fields, as the protocol requires.

kio's native reader raises KeyError on a tagged field it does not know; a newer
client may legitimately send one. This reader walks the same kio dataclasses,
reads primitives with kio's own field readers, recurses into nested structs
itself so unknown tags are skipped at every level, and is used only as the
fallback when kio's fast reader refuses a body.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial._parse import get_field_reader
from kio.serial.readers import (
    compact_array_reader,
    legacy_array_reader,
    read_int8,
    read_unsigned_varint,
)


@cache
def tolerant_reader(entity_type: type[Any], nullable: bool = False) -> Any:
    flexible = bool(entity_type.__flexible__)
    plain: list[tuple[str, Any]] = []
    tagged: dict[int, tuple[str, Any]] = {}
    for f in fields(entity_type):
        tag = get_field_tag(f)
        reader = _field_reader(entity_type, f, flexible, tag is not None)
        if tag is None:
            plain.append((f.name, reader))
        else:
            tagged[tag] = (f.name, reader)

    def read(buf: Any, offset: int) -> tuple[Any, int]:
        # kio readers return (value, bytes consumed); so does this one.
        pos = offset
        if nullable:
            marker, size = read_int8(buf, pos)
            pos += size
            if marker < 0:
                return None, pos - offset
        values: dict[str, Any] = {}
        for name, reader in plain:
            values[name], size = reader(buf, pos)
            pos += size
        if flexible:
            count, size = read_unsigned_varint(buf, pos)
            pos += size
            for _ in range(count):
                tag, size = read_unsigned_varint(buf, pos)
                pos += size
                length, size = read_unsigned_varint(buf, pos)
                pos += size
                known = tagged.get(tag)
                if known is not None:
                    values[known[0]], _ = known[1](buf, pos)
                pos += length
        return entity_type(**values), pos - offset

    return read


def _field_reader(entity_type: type, f: Any, flexible: bool, is_tag: bool) -> Any:
    kind = classify_field(f)
    if isinstance(kind, EntityField):
        return tolerant_reader(kind.type_, nullable=is_optional(f) and not is_tag)
    if isinstance(kind, EntityTupleField):
        item = tolerant_reader(kind.type_)
        return compact_array_reader(item) if flexible else legacy_array_reader(item)
    return get_field_reader(entity_type, f, False, is_tag)
