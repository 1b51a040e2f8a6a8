"""The broker's authorizer: StandardAuthorizer's decisions over the ACLs of the cluster metadata.

``authorizer.class.name`` names Kafka's StandardAuthorizer (KRaft) or AclAuthorizer
(ZooKeeper mode); both decide by the same rules and Odradek serves both names with this
class, keeping the ACLs where the rest of its metadata is: the single node's metadata file,
or ZooKeeper's ``/kafka-acl`` in a cluster (``metadata.zk_acls``). The store tells this
object every change to a pattern, whichever broker made it, and the sans-I/O core
(``security.authorizer``) answers from memory.

Denials are logged at INFO on ``kafka.authorizer.logger``, as Kafka's audit log does for
actions that log when denied; computing authorized operations and listing every topic for
Metadata do not log (``log_denied``), as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from odradek.metadata.store import MetadataStore
from odradek.network.listener import ConnectionInfo
from odradek.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    ResourcePattern,
    ResourceType,
)
from odradek.security.authorizer import StandardAuthorizer, parse_super_users
from odradek.server.config import BrokerConfig

audit = logging.getLogger("kafka.authorizer.logger")


class AclAuthorizer:
    """Decisions from the in-memory index; changes of ACLs go through the metadata store."""

    def __init__(self, config: BrokerConfig, metadata: MetadataStore) -> None:
        self._metadata = metadata
        self.core = StandardAuthorizer(
            parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"]
        )
        metadata.acl_listeners.append(self.core.apply)
        self.core.load(metadata.acls())

    @classmethod
    def from_config(cls, config: BrokerConfig, metadata: MetadataStore) -> AclAuthorizer | None:
        """The authorizer ``authorizer.class.name`` asks for, or None (every action allowed)."""
        return cls(config, metadata) if config["authorizer.class.name"] else None

    def authorize(
        self,
        connection: ConnectionInfo,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        log_denied: bool = True,
    ) -> bool:
        principal = str(connection.principal)
        allowed = self.core.authorize(
            principal, connection.peer_host, operation, resource_type, name
        )
        if not allowed and log_denied and audit.isEnabledFor(logging.INFO):
            audit.info(
                "Principal = %s is Denied operation = %s from host = %s on resource = %s:%s",
                principal,
                operation.name,
                connection.peer_host,
                resource_type.name,
                name,
            )
        return allowed

    def authorize_by_resource_type(
        self, connection: ConnectionInfo, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        return self.core.authorize_by_resource_type(
            str(connection.principal), connection.peer_host, operation, resource_type
        )

    def acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        return self.core.acls(selection)

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Store the bindings, one write per resource pattern."""
        by_pattern: dict[ResourcePattern, list] = {}
        for binding in bindings:
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        for pattern, entries in by_pattern.items():
            self._metadata.update_acls(pattern, add=entries)

    def delete_acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        """Remove every binding ``selection`` matches; return those removed."""
        matched = self.core.acls(selection)
        by_pattern: dict[ResourcePattern, list] = {}
        for binding in matched:
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        for pattern, entries in by_pattern.items():
            self._metadata.update_acls(pattern, remove=entries)
        return matched
