"""Index maps are advised MADV_RANDOM: sparse preallocated index files otherwise fault in a
whole read-ahead window on first touch, which made producing across 1,000 partitions ~30x slower."""

from pathlib import Path

from odradek.storage.index import OffsetIndex, TimeIndex


def _vm_flags(path: Path) -> list[str]:
    flags, current = [], None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line and line[0] in "0123456789abcdef" and "-" in line.split()[0]:
            current = line.split()[-1] if len(line.split()) >= 6 else None
        elif line.startswith("VmFlags:") and current == str(path):
            flags.append(line)
    return flags


def test_index_maps_are_advised_random(tmp_path: Path) -> None:
    for cls, name in (
        (OffsetIndex, "00000000000000000000.index"),
        (TimeIndex, "00000000000000000000.timeindex"),
    ):
        index = cls(tmp_path / name, 0, 10 * 1024 * 1024)
        index.preallocate()
        try:
            flags = _vm_flags(tmp_path / name)
            assert flags, f"{name} is not mapped"
            assert all(" rr" in f for f in flags), flags
        finally:
            index.close()
