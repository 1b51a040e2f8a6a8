"""Running client.js: one KafkaJS scenario in a Node.js process, its JSON result back.

The tests skip, saying why, where Node.js or the installed KafkaJS is missing (``make
install`` runs ``npm ci`` here when npm is on the machine), as the browser tests do
without Chromium.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
NODE = shutil.which("node")

needs_kafkajs = pytest.mark.skipif(
    NODE is None or not (HERE / "node_modules" / "kafkajs").is_dir(),
    reason="KafkaJS is not installed (make install runs npm ci in tests/kafkajs; needs Node.js)",
)


def run_kafkajs(
    scenario: str,
    bootstrap: str,
    topic: str,
    group: str,
    *,
    ca: Path | None = None,
    sasl: tuple[str, str, str] | None = None,
) -> dict[str, Any]:
    """The scenario's result; AssertionError with KafkaJS's error when it failed.

    ``sasl`` is (mechanism, user, password) with KafkaJS's mechanism names ("plain",
    "scram-sha-256", ...); ``ca`` turns TLS on, trusting that CA.
    """
    done = _node(scenario, bootstrap, topic, group, ca, sasl)
    assert done.returncode == 0, f"KafkaJS {scenario}: {done.stderr.strip() or done.stdout.strip()}"
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def kafkajs_error(
    scenario: str,
    bootstrap: str,
    topic: str,
    group: str,
    *,
    ca: Path | None = None,
    sasl: tuple[str, str, str] | None = None,
) -> str:
    """The error KafkaJS ended the scenario with (AssertionError if it succeeded)."""
    done = _node(scenario, bootstrap, topic, group, ca, sasl)
    assert done.returncode != 0, f"KafkaJS {scenario} succeeded: {done.stdout.strip()}"
    return done.stderr.strip()


def _node(
    scenario: str,
    bootstrap: str,
    topic: str,
    group: str,
    ca: Path | None,
    sasl: tuple[str, str, str] | None,
) -> subprocess.CompletedProcess[str]:
    assert NODE is not None
    env = {key: value for key, value in os.environ.items() if not key.startswith("KAFKAJS_")}
    if ca is not None:
        env["KAFKAJS_CA"] = str(ca)
    if sasl is not None:
        env["KAFKAJS_SASL"] = ":".join(sasl)
    return subprocess.run(
        [NODE, str(HERE / "client.js"), scenario, bootstrap, topic, group],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=HERE,
    )
