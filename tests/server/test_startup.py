"""What `odradek serve` does before it is ready: no test-only or client libraries in the broker.

The modules come from the broker process itself: run with PYTHONPROFILEIMPORTTIME,
Python writes one line per imported module to stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from odradek.cli.main import build_parser, command_name
from odradek.server.ready import READY

TIMEOUT = 60
_IMPORT = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def _modules_imported_until_ready(data_dir: Path) -> set[str]:
    cmd = [
        sys.executable,
        "-m",
        "odradek",
        "serve",
        "--data-dir",
        str(data_dir),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    ready = threading.Event()

    def wait_ready() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(READY):
                ready.set()

    threading.Thread(target=wait_ready, daemon=True).start()
    try:
        assert ready.wait(TIMEOUT), "the broker did not print its ready line"
    finally:
        process.terminate()
        _, err = process.communicate(timeout=TIMEOUT)
    return {m.group(1) for m in map(_IMPORT.match, err.splitlines()) if m}


def test_the_broker_does_not_import_hypothesis(tmp_path: Path) -> None:
    """kio imports hypothesis when it is installed (as in this venv); the broker keeps it out."""
    modules = _modules_imported_until_ready(tmp_path / "data")
    assert "kio.schema.errors" in modules  # the capture works: the broker's own imports are listed
    # kio's `import hypothesis.strategies` is still attempted (and listed); the package is never loaded.
    assert "hypothesis" not in modules


def test_the_broker_does_not_import_a_client_library(tmp_path: Path) -> None:
    """The client tools' modules import confluent-kafka; `odradek serve` registers only itself."""
    modules = _modules_imported_until_ready(tmp_path / "data")
    assert (
        "odradek.server.broker" in modules
    )  # the capture works (import_module calls are not listed)
    assert not {m for m in modules if m.split(".")[0] == "confluent_kafka"}
    # Nor, without zookeeper.connect, the cluster's ZooKeeper client or cluster code.
    assert not {m for m in modules if m.split(".")[0] == "kazoo" or ".zk_" in m}
    # Nor, without metrics.http.listener, prometheus_client or the metrics collectors.
    assert not {m for m in modules if m.split(".")[0] == "prometheus_client"}
    assert "odradek.metrics.collectors" not in modules


def test_command_name_finds_the_subcommand_past_the_global_options() -> None:
    assert command_name(["--log-level", "DEBUG", "serve", "--port", "0"]) == "serve"
    assert command_name(["topics", "list"]) == "topics"
    assert command_name(["--help", "serve"]) is None  # the top-level help lists every subcommand
    assert command_name([]) is None
    assert "topics" in build_parser(None).format_help()
    assert "topics" not in build_parser("serve").format_help()
    assert (
        "topics" in build_parser("no-such-command").format_help()
    )  # argparse then names the choices
