"""StandardAuthorizer's decision, sans I/O: ACLs indexed by resource, asked one action at a time.

The rules are Kafka's (StandardAuthorizerData.authorize and findResult):

- A principal named in ``super.users`` may do anything, whatever the ACLs say.
- The ACLs that apply to a resource are those of its literal name, the literal wildcard
  "*" of its type, and every prefixed pattern its name starts with.
- An entry applies to the request when its principal is the caller's or "User:*", its host is
  the caller's address or "*", and its operation is the one asked, or ALL. An ALLOW entry also
  grants what its operation implies: READ, WRITE, DELETE and ALTER imply DESCRIBE;
  ALTER_CONFIGS implies DESCRIBE_CONFIGS. A DENY entry denies only its own operation (or ALL).
- One applying DENY denies, whatever allows. Else one applying ALLOW allows. Else, if the
  resource has no ACL at all (for anyone), ``allow.everyone.if.no.acl.found`` decides (false
  by default); a resource with ACLs for others is denied.

The index keeps a dict of literal names and, per resource type, a dict of prefixes with the
set of prefix lengths present, so a decision costs a few dict lookups however many ACLs are
stored; the broker asks on every Produce and Fetch. The store that persists the bindings (a
file, or ZooKeeper) calls ``apply`` with a resource's whole entry set whenever it changes,
so this object never does I/O and tests drive it directly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from odradek.security.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

#: Operations whose ALLOW also allows DESCRIBE (StandardAuthorizerData.IMPLIES_DESCRIBE).
IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
#: Operations whose ALLOW also allows DESCRIBE_CONFIGS.
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def parse_super_users(raw: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:broker``)."""
    if not raw:
        return frozenset()
    return frozenset(p.strip() for p in raw.split(";") if p.strip())


def entry_result(
    entry: AccessControlEntry, principal: str, host: str, operation: AclOperation
) -> AclPermissionType | None:
    """ALLOW or DENY if ``entry`` applies to the action, None if it does not (findResult)."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    if entry.operation != AclOperation.ALL:
        if entry.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if entry.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if entry.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif entry.operation != operation:
                return None
        elif entry.operation != operation:
            return None
    return entry.permission_type


class StandardAuthorizer:
    """The ACL index and the decisions over it."""

    def __init__(
        self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        #: (resource type, literal name) -> its entries.
        self._literal: dict[tuple[ResourceType, str], frozenset[AccessControlEntry]] = {}
        #: resource type -> prefix -> its entries.
        self._prefixed: dict[ResourceType, dict[str, frozenset[AccessControlEntry]]] = {}
        #: resource type -> how many stored prefixes have each length (lengths worth a lookup).
        self._prefix_lengths: dict[ResourceType, Counter[int]] = {}

    # -- the store's side ---------------------------------------------------------------------

    def load(self, acls: Mapping[ResourcePattern, Iterable[AccessControlEntry]]) -> None:
        """Replace every ACL (start-up, or a store that re-read everything)."""
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lengths.clear()
        for pattern, entries in acls.items():
            self.apply(pattern, entries)

    def apply(self, pattern: ResourcePattern, entries: Iterable[AccessControlEntry]) -> None:
        """Set the entries of one resource pattern (empty removes the pattern)."""
        entries = frozenset(entries)
        if pattern.pattern_type == PatternType.LITERAL:
            key = (pattern.resource_type, pattern.name)
            if entries:
                self._literal[key] = entries
            else:
                self._literal.pop(key, None)
            return
        if pattern.pattern_type != PatternType.PREFIXED:
            raise ValueError(f"cannot store a {pattern.pattern_type.name} pattern")
        prefixes = self._prefixed.setdefault(pattern.resource_type, {})
        lengths = self._prefix_lengths.setdefault(pattern.resource_type, Counter())
        had = pattern.name in prefixes
        if entries:
            prefixes[pattern.name] = entries
            if not had:
                lengths[len(pattern.name)] += 1
        elif had:
            del prefixes[pattern.name]
            lengths[len(pattern.name)] -= 1
            if not lengths[len(pattern.name)]:
                del lengths[len(pattern.name)]

    def entries(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        """The entries stored for exactly ``pattern``."""
        if pattern.pattern_type == PatternType.LITERAL:
            return self._literal.get((pattern.resource_type, pattern.name), frozenset())
        return self._prefixed.get(pattern.resource_type, {}).get(pattern.name, frozenset())

    def patterns(self) -> Iterator[ResourcePattern]:
        for resource_type, name in self._literal:
            yield ResourcePattern(resource_type, name, PatternType.LITERAL)
        for resource_type, prefixes in self._prefixed.items():
            for name in prefixes:
                yield ResourcePattern(resource_type, name, PatternType.PREFIXED)

    def acls(self, selection: AclBindingFilter) -> list[AclBinding]:
        """Every stored binding ``selection`` matches (DescribeAcls, DeleteAcls)."""
        found = []
        for pattern in self.patterns():
            if not selection.pattern.matches(pattern):
                continue
            for entry in self.entries(pattern):
                if selection.entry.matches(entry):
                    found.append(AclBinding(pattern, entry))
        return found

    # -- decisions ----------------------------------------------------------------------------

    def _applying(self, resource_type: ResourceType, name: str) -> Iterator[frozenset]:
        """The entry sets of the patterns that apply to the resource: literal, "*", prefixes."""
        literal = self._literal
        entries = literal.get((resource_type, name))
        if entries:
            yield entries
        entries = literal.get((resource_type, WILDCARD_RESOURCE))
        if entries:
            yield entries
        lengths = self._prefix_lengths.get(resource_type)
        if lengths:
            prefixes = self._prefixed[resource_type]
            for length in lengths:
                if length <= len(name):
                    entries = prefixes.get(name[:length])
                    if entries:
                        yield entries

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        """Whether ``principal`` connected from ``host`` may perform ``operation`` on the
        resource (a literal name, as every request names resources)."""
        if principal in self.super_users:
            return True
        found = allowed = False
        for entries in self._applying(resource_type, name):
            found = True
            for entry in entries:
                result = entry_result(entry, principal, host, operation)
                if result == AclPermissionType.DENY:
                    return False
                if result == AclPermissionType.ALLOW:
                    allowed = True
        if allowed:
            return True
        return not found and self.allow_everyone_if_no_acl_found

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of the type might allow ``operation`` (Kafka's default
        Authorizer.authorizeByResourceType, used by InitProducerId without a transactional id).

        Allowed when a made-up name is (super users, or no ACL and allow.everyone); else when
        the caller has an ALLOW for the operation (or ALL; implied operations do not count) on
        the "*" wildcard, or on a literal or prefixed name no DENY of theirs covers. A DENY on
        the "*" wildcard denies.
        """
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        wildcard_allow = False
        for pattern in self.patterns():
            if pattern.resource_type != resource_type:
                continue
            for entry in self.entries(pattern):
                if entry.host not in (host, WILDCARD_HOST):
                    continue
                if entry.principal not in (principal, WILDCARD_PRINCIPAL):
                    continue
                if entry.operation not in (operation, AclOperation.ALL):
                    continue
                literal = pattern.pattern_type == PatternType.LITERAL
                if entry.permission_type == AclPermissionType.DENY:
                    if literal and pattern.name == WILDCARD_RESOURCE:
                        return False
                    (deny_literal if literal else deny_prefixed).add(pattern.name)
                elif literal and pattern.name == WILDCARD_RESOURCE:
                    wildcard_allow = True
                else:
                    allow.append((pattern.pattern_type, pattern.name))
        if wildcard_allow:
            return True
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False
