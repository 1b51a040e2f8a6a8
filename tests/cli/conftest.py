"""The `odradek` command as a user runs it: a subprocess of this interpreter, output captured."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

TIMEOUT = 60


def run_odradek(broker, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the CLI; connection options go right after the (sub)command, as with Kafka's tools."""
    split = 2 if args[0] in ("topics", "configs", "groups", "perf", "quotas", "users") else 1
    argv = [*args[:split], "--bootstrap-server", broker.bootstrap_servers, *args[split:]]
    return subprocess.run(
        [sys.executable, "-m", "odradek", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


@pytest.fixture
def odradek() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``odradek(broker, "topics", "list")``: anything with ``.bootstrap_servers`` as broker."""
    return run_odradek
