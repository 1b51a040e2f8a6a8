"""The examples run as a user would run them: a fresh interpreter, no PYSPARK_PYTHON set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_read_write_example_needs_no_pyspark_python(bootstrap, new_topic, tmp_path):
    """Without use_this_python() Spark's workers would run the `python3` on the PATH: here one that fails."""
    decoy = tmp_path / "bin"
    decoy.mkdir()
    (decoy / "python3").write_text(
        "#!/bin/sh\necho 'not the interpreter running the example' >&2\nexit 1\n"
    )
    (decoy / "python3").chmod(0o755)
    topic = new_topic()
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env.update(
        PATH=f"{decoy}{os.pathsep}{env['PATH']}",
        ODRADEK_BOOTSTRAP_SERVERS=bootstrap,
        ODRADEK_EXAMPLE_TOPIC=topic,
    )
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / "read_write.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [line.split("|")[1:3] for line in result.stdout.splitlines() if line.startswith("|")]
    assert sorted((k.strip(), v.strip()) for k, v in lines[1:]) == [
        ("alice", "hello"),
        ("bob", "world"),
    ]
