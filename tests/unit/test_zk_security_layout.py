"""Kafka's ZooKeeper layout of a cluster's ACLs, SCRAM credentials and client quotas: the znode paths, the JSON
(read as Kafka writes it, written as Kafka reads it) and the change notifications, without ZooKeeper; and what
the broker answers when ZooKeeper cannot take a change."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any, cast

import pytest
from kazoo.exceptions import ConnectionLoss

from headwater.broker.access.acls import AclBinding, AclOperation, AclPermission, AclStore, PatternType, ResourceType
from headwater.broker.access.quotas import QuotaStore, entity
from headwater.broker.cluster.acl_store_zk import (
    acls_data,
    change_data,
    parse_acls,
    parse_change,
    pattern_path,
)
from headwater.broker.cluster.security_state import (
    ClusterSecurity,
    entity_znode,
    quota_values,
    scram_credentials,
    znode_entity,
)
from headwater.broker.security.credentials import (
    CredentialChange,
    ScramCredentialStore,
    credential_text,
    parse_credential_text,
)
from headwater.broker.security.scram import MECHANISMS, ScramCredential

T, TX, CL = ResourceType.TOPIC, ResourceType.TRANSACTIONAL_ID, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED


def test_pattern_paths_are_kafkas() -> None:
    assert pattern_path((T, "orders", LIT)) == "/kafka-acl/Topic/orders"
    assert pattern_path((TX, "tx-1", LIT)) == "/kafka-acl/TransactionalId/tx-1"
    assert pattern_path((CL, "kafka-cluster", LIT)) == "/kafka-acl/Cluster/kafka-cluster"
    assert pattern_path((ResourceType.GROUP, "g-", PRE)) == "/kafka-acl-extended/prefixed/Group/g-"


def test_acls_json_as_kafka_writes_and_reads_it() -> None:
    # ZkData.scala's example, as Kafka's AclAuthorizer writes it
    kafkas = b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow","operation": "Read",' \
             b'"principal": "User:alice"}]}'
    entries = parse_acls("/kafka-acl/Topic/t", kafkas)
    assert entries == {("User:alice", "host1", AclOperation.READ, AclPermission.ALLOW)}
    mine = {("User:bob", "*", AclOperation.IDEMPOTENT_WRITE, AclPermission.DENY), *entries}
    data = json.loads(acls_data(frozenset(mine)))
    assert data["version"] == 1
    assert {"principal": "User:bob", "permissionType": "Deny", "operation": "IdempotentWrite", "host": "*"} \
        in data["acls"]
    assert parse_acls("p", acls_data(frozenset(mine))) == mine
    # Kafka's case-insensitive fallback (upper case, no underscores)
    upper = b'{"version":1,"acls":[{"host":"*","permissionType":"ALLOW","operation":"DESCRIBECONFIGS",' \
            b'"principal":"User:x"}]}'
    assert parse_acls("p", upper) == {("User:x", "*", AclOperation.DESCRIBE_CONFIGS, AclPermission.ALLOW)}
    assert parse_acls("p", b"") == frozenset()


@pytest.mark.parametrize("raw", [b'{"version":2,"acls":[]}', b'{"acls":[]}', b"not json",
                                 b'{"version":1,"acls":[{"host":"*","permissionType":"Allow","operation":"Fly",'
                                 b'"principal":"User:x"}]}'])
def test_unreadable_acls_name_the_znode(raw: bytes) -> None:
    with pytest.raises(ValueError, match="/kafka-acl/Topic/t is not a list of ACLs"):
        parse_acls("/kafka-acl/Topic/t", raw)


def test_change_notifications() -> None:
    root, data = change_data((T, "orders", LIT))
    assert (root, data) == ("/kafka-acl-changes", b"TOPIC:orders")
    assert parse_change(root, data) == (T, "orders", LIT)
    assert parse_change(root, b"Topic:a:b") == (T, "a:b", LIT)  # the name may hold the separator
    root, data = change_data((TX, "tx-", PRE))
    assert root == "/kafka-acl-extended-changes"
    assert json.loads(data) == {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-",
                                "patternType": "PREFIXED"}
    assert parse_change(root, data) == (TX, "tx-", PRE)
    with pytest.raises(ValueError):
        parse_change("/kafka-acl-changes", b"no-separator")


def test_quota_entities_map_to_kafkas_config_znodes() -> None:
    cases = {
        (("user", "alice"),): ("users", "alice"),
        (("user", None),): ("users", "<default>"),
        (("client-id", "c 1"), ("user", "bob@example.com")): ("users", "bob%40example.com/clients/c%201"),
        (("client-id", None), ("user", None)): ("users", "<default>/clients/<default>"),
        (("client-id", "app*"),): ("clients", "app%2A"),
        (("client-id", None),): ("clients", "<default>"),
        (("ip", "10.0.0.1"),): ("ips", "10.0.0.1"),
        (("ip", None),): ("ips", "<default>"),
    }
    for parts, znode in cases.items():
        ent = entity(parts)
        assert entity_znode(ent) == znode
        assert znode_entity(*znode) == ent


def test_user_config_holds_quotas_and_credentials() -> None:
    credential = ScramCredential.from_password(MECHANISMS["SCRAM-SHA-512"], "pw", secrets.token_bytes(16), 8192)
    text = credential_text(credential)
    assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text
    assert text.endswith(",iterations=8192")
    assert parse_credential_text(text) == credential
    config = {"SCRAM-SHA-512": text, "producer_byte_rate": "1024", "consumer_byte_rate": "2048.0",
              "SCRAM-SHA-256": "salt=AAAA", "request_percentage": "lots"}
    assert quota_values("/config/users/u", config) == {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    assert scram_credentials("/config/users/u", config) == {"SCRAM-SHA-512": credential}  # the unreadable one left out
    with pytest.raises(ValueError, match="without stored_key, server_key, iterations"):
        parse_credential_text("salt=AAAA")


class _Unreachable:
    """A ZooKeeper client whose every call fails as kazoo's does when the connection is lost."""

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise ConnectionLoss()
        return fail


