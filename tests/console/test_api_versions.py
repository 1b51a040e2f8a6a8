"""The overview's summary of a broker's ApiVersions answer."""

from __future__ import annotations

from odradek.console.api_versions import summary


def test_api_versions_summary_names_the_apis_users_know():
    versions = {0: (3, 12), 1: (4, 17), 3: (0, 13), 18: (0, 4)}
    assert summary(versions) == "4 APIs; Produce v3-v12, Fetch v4-v17, Metadata v0-v13"
    assert summary({18: (0, 4)}) == "1 APIs"
