"""ACLs in ZooKeeper, in the layout Kafka's AclAuthorizer kept there (``kafka.zk.ZkData``).

- ``/kafka-acl/<ResourceType>/<name>``: a LITERAL pattern's entries,
  ``{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}]}``; ``/kafka-acl-extended/prefixed/<ResourceType>/<name>``
  the same for a PREFIXED pattern. Types and operations in PascalCase ("TransactionalId").
- A change is announced by a persistent sequential node: ``/kafka-acl-changes/acl_changes_N``
  holding ``TOPIC:<name>`` for a literal pattern, ``/kafka-acl-extended-changes/acl_changes_N``
  holding ``{"version":1,"resourceType":"TOPIC","name":...,"patternType":"PREFIXED"}``.

Writes are Kafka's: read the pattern's znode with its version, write the new entry set
conditionally on that version (create it if missing, delete it once empty), start again on a
conflict, then add the change node. Every broker watches both change paths; a new change
node names a pattern, whose znode the broker re-reads and applies. The change node only
says *which* pattern changed, never how, so a watch that skips intermediate children (kazoo
reports the latest list) still converges: the re-read gives the latest entries.

Each broker deletes change nodes older than 15 minutes after processing a path, as Kafka
does (zk_notifications).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.recipe.watchers import ChildrenWatch

from odradek.metadata.zk_notifications import purge_obsolete_notifications
from odradek.security.acl import (
    CONCRETE_RESOURCE_TYPES,
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_to_json,
    name_of,
    parse_name,
)

log = logging.getLogger(__name__)

LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
#: Pattern types kept under /kafka-acl-extended/<lower-case name>.
EXTENDED_TYPES = (PatternType.PREFIXED,)


def store_path(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACLS
    return f"{EXTENDED_ACLS}/{pattern_type.name.lower()}"


def resource_path(pattern: ResourcePattern) -> str:
    return f"{store_path(pattern.pattern_type)}/{name_of(pattern.resource_type)}/{pattern.name}"


def encode_change(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(path prefix of the sequential node, its data) announcing a change of ``pattern``."""
    if pattern.pattern_type == PatternType.LITERAL:
        return (
            f"{LITERAL_CHANGES}/{CHANGE_PREFIX}",
            f"{pattern.resource_type.name}:{pattern.name}".encode(),
        )
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", json.dumps(event).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The pattern a change node names; ValueError if it names none."""
    text = data.decode()
    if changes_path == LITERAL_CHANGES:
        resource_type, colon, name = text.partition(":")
        if not colon:
            raise ValueError(f"expected ResourceType:ResourceName, got {text!r}")
        return ResourcePattern(parse_name(ResourceType, resource_type), name, PatternType.LITERAL)
    event = json.loads(text)
    if event.get("version") != 1:
        raise ValueError(f"unsupported ACL change event version {event.get('version')!r}")
    return ResourcePattern(
        parse_name(ResourceType, event["resourceType"]),
        event["name"],
        parse_name(PatternType, event["patternType"]),
    )


def _sequence(child: str) -> int:
    return int(child.removeprefix(CHANGE_PREFIX)) if child.startswith(CHANGE_PREFIX) else -1


class ZkAcls:
    """Reads, writes and follows the ACL znodes of one ZooKeeper session.

    ``post`` runs a function on the broker's event loop (the store's ``_post``); ``apply`` is
    the store's ``_apply_acls``, called there with each pattern's entries as read.
    """

    def __init__(
        self,
        client: KazooClient,
        post: Callable[..., None],
        apply: Callable[[ResourcePattern, frozenset[AccessControlEntry]], None],
    ) -> None:
        self.client = client
        self._post = post
        self._apply = apply
        #: Changes path -> the highest sequence number already handled (kazoo's threads).
        self._seen: dict[str, int] = {}

    def ensure_paths(self) -> None:
        """Kafka's AclAuthorizer created these at start-up (createAclPathsIfNeeded)."""
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES, LITERAL_ACLS):
            self.client.ensure_path(path)
        for pattern_type in EXTENDED_TYPES:
            self.client.ensure_path(store_path(pattern_type))

    def load_and_follow(self) -> None:
        """Read every stored pattern, then follow the change paths (blocking; start-up).

        The change nodes present before the load are only counted: the load reads what they
        announced. A change written while loading is handled again by the watch (a re-read,
        so no harm).
        """
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            children = self.client.get_children(path)
            self._seen[path] = max((_sequence(c) for c in children), default=-1)
        for pattern_type in (PatternType.LITERAL, *EXTENDED_TYPES):
            for resource_type in CONCRETE_RESOURCE_TYPES:
                type_path = f"{store_path(pattern_type)}/{name_of(resource_type)}"
                try:
                    names = self.client.get_children(type_path)
                except NoNodeError:
                    continue
                for name in names:
                    self._reload(ResourcePattern(resource_type, name, pattern_type))
        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            ChildrenWatch(
                self.client, path, lambda children, path=path: self._changed(path, children)
            )

    def _changed(self, path: str, children: list[str]) -> None:
        for child in sorted(children, key=_sequence):
            sequence = _sequence(child)
            if sequence <= self._seen[path]:
                continue
            self._seen[path] = sequence
            try:
                data, _ = self.client.get(f"{path}/{child}")
                pattern = decode_change(path, data)
            except NoNodeError:
                continue
            except (ValueError, KeyError) as e:
                log.warning("ignoring ACL change notification %s/%s: %s", path, child, e)
                continue
            self._reload(pattern)
        purge_obsolete_notifications(self.client, path, children)

    def _read(self, pattern: ResourcePattern) -> tuple[frozenset[AccessControlEntry], int]:
        """The pattern's entries and znode version (-1: no znode)."""
        try:
            data, stat = self.client.get(resource_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return entries_from_json(json.loads(data)), stat.version

    def _reload(self, pattern: ResourcePattern) -> None:
        try:
            entries, _ = self._read(pattern)
        except (ValueError, KeyError) as e:
            log.warning("ignoring unreadable ACLs of %s: %s", pattern, e)
            return
        self._post(self._apply, pattern, entries)

    def update(
        self,
        pattern: ResourcePattern,
        add: Iterable[AccessControlEntry],
        remove: Iterable[AccessControlEntry],
    ) -> frozenset[AccessControlEntry]:
        """Change the pattern's znode conditionally, announce it, return the entries after."""
        add, remove = frozenset(add), frozenset(remove)
        path = resource_path(pattern)
        while True:
            before, version = self._read(pattern)
            after = (before | add) - remove
            if after == before:
                return after
            data = json.dumps(entries_to_json(after)).encode()
            try:
                if version < 0:
                    self.client.create(path, data, makepath=True)
                elif after:
                    self.client.set(path, data, version=version)
                else:
                    self.client.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                continue  # another broker changed it meanwhile: read again
            break
        prefix, change = encode_change(pattern)
        self.client.create(prefix, change, sequence=True)
        return after
