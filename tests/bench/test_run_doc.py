"""bench/run.py rewrites the table of docs/benchmarks.md and keeps what is written by hand below it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import run


def test_the_hand_written_part_survives_a_new_table(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    run.write_doc(doc, "# Benchmarks\n\nold table\n")
    doc.write_text(doc.read_text() + run.KEEP_MARKER + "\n\n## Profiles\n\nanalysis\n")
    run.write_doc(doc, "# Benchmarks\n\nnew table\n")
    text = doc.read_text()
    assert "new table" in text and "old table" not in text
    assert text.endswith(run.KEEP_MARKER + "\n\n## Profiles\n\nanalysis\n")


def test_without_the_marker_the_file_is_the_table_alone(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text("something else entirely\n")
    run.write_doc(doc, "table\n")
    assert doc.read_text() == "table\n"
