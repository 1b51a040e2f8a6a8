"""Waiting on brokers from the client tools: a clear line soon, instead of a hang or a traceback.

librdkafka retries a broker that refuses connections for as long as a call's timeout allows,
and reports why only through ``error_cb``, which it runs only inside ``poll()``; a
concurrent future that runs out raises a bare TimeoutError. So the tools wait here: in short
steps that serve the client's callbacks, ending

- at once when every broker refused or dropped the connection (librdkafka's
  ``_ALL_BROKERS_DOWN``), naming the bootstrap servers and the last transport error
  ("Connection refused"). Kafka's own tools wait up to default.api.timeout.ms and then print
  a TimeoutException; an operator at a terminal learns the same thing sooner here;
- after ``TIMEOUT_S``, naming what was awaited;
- with a broker's error answer, as ``ToolError``.

librdkafka's own log lines (a FAIL line per reconnect attempt) are turned off (``log_level``
0): its errors reach the tool through ``error_cb`` and the tool says them once. ``-X
log_level=7`` brings them back.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import Future
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from odradek.cli.client_options import client_config
from odradek.cli.errors import ToolError

TIMEOUT_S = 30.0
_STEP_S = 0.1


class Pollable(Protocol):
    def poll(self, timeout: float) -> Any: ...


class BrokerWatch:
    """One client's connection errors, collected by its ``error_cb``.

    ``client_config()`` is merged into the client's configuration (before the user's own
    properties, which win). A Consumer must be polled only while it has nothing assigned
    (``poll`` would hand out records); every call here polls only before that.
    """

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.unreachable = False
        self._last_transport_error: str | None = None
        #: A refused login (SASL or TLS): retrying cannot cure it, so the tool stops at once.
        self._authentication_error: str | None = None

    def client_config(self) -> dict[str, Any]:
        return {"error_cb": self._on_error, "log_level": 0}

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in (KafkaError._TRANSPORT, KafkaError._RESOLVE):
            self._last_transport_error = error.str()
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.unreachable = True
        elif error.code() in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED):
            self._authentication_error = error.str()

    def check(self) -> None:
        """ToolError when no broker can be reached (what the last attempt failed with) or a
        broker refused the login."""
        if self._authentication_error is not None:
            raise ToolError(f"authentication failed: {self._authentication_error}")
        if self.unreachable:
            reason = self._last_transport_error or "all brokers are down"
            raise ToolError(f"cannot reach any broker at {self.bootstrap_servers}: {reason}")

    def wait(self, client: Pollable, future: Future, what: str, timeout: float = TIMEOUT_S) -> None:
        """Until ``future`` is done; ToolError if no broker is reachable or ``timeout`` runs out."""
        deadline = time.monotonic() + timeout
        while not future.done():
            client.poll(0)
            self.check()
            if time.monotonic() >= deadline:
                raise ToolError(f"timed out after {timeout:.0f} s waiting for {what}")
            try:
                future.exception(timeout=_STEP_S)
            except TimeoutError:
                pass

    def result(
        self, client: Pollable, future: Future, what: str, timeout: float = TIMEOUT_S
    ) -> Any:
        """``future``'s result; a broker's error answer becomes ToolError naming ``what``."""
        self.wait(client, future, what, timeout)
        try:
            return future.result()
        except KafkaException as exc:
            raise ToolError(f"{what}: {error_text(exc)}") from None

    def metadata(self, client: Any, topic: str | None = None, timeout: float = TIMEOUT_S) -> Any:
        """``client.list_topics(topic)`` (cluster metadata), waited for as ``wait`` does."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return client.list_topics(topic, timeout=_STEP_S * 5)
            except KafkaException as exc:
                code = exc.args[0].code()
                if code not in (KafkaError._TRANSPORT, KafkaError._TIMED_OUT):
                    raise ToolError(f"metadata: {error_text(exc)}") from None
            client.poll(0)
            self.check()
            if time.monotonic() >= deadline:
                raise ToolError(
                    f"timed out after {timeout:.0f} s waiting for metadata from "
                    f"{self.bootstrap_servers}"
                )


def admin_client(args: argparse.Namespace) -> tuple[AdminClient, BrokerWatch]:
    """An AdminClient for the tool's connection options, and the watch over its connections."""
    watch = BrokerWatch(args.bootstrap_server)
    return AdminClient(client_config(args, defaults=watch.client_config())), watch


def error_text(exc: KafkaException) -> str:
    """A client error as ``NAME: description`` (Kafka's error name, then librdkafka's text)."""
    error = exc.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {error.str()}"
    return str(error)
