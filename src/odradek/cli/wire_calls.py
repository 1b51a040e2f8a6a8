"""Wire-protocol calls of the client tools for APIs confluent-kafka's AdminClient lacks.

One blocking connection per broker (``spark.connection``, the project's kio client) that
speaks the listener's TLS and SASL as ``--command-config`` and ``-X`` describe them
(``client_security.wire_security``); a refused connection or login, or a broker that does
not serve the versions a tool speaks, is a ``ToolError`` naming the broker.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from odradek.cli.client_options import client_config
from odradek.cli.client_security import WireSecurity, wire_security
from odradek.cli.errors import ToolError
from odradek.network.sasl_client import SaslExchangeError
from odradek.protocol import schemas
from odradek.spark.connection import BrokerConnection, BrokerError

TIMEOUT_S = 30.0


def security(args: argparse.Namespace) -> WireSecurity:
    """TLS and SASL from --command-config and -X, read as the confluent-kafka tools read them."""
    return wire_security(client_config(args))


@contextmanager
def connect(address: str, security: WireSecurity, client_id: str) -> Iterator[BrokerConnection]:
    host, _, port = address.rpartition(":")
    try:
        connection = BrokerConnection(
            host, int(port), client_id, TIMEOUT_S, security.ssl_context, security.sasl
        )
    except (OSError, SaslExchangeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ToolError(f"cannot connect to {address}: {reason}") from None
    except BrokerError as exc:
        raise ToolError(str(exc)) from None
    try:
        yield connection
    except (OSError, ConnectionError) as exc:
        raise ToolError(f"{address}: {exc}") from None
    finally:
        connection.close()


def version(connection: BrokerConnection, api_key: int, lowest: int, highest: int) -> int:
    try:
        return connection.version(api_key, lowest, highest)
    except RuntimeError as exc:  # the broker does not serve the versions this tool speaks
        raise ToolError(str(exc)) from None


def call(connection: BrokerConnection, api_key: int, highest: int, **fields: Any) -> Any:
    """The response to one request of the highest version both sides speak up to ``highest``."""
    chosen = version(connection, api_key, 0, highest)
    return connection.request(schemas.build(schemas.request_schema(api_key, chosen), **fields))
