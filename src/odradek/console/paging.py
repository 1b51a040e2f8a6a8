"""Search and pagination for lists that can be long (topics, partitions, groups).

A cluster with 10,000 partitions must still give pages that render in well under a second,
so no page lists more than one page of items, and only that page's items cost a further
request to the cluster (offsets, configs). Sans-I/O: plain lists in, one ``Page`` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

TOPICS_PER_PAGE = 50
PARTITIONS_PER_PAGE = 100


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of ``total`` items; ``number`` counts from 1."""

    items: Sequence[T]
    number: int
    count: int
    total: int

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.count else None


def page_number(raw: str | None) -> int:
    """The ``page`` query parameter; anything that is not a positive number is page 1."""
    try:
        return max(int(raw or 1), 1)
    except ValueError:
        return 1


def paginate(items: Sequence[T], number: int, size: int) -> Page[T]:
    """Page ``number`` of ``items``; a number past the end gives the last page."""
    count = max((len(items) + size - 1) // size, 1)
    number = min(max(number, 1), count)
    start = (number - 1) * size
    return Page(items[start : start + size], number, count, len(items))


def search(names: Sequence[str], query: str) -> list[str]:
    """The names that contain ``query`` (case-insensitive), sorted; all of them for ''."""
    needle = query.strip().lower()
    return sorted(n for n in names if needle in n.lower())
