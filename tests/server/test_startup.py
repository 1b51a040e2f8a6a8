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

from odradek.cli.serve import READY

TIMEOUT = 60
_IMPORT = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)\s*$")


def _modules_imported_until_ready(data_dir: Path) -> set[str]:
    cmd = [sys.executable, "-m", "odradek", "serve", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--port", "0"]
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1", "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
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
