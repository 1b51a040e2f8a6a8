"""The broker's malloc thresholds: a large buffer freed and allocated again is not faulted in anew.

Each case runs in a child interpreter, so the test process's own allocator is left alone,
and counts the minor page faults (the kernel zero-filling pages) of allocating, filling and
freeing a 1 MiB buffer many times: untuned, glibc maps and unmaps (or trims) those pages
each time; tuned, the heap keeps them.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from odradek.server.allocator import set_by_environment

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

CHILD = """
import json, resource, sys
from odradek.server.allocator import tune_allocator
applied = tune_allocator() if sys.argv[1] == "tuned" else False
def cycle():
    buffers = [bytearray(1 << 20) for _ in range(3)]  # a request, a response, its records
    for b in buffers:
        b[::4096] = b"x" * len(b[::4096])
for _ in range(5):
    cycle()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):
    cycle()
print(json.dumps({"applied": applied,
                  "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""

PAGES = 50 * 3 * (1 << 20) // 4096  # pages touched by the measured cycles


def run_child(mode: str) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUN"))}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_tuned_broker_reuses_large_buffers_without_page_faults():
    untuned, tuned = run_child("untuned"), run_child("tuned")
    assert tuned["applied"]
    assert untuned["faults"] > PAGES // 2  # the cost the tuning removes is there without it
    assert tuned["faults"] < PAGES // 20


def test_settings_in_the_environment_win():
    assert set_by_environment({"MALLOC_TRIM_THRESHOLD_": "1"})
    assert set_by_environment({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=4096"})
    assert not set_by_environment({"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX"})
    assert not set_by_environment({})
