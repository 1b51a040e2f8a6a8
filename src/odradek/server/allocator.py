"""The C allocator's settings for a broker process: large buffers reused, not faulted in anew.

A broker allocates buffers the size of requests and responses all the time: a Produce
request's frame (up to ``message.max.bytes``, 1 MiB by default; network/framing.py), a
follower's Fetch response and the record bytes decoded from it. glibc's malloc serves a
block above its mmap threshold (128 KiB at start, raised to the size of the largest mapped
block freed so far) with a fresh mapping, and gives the heap's top back to the kernel once
more than twice that threshold is free there. Either way the next buffer of that size is
made of pages the kernel must fault in and zero again, 256 page faults per MiB, and in a
replicated cluster every byte passes through such buffers on the leader and on each
follower. Measured with bench/cluster_bench.py's RF=3 acks=all row of 1 KB records on this
project's 2-core machine: a follower spent 1.1-1.9 ms of system CPU per MB replicated
without this tuning and 0.3-0.4 ms with it (its user CPU 1.1-1.4 and 0.9-1.2 ms).

So ``odradek serve`` sets M_MMAP_THRESHOLD to 32 MiB (glibc's ceiling on 64-bit systems)
and M_TRIM_THRESHOLD to 64 MiB: blocks up to 32 MiB come from the heap, and freed ones are
reused by the next request instead of being returned and faulted in again. The price is
resident memory: up to 64 MiB of free heap may stay with the process after a burst, which
is small beside what ``queued.max.request.bytes`` (256 MiB) already lets requests hold.

This is a decision for a process that is a broker, so it is made where ``odradek serve``
starts and never by the library inside someone else's process (EmbeddedBroker runs
``odradek serve`` as a child). Settings given in the environment (MALLOC_MMAP_THRESHOLD_,
MALLOC_TRIM_THRESHOLD_, or malloc tunables in GLIBC_TUNABLES) win, and other C libraries
(musl, macOS) are left as they are.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

log = logging.getLogger(__name__)

#: mallopt parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Largest mmap threshold glibc accepts on 64-bit systems (DEFAULT_MMAP_THRESHOLD_MAX).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024

_ENVIRONMENT_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def set_by_environment(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether the environment already chose malloc's thresholds."""
    if any(name in environ for name in _ENVIRONMENT_SETTINGS):
        return True
    return "glibc.malloc." in environ.get("GLIBC_TUNABLES", "")


def tune_allocator() -> bool:
    """Apply the thresholds above to this process's glibc malloc; False when it is left alone."""
    if platform.libc_ver()[0] != "glibc" or set_by_environment():
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    applied = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
    if not applied:
        log.warning("malloc thresholds not applied; large buffers are faulted in anew")
    return applied
