"""Kafka's ACL rules: pattern matching (literal, ``*``, prefixed), deny wins, implied operations, the
no-ACL default, super users, DescribeAcls/DeleteAcls filters (ANY and MATCH), validation, persistence."""

from __future__ import annotations

from pathlib import Path

from headwater.broker.access.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    AclPermission,
    AclStore,
    Authorizer,
    PatternType,
    ResourceType,
    invalid_binding,
    invalid_filter,
)

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermission.ALLOW, AclPermission.DENY
Op = AclOperation


def acl(rtype: ResourceType, name: str, op: AclOperation, perm: AclPermission = ALLOW, pattern: PatternType = LIT,
        principal: str = "User:alice", host: str = "*") -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def authorizer(tmp_path: Path, *bindings: AclBinding, allow_if_no_acl: bool = False,
               super_users: frozenset[str] = frozenset()) -> Authorizer:
    store = AclStore(tmp_path)
    store.create(list(bindings))
    return Authorizer(store, True, set(super_users), allow_if_no_acl)


def test_literal_wildcard_and_prefixed_patterns(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, acl(T, "orders", Op.WRITE), acl(T, "logs-", Op.READ, pattern=PRE),
                      acl(G, "*", Op.READ))
    assert auth.authorize("User:alice", "127.0.0.1", Op.WRITE, T, "orders")
    assert not auth.authorize("User:alice", "127.0.0.1", Op.READ, T, "orders")
    assert not auth.authorize("User:alice", "127.0.0.1", Op.WRITE, T, "orders2")  # literal is the whole name
    assert auth.authorize("User:alice", "127.0.0.1", Op.READ, T, "logs-app")
    assert not auth.authorize("User:alice", "127.0.0.1", Op.READ, T, "log")
    assert auth.authorize("User:alice", "127.0.0.1", Op.READ, G, "any-group")
    assert not auth.authorize("User:bob", "127.0.0.1", Op.READ, G, "any-group")


def test_deny_wins_and_wildcard_principal_and_host(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, acl(T, "*", Op.ALL, principal="User:*"),
                      acl(T, "secret", Op.READ, DENY, principal="User:bob"),
                      acl(T, "pinned", Op.WRITE, principal="User:carol", host="10.0.0.1"))
    assert auth.authorize("User:bob", "h", Op.READ, T, "public")
    assert not auth.authorize("User:bob", "h", Op.READ, T, "secret")
    assert auth.authorize("User:bob", "h", Op.WRITE, T, "secret")  # only READ is denied
    assert auth.authorize("User:bob", "h", Op.DESCRIBE, T, "secret")  # a deny is not implied
    assert auth.authorize("User:carol", "10.0.0.1", Op.WRITE, T, "pinned")


def test_implied_operations_and_all(tmp_path: Path) -> None:
    auth = authorizer(tmp_path, acl(T, "t", Op.READ), acl(T, "c", Op.ALTER_CONFIGS), acl(C, "kafka-cluster", Op.ALL))
    assert auth.authorize("User:alice", "h", Op.DESCRIBE, T, "t")  # READ implies DESCRIBE
    assert not auth.authorize("User:alice", "h", Op.WRITE, T, "t")
    assert auth.authorize("User:alice", "h", Op.DESCRIBE_CONFIGS, T, "c")
    assert not auth.authorize("User:alice", "h", Op.DESCRIBE, T, "c")
    assert auth.authorize("User:alice", "h", Op.CREATE, C, "kafka-cluster")


def test_no_acl_default_and_super_users(tmp_path: Path) -> None:
    closed = authorizer(tmp_path / "a", acl(T, "t", Op.READ))
    assert not closed.authorize("User:alice", "h", Op.READ, T, "other")
    opened = authorizer(tmp_path / "b", acl(T, "t", Op.READ, principal="User:bob"), allow_if_no_acl=True)
    assert opened.authorize("User:alice", "h", Op.READ, T, "other")  # no ACL names it
    assert not opened.authorize("User:alice", "h", Op.READ, T, "t")  # some ACL names it: not for alice
    root = authorizer(tmp_path / "c", acl(T, "t", Op.ALL, DENY, principal="User:*"),
                      super_users=frozenset({"User:root"}))
    assert root.authorize("User:root", "h", Op.READ, T, "t")
    assert not Authorizer(AclStore(tmp_path / "d"), True, set(), False).authorize("User:x", "h", Op.READ, T, "t")
    assert Authorizer(AclStore(tmp_path / "e"), False, set(), False).authorize("User:x", "h", Op.READ, T, "t")


def test_filters_any_and_match(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    a, b, c = acl(T, "orders", Op.READ), acl(T, "ord", Op.WRITE, pattern=PRE), acl(T, "*", Op.DESCRIBE)
    d = acl(G, "g", Op.READ, principal="User:bob")
    store.create([a, b, c, d, a])
    assert len(store.bindings) == 4  # the same binding twice is stored once
    everything = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Op.ANY, AclPermission.ANY)
    assert store.describe(everything) == [a, b, c, d]
    match = AclFilter(T, "orders", PatternType.MATCH, None, None, Op.ANY, AclPermission.ANY)
    assert store.describe(match) == [a, b, c]
    literal = AclFilter(T, "orders", LIT, None, None, Op.ANY, AclPermission.ANY)
    assert store.describe(literal) == [a]
    bob = AclFilter(ResourceType.ANY, None, PatternType.ANY, "User:bob", None, Op.ANY, AclPermission.ANY)
    assert store.describe(bob) == [d]
    removed = store.delete([literal, match])
    assert removed == [[a], [b, c]] and store.bindings == [d]
    assert AclStore(tmp_path).bindings == [d]  # persisted


def test_validation_names_the_problem() -> None:
    assert invalid_binding(acl(T, "t", Op.READ)) is None
    assert "patternType" in (invalid_binding(acl(T, "t", Op.READ, pattern=PatternType.MATCH)) or "")
    assert "operation" in (invalid_binding(acl(T, "t", Op.ANY)) or "")
    assert "kafka-cluster" in (invalid_binding(acl(C, "other", Op.ALTER)) or "")
    assert "principal" in (invalid_binding(acl(T, "t", Op.READ, principal="alice")) or "")
    assert "empty" in (invalid_binding(acl(T, "", Op.READ)) or "")
    bad = AclFilter(ResourceType.UNKNOWN, None, PatternType.ANY, None, None, Op.ANY, AclPermission.ANY)
    assert "resourceType" in (invalid_filter(bad) or "")


def test_authorize_any_resource_of_a_type(tmp_path: Path) -> None:
    writer = authorizer(tmp_path / "a", acl(T, "logs-", Op.WRITE, pattern=PRE))
    assert writer.authorize_any("User:alice", "h", Op.WRITE, T)  # some topic may be written
    assert not writer.authorize_any("User:bob", "h", Op.WRITE, T)
    assert not writer.authorize_any("User:alice", "h", Op.READ, T)
    denied = authorizer(tmp_path / "b", acl(T, "logs-", Op.WRITE, pattern=PRE), acl(T, "*", Op.WRITE, DENY))
    assert not denied.authorize_any("User:alice", "h", Op.WRITE, T)  # a wildcard DENY wins
    assert authorizer(tmp_path / "c", allow_if_no_acl=True).authorize_any("User:x", "h", Op.WRITE, T)
    assert not authorizer(tmp_path / "d").authorize_any("User:x", "h", Op.WRITE, T)
