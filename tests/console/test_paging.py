"""Search and pagination: the pages of a list hold each item exactly once, in order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from odradek.console.paging import page_number, paginate, search


@given(st.lists(st.integers(), max_size=300), st.integers(1, 60))
def test_pages_cover_the_list_once_in_order(items, size):
    first = paginate(items, 1, size)
    pages = [paginate(items, n, size) for n in range(1, first.count + 1)]
    assert [x for page in pages for x in page.items] == items
    assert all(len(page.items) <= size for page in pages)
    assert all(page.total == len(items) for page in pages)
    assert pages[0].previous is None and pages[-1].next is None
    assert [p.next for p in pages[:-1]] == list(range(2, first.count + 1))


def test_page_numbers_out_of_range_are_clamped():
    items = list(range(120))
    assert paginate(items, 99, 50).number == 3 and paginate(items, 99, 50).items == items[100:]
    assert paginate([], 5, 50).items == [] and paginate([], 5, 50).count == 1
    assert [page_number(raw) for raw in (None, "", "3", "-2", "x", "0")] == [1, 1, 3, 1, 1, 1]


def test_search_is_a_case_insensitive_substring_sorted():
    names = ["orders", "Payments", "order-events", "audit"]
    assert search(names, "ORDER") == ["order-events", "orders"]
    assert search(names, " ") == sorted(names)
    assert search(names, "") == sorted(names)