def test_writes_zookeeper_refuses_are_answered_and_change_nothing(tmp_path: Path) -> None:
    """Every entity (binding, user, quota entity) ZooKeeper did not take is named with the reason; the broker's
    stores keep what they had."""
    acls, quotas = AclStore(tmp_path, local=False), QuotaStore(tmp_path, local=False)
    scram = ScramCredentialStore(tmp_path, local=False)
    security = ClusterSecurity(cast(Any, _Unreachable()), cast(Any, None), acls, quotas, scram)
    binding = AclBinding(T, "t", LIT, "User:a", "*", AclOperation.READ, AclPermission.ALLOW)
    slash = AclBinding(T, "a/b", LIT, "User:a", "*", AclOperation.READ, AclPermission.ALLOW)
    credential = ScramCredential.from_password(MECHANISMS["SCRAM-SHA-256"], "pw", b"salt", 4096)
    client = entity([("client-id", "c")])

    async def run() -> tuple[Any, ...]:
        return (await security.create_acls([binding, slash]),
                await security.alter_scram([CredentialChange("carol", MECHANISMS["SCRAM-SHA-256"], credential)]),
                await security.alter_quotas([(client, {"producer_byte_rate": 10.0})]))
    created, users, entities = asyncio.run(run())
    assert created[binding][0] == -1  # UNKNOWN_SERVER_ERROR
    assert "Failed to update ACLs for /kafka-acl/Topic/t" in created[binding][1]
    assert created[slash] == (42, "ACL binding contains invalid resource name: a/b")
    assert set(users) == {"carol"} and "/config/users/carol" in users["carol"]
    assert set(entities) == {client} and "/config/clients/c" in entities[client]
    assert acls.bindings == [] and quotas.quotas == {} and scram.users() == []
