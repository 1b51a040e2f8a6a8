"""ACL bindings and filters: Kafka's AclBinding, ResourcePattern, AccessControlEntry and filters.

The codes are Kafka's wire codes (CreateAcls, DescribeAcls, DeleteAcls carry them as int8)
and the names are Kafka's too: ``SecurityUtils`` writes them in PascalCase ("Topic",
"ClusterAction", "Allow") in ZooKeeper's ``/kafka-acl`` znodes and reads them back without
regard to case, and so do ``name_of`` and ``parse_name``.

A binding names a principal as text ("User:alice"), a host as text ("*" or an IP address), as
Kafka stores them: matching is string equality, with "User:*" and "*" as the wildcards
(StandardAuthorizerData.findResult), so nothing here needs the network layer's types.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

E = TypeVar("E", bound=IntEnum)


class AclOperation(IntEnum):
    """Kafka's AclOperation codes (also the bit positions of the authorized-operations field)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    #: KIP-939: InitProducerId with Enable2Pc needs it on the transactional id, besides WRITE.
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    """LITERAL and PREFIXED are stored; ANY and MATCH only appear in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


#: The name Kafka gives the single CLUSTER resource.
CLUSTER_NAME = "kafka-cluster"
#: A LITERAL pattern with this name matches every resource of its type.
WILDCARD_RESOURCE = "*"
#: An entry with this principal matches every principal.
WILDCARD_PRINCIPAL = "User:*"
#: An entry with this host matches every client address.
WILDCARD_HOST = "*"

_Op = AclOperation

#: Kafka's AclEntry.supportedOperations per concrete resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            _Op.READ,
            _Op.WRITE,
            _Op.CREATE,
            _Op.DESCRIBE,
            _Op.DELETE,
            _Op.ALTER,
            _Op.DESCRIBE_CONFIGS,
            _Op.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {_Op.READ, _Op.DESCRIBE, _Op.DELETE, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            _Op.CREATE,
            _Op.CLUSTER_ACTION,
            _Op.DESCRIBE_CONFIGS,
            _Op.ALTER_CONFIGS,
            _Op.IDEMPOTENT_WRITE,
            _Op.ALTER,
            _Op.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE, _Op.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

#: Resource types a binding may name (not UNKNOWN, not the filter-only ANY).
CONCRETE_RESOURCE_TYPES = tuple(SUPPORTED_OPERATIONS)


def name_of(value: IntEnum) -> str:
    """Kafka's SecurityUtils name: TRANSACTIONAL_ID -> "TransactionalId", READ -> "Read"."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_name(enum: type[E], text: str) -> E:
    """The member named ``text`` in Kafka's PascalCase or upper-case form; ValueError if none."""
    wanted = text.replace("_", "").upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {enum.__name__} {text!r}")


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{name_of(self.resource_type)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which patterns a filter selects (Kafka's ResourcePatternFilter.matches).

    ``name`` None selects every name. Pattern type ANY selects every pattern of exactly that
    name; MATCH selects the patterns that would apply to a resource of that name (the literal
    name, the "*" wildcard, every prefix of it); LITERAL or PREFIXED select that pattern type.
    """

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        return self.name.startswith(pattern.name)

    def unknown_element(self) -> str | None:
        """What makes the filter unusable (an UNKNOWN code), as Kafka's findIndefiniteField."""
        if self.resource_type == ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.pattern_type == PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Which entries a filter selects: None or ANY is "every"; anything else must be equal."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def unknown_element(self) -> str | None:
        if self.operation == AclOperation.UNKNOWN:
            return "Operation is UNKNOWN."
        if self.permission_type == AclPermissionType.UNKNOWN:
            return "Permission type is UNKNOWN."
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def unknown_element(self) -> str | None:
        return self.pattern.unknown_element() or self.entry.unknown_element()


#: The filter selecting every binding.
ANY_BINDING = AclBindingFilter(
    ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
    AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY),
)


def binding_problem(binding: AclBinding) -> str | None:
    """Why a binding cannot be created, in Kafka's words (INVALID_REQUEST), or None.

    As AclApis and the controller's AclControlManager check: concrete codes only, a name,
    the one cluster name, a principal of the form ``type:name``. An operation the resource
    type does not have is stored (Kafka's broker accepts it; kafka-acls.sh refuses it).
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type not in SUPPORTED_OPERATIONS:
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {entry.permission_type.name}"
    principal_type, colon, principal_name = entry.principal.partition(":")
    if not colon or not principal_type or not principal_name:
        return f"Could not parse principal from `{entry.principal}` (expected type:name)"
    return None


def entries_to_json(entries: Iterable[AccessControlEntry]) -> dict:
    """Kafka's AclEntry.toJsonCompatibleMap: the body of a ``/kafka-acl`` znode."""
    return {
        "version": 1,
        "acls": [
            {
                "principal": e.principal,
                "permissionType": name_of(e.permission_type),
                "operation": name_of(e.operation),
                "host": e.host,
            }
            for e in sorted(entries, key=_entry_order)
        ],
    }


def entries_from_json(document: dict) -> frozenset[AccessControlEntry]:
    """Kafka's AclEntry.fromBytes; ValueError for a document it would not read."""
    if document.get("version") != 1:
        raise ValueError(f"unsupported ACL document version {document.get('version')!r}")
    return frozenset(
        AccessControlEntry(
            acl["principal"],
            acl["host"],
            parse_name(AclOperation, acl["operation"]),
            parse_name(AclPermissionType, acl["permissionType"]),
        )
        for acl in document["acls"]
    )


def _entry_order(entry: AccessControlEntry) -> tuple:
    return (entry.principal, entry.host, entry.operation, entry.permission_type)
