"""Odradek: a Kafka-compatible event-streaming broker in Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from odradek.server.embedded import EmbeddedBroker

__all__ = ["EmbeddedBroker", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import odradek` stays cheap for tools and Spark executors.
    if name == "EmbeddedBroker":
        from odradek.server.embedded import EmbeddedBroker

        return EmbeddedBroker
    raise AttributeError(name)
