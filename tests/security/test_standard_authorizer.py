"""The sans-I/O StandardAuthorizer: Kafka's rules case by case, and a hypothesis test of every
decision against a brute-force reading of the rules over a plain list of bindings."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.security.acl import (
    ANY_BINDING,
    CLUSTER_NAME,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    binding_problem,
    entries_from_json,
    entries_to_json,
    name_of,
    parse_name,
)
from odradek.security.authorizer import StandardAuthorizer, parse_super_users

Op, Perm, Rt, Pt = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def acl(
    name: str,
    op: AclOperation,
    perm: AclPermissionType = Perm.ALLOW,
    principal: str = ALICE,
    host: str = "*",
    pattern_type: PatternType = Pt.LITERAL,
    resource_type: ResourceType = Rt.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, op, perm),
    )


def authorizer(*bindings: AclBinding, **kwargs) -> StandardAuthorizer:
    core = StandardAuthorizer(**kwargs)
    by_pattern: dict[ResourcePattern, set] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    core.load(by_pattern)
    return core


def allowed(core, op, name="orders", principal=ALICE, host=HOST, rt=Rt.TOPIC) -> bool:
    return core.authorize(principal, host, op, rt, name)


def test_no_acls_denies_unless_allow_everyone():
    assert not allowed(authorizer(), Op.READ)
    assert allowed(authorizer(allow_everyone_if_no_acl_found=True), Op.READ)


def test_allow_everyone_does_not_apply_once_the_resource_has_acls_for_others():
    core = authorizer(acl("orders", Op.READ, principal=BOB), allow_everyone_if_no_acl_found=True)
    assert not allowed(core, Op.READ)
    assert allowed(core, Op.READ, principal=BOB)
    assert allowed(core, Op.READ, name="other")  # no ACL there: everyone


def test_super_users_bypass_deny():
    core = authorizer(acl("*", Op.ALL, Perm.DENY, principal="User:*"), super_users={"User:admin"})
    assert allowed(core, Op.DELETE, principal="User:admin")
    assert not allowed(core, Op.DELETE)


@pytest.mark.parametrize(
    ("granted", "implied"),
    [
        (Op.READ, Op.DESCRIBE),
        (Op.WRITE, Op.DESCRIBE),
        (Op.DELETE, Op.DESCRIBE),
        (Op.ALTER, Op.DESCRIBE),
        (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS),
    ],
)
def test_implied_operations(granted, implied):
    core = authorizer(acl("orders", granted))
    assert allowed(core, implied)
    assert allowed(core, granted)


def test_implication_is_for_allow_only_and_goes_one_way():
    assert not allowed(authorizer(acl("orders", Op.DESCRIBE)), Op.READ)
    assert not allowed(authorizer(acl("orders", Op.CREATE)), Op.DESCRIBE)
    # A DENY of READ does not deny DESCRIBE (granted by WRITE here).
    core = authorizer(acl("orders", Op.READ, Perm.DENY), acl("orders", Op.WRITE))
    assert allowed(core, Op.DESCRIBE)
    assert not allowed(core, Op.READ)


def test_all_matches_every_operation():
    core = authorizer(acl("orders", Op.ALL))
    assert all(allowed(core, op) for op in (Op.READ, Op.WRITE, Op.ALTER_CONFIGS, Op.DESCRIBE))


def test_deny_beats_allow_across_patterns():
    core = authorizer(acl("*", Op.READ), acl("ord", Op.READ, Perm.DENY, pattern_type=Pt.PREFIXED))
    assert not allowed(core, Op.READ, name="orders")
    assert allowed(core, Op.READ, name="payments")


def test_prefixed_literal_and_wildcard_patterns():
    core = authorizer(acl("pay", Op.WRITE, pattern_type=Pt.PREFIXED))
    assert allowed(core, Op.WRITE, name="payments")
    assert allowed(core, Op.WRITE, name="pay")
    assert not allowed(core, Op.WRITE, name="pa")
    assert not allowed(core, Op.WRITE, name="orders")
    literal = authorizer(acl("pay", Op.WRITE))
    assert not allowed(literal, Op.WRITE, name="payments")
    # "*" is a wildcard as a literal name only; a prefixed "*" is just the character.
    assert allowed(authorizer(acl("*", Op.WRITE)), Op.WRITE, name="anything")
    assert not allowed(authorizer(acl("*", Op.WRITE, pattern_type=Pt.PREFIXED)), Op.WRITE)


def test_principal_and_host_matching():
    core = authorizer(acl("orders", Op.READ, principal="User:*", host=HOST))
    assert allowed(core, Op.READ, principal=BOB)
    assert not allowed(core, Op.READ, host=OTHER_HOST)


def test_resource_types_are_separate():
    core = authorizer(acl("orders", Op.READ, resource_type=Rt.GROUP))
    assert allowed(core, Op.READ, rt=Rt.GROUP)
    assert not allowed(core, Op.READ, rt=Rt.TOPIC)


def test_apply_replaces_and_removes_a_patterns_entries():
    core = authorizer(acl("pay", Op.READ, pattern_type=Pt.PREFIXED))
    pattern = ResourcePattern(Rt.TOPIC, "pay", Pt.PREFIXED)
    core.apply(pattern, set())
    assert core.acls(ANY_BINDING) == []
    assert not allowed(core, Op.READ, name="payments")


def test_authorize_by_resource_type():
    def by_type(*bindings, **kwargs):
        return authorizer(*bindings, **kwargs).authorize_by_resource_type(
            ALICE, HOST, Op.WRITE, Rt.TOPIC
        )

    assert not by_type()
    assert by_type(allow_everyone_if_no_acl_found=True)
    assert by_type(acl("orders", Op.WRITE))
    assert by_type(acl("*", Op.ALL))
    assert not by_type(acl("orders", Op.WRITE), acl("orders", Op.WRITE, Perm.DENY))
    assert not by_type(
        acl("orders", Op.WRITE), acl("ord", Op.WRITE, Perm.DENY, pattern_type=Pt.PREFIXED)
    )
    assert not by_type(acl("orders", Op.WRITE), acl("*", Op.WRITE, Perm.DENY))
    assert by_type(acl("orders", Op.WRITE), acl("payments", Op.WRITE, Perm.DENY))
    assert by_type(super_users={ALICE})


def test_filters_as_kafka_matches_them():
    stored = [
        acl("orders", Op.READ),
        acl("*", Op.READ),
        acl("ord", Op.WRITE, pattern_type=Pt.PREFIXED),
        acl("g", Op.READ, resource_type=Rt.GROUP),
    ]
    core = authorizer(*stored)
    any_entry = AccessControlEntryFilter(None, None, Op.ANY, Perm.ANY)

    def names(rt, name, pt):
        return sorted(
            b.pattern.name
            for b in core.acls(AclBindingFilter(ResourcePatternFilter(rt, name, pt), any_entry))
        )

    assert names(Rt.TOPIC, "orders", Pt.MATCH) == ["*", "ord", "orders"]
    assert names(Rt.TOPIC, "orders", Pt.ANY) == ["orders"]
    assert names(Rt.ANY, None, Pt.PREFIXED) == ["ord"]
    assert names(Rt.ANY, None, Pt.ANY) == ["*", "g", "ord", "orders"]
    write_only = AclBindingFilter(
        ResourcePatternFilter(Rt.ANY, None, Pt.ANY),
        AccessControlEntryFilter(ALICE, "*", Op.WRITE, Perm.ALLOW),
    )
    assert core.acls(write_only) == [stored[2]]


def test_binding_problems_in_kafkas_words():
    assert binding_problem(acl("orders", Op.READ)) is None
    assert "CLUSTER" in binding_problem(acl("x", Op.ALTER, resource_type=Rt.CLUSTER))
    assert binding_problem(acl(CLUSTER_NAME, Op.ALTER, resource_type=Rt.CLUSTER)) is None
    assert binding_problem(acl("", Op.READ)) == "Invalid empty resource name"
    assert binding_problem(acl("orders", Op.ANY)) == "Invalid operation ANY"
    assert binding_problem(acl("orders", Op.READ, Perm.ANY)) == "Invalid permissionType ANY"
    assert binding_problem(acl("orders", Op.READ, pattern_type=Pt.MATCH)).startswith(
        "Invalid patternType"
    )
    assert "principal" in binding_problem(acl("orders", Op.READ, principal="alice"))


def test_znode_json_round_trip_in_kafkas_names():
    entries = {
        AccessControlEntry(ALICE, "*", Op.DESCRIBE_CONFIGS, Perm.ALLOW),
        AccessControlEntry(BOB, HOST, Op.ALL, Perm.DENY),
    }
    document = json.loads(json.dumps(entries_to_json(entries)))
    assert document["version"] == 1
    assert {
        "principal": ALICE,
        "permissionType": "Allow",
        "operation": "DescribeConfigs",
    }.items() <= (document["acls"][0].items())
    assert entries_from_json(document) == entries
    assert name_of(Rt.TRANSACTIONAL_ID) == "TransactionalId"
    assert parse_name(Rt, "TRANSACTIONAL_ID") == parse_name(Rt, "TransactionalId")


def test_super_users_config():
    assert parse_super_users("User:a; User:b;") == {"User:a", "User:b"}
    assert parse_super_users("") == frozenset()


# -- hypothesis: the index against the rules read literally over a list -------------------

NAMES = ["a", "ab", "abc", "b", "*"]
PRINCIPALS = [ALICE, BOB, "User:*"]
HOSTS = [HOST, OTHER_HOST, "*"]
OPS = [op for op in Op if op not in (Op.UNKNOWN, Op.ANY)]

bindings = st.builds(
    acl,
    name=st.sampled_from(NAMES),
    op=st.sampled_from(OPS),
    perm=st.sampled_from([Perm.ALLOW, Perm.DENY]),
    principal=st.sampled_from(PRINCIPALS),
    host=st.sampled_from(HOSTS),
    pattern_type=st.sampled_from([Pt.LITERAL, Pt.PREFIXED]),
    resource_type=st.sampled_from([Rt.TOPIC, Rt.GROUP]),
)


def reference(acls: list[AclBinding], allow_everyone: bool, principal, host, op, rt, name) -> bool:
    """StandardAuthorizer's rules, read literally, one binding at a time."""

    def applies_to_resource(b: AclBinding) -> bool:
        p = b.pattern
        if p.resource_type != rt:
            return False
        if p.pattern_type == Pt.LITERAL:
            return p.name in (name, "*")
        return name.startswith(p.name)

    def grants(e: AccessControlEntry) -> bool:
        if e.operation in (Op.ALL, op):
            return True
        if e.permission_type == Perm.DENY:
            return False
        if op == Op.DESCRIBE:
            return e.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
        return op == Op.DESCRIBE_CONFIGS and e.operation == Op.ALTER_CONFIGS

    on_resource = [b for b in acls if applies_to_resource(b)]
    matching = [
        b.entry
        for b in on_resource
        if b.entry.principal in (principal, "User:*")
        and b.entry.host in (host, "*")
        and grants(b.entry)
    ]
    if any(e.permission_type == Perm.DENY for e in matching):
        return False
    if matching:
        return True
    return not on_resource and allow_everyone


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(bindings, max_size=12),
    allow_everyone=st.booleans(),
    principal=st.sampled_from([ALICE, BOB]),
    host=st.sampled_from([HOST, OTHER_HOST]),
    op=st.sampled_from([op for op in OPS if op != Op.ALL]),
    rt=st.sampled_from([Rt.TOPIC, Rt.GROUP]),
    name=st.sampled_from(["a", "ab", "abc", "abd", "b", "c", "*"]),
)
def test_decisions_match_the_brute_force_reference(
    acls, allow_everyone, principal, host, op, rt, name
):
    core = authorizer(*acls, allow_everyone_if_no_acl_found=allow_everyone)
    assert core.authorize(principal, host, op, rt, name) == reference(
        acls, allow_everyone, principal, host, op, rt, name
    )


@settings(max_examples=100, deadline=None)
@given(acls=st.lists(bindings, max_size=12), removed=st.lists(bindings, max_size=6))
def test_incremental_applies_leave_the_same_index_as_a_load(acls, removed):
    """apply(pattern, entries) after each change gives what loading the end state gives."""
    core = StandardAuthorizer()
    state: dict[ResourcePattern, set] = {}
    for b in acls:
        state.setdefault(b.pattern, set()).add(b.entry)
        core.apply(b.pattern, state[b.pattern])
    for b in removed:
        state.setdefault(b.pattern, set()).discard(b.entry)
        core.apply(b.pattern, state[b.pattern])
    loaded = authorizer(*(AclBinding(p, e) for p, es in state.items() for e in es))
    assert sorted(map(repr, core.acls(ANY_BINDING))) == sorted(map(repr, loaded.acls(ANY_BINDING)))
    for name in ["a", "ab", "abc", "b", "zz"]:
        for op in (Op.READ, Op.DESCRIBE, Op.WRITE):
            assert core.authorize(ALICE, HOST, op, Rt.TOPIC, name) == loaded.authorize(
                ALICE, HOST, op, Rt.TOPIC, name
            )
