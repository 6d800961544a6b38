"""ACLs, SCRAM credentials and client quotas shared by three real brokers through a real ZooKeeper, in Kafka's
layout: an ACL created through broker 1 is enforced by brokers 2 and 3 within a couple of seconds and its
deletion likewise; a SCRAM user made through broker 2 authenticates (librdkafka) on brokers 1 and 3; a quota
set through broker 3 throttles a producer on broker 1; all of it holds on a broker restarted,
which names the local file from single-node use it does not use; ``--add-scram`` given to a cluster's broker
writes to ZooKeeper (the user logs in on another broker). The znodes are read back with kazoo and
compared with Kafka's JSON.

Every change is made with a raw request to one broker's PLAINTEXT listener (its principal, User:ANONYMOUS, is a
super user here, as the inter-broker principal is), so the broker that writes is the one named; the checks run
as ``alice`` (SASL/PLAIN) or the SCRAM user on the SASL_PLAINTEXT listener, where the authorizer applies."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from kazoo.client import KazooClient
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn, metadata_req
from support.securebroker import PLAIN_JAAS, PLAIN_USERS
from support.zkcluster import agreed_controller, running_cluster

from headwater.testing import unique, wait_until

pytestmark = [pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available())),
              pytest.mark.timeout(180)]

IDS = {1, 2, 3}
TOPIC_AUTHORIZATION_FAILED = 29
TOPIC, PREFIXED_TOPIC = "shared-acls", "keep-shared"
TOPIC_RT, DESCRIBE, ALLOW, LITERAL, PREFIXED, ANY = 2, 8, 3, 3, 4, 1
SCRAM_USER, SCRAM_PASSWORD, SCRAM_SHA_256 = "carol", "carol-secret", 1
ADDED_USER, ADDED_PASSWORD = "dave", "dave-secret"  # given to a restarted broker with --add-scram
QUOTA_CLIENT, QUOTA_RATE = "throttled-client", 50000.0
PROPAGATION_S = 3.0  # "within a couple of seconds" (a notification takes a ZooKeeper round trip or two)


class Cluster:
    def __init__(self, brokers: dict[int, BrokerProcess], zk: KazooClient) -> None:
        self.brokers, self.zk = brokers, zk

    def sasl(self, broker_id: int) -> int:
        return self.brokers[broker_id].ports["SASL_PLAINTEXT"]

    def call(self, broker_id: int, req: Any, resp_cls: Any) -> Any:
        """A request to the broker's PLAINTEXT listener (a super user's)."""
        with Conn(self.brokers[broker_id].port) as conn:
            return conn.call(req, resp_cls)

    def znode(self, path: str) -> Any:
        return json.loads(self.zk.get(path)[0])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Cluster]:
    base, chroot = tmp_path_factory.mktemp("zk-security"), "/" + unique("hw")
    overrides = ["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 "inter.broker.listener.name=PLAINTEXT", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256",
                 f"listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}",
                 "authorizer.enabled=true", "super.users=User:admin;User:ANONYMOUS",
                 "quota.window.num=2", "quota.window.size.seconds=1", "num.partitions=1"]
    zk = KazooClient(hosts=zookeeper.connect + chroot)
    with running_cluster(base, zookeeper.connect + chroot, IDS, 4000, *overrides) as brokers:
        zk.start(timeout=10)
        admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
        for f in admin.create_topics([NewTopic(TOPIC, 1, 3), NewTopic(PREFIXED_TOPIC, 1, 3),
                                      NewTopic(QUOTA_CLIENT, 1, replica_assignment=[[1]])]).values():
            f.result(30)
        try:
            yield Cluster(brokers, zk)
        finally:
            zk.stop()
            zk.close()


def _alice_topic_error(port: int, topic: str) -> int | None:
    """The error code of ``topic`` in a Metadata answer to alice (SASL/PLAIN) on ``port``; None when the broker
    does not answer (restarting)."""
    try:
        with Conn(port, timeout=5) as conn:
            conn.call(SaslHandshakeRequest[1](mechanism="PLAIN"), SaslHandshakeResponse)
            token = b"\0alice\0" + PLAIN_USERS["alice"].encode()
            if conn.call(SaslAuthenticateRequest[0](auth_bytes=token), SaslAuthenticateResponse).error_code:
                return None
            return int(conn.call(metadata_req([topic]), MetadataResponse).topics[0].error_code)
    except OSError:
        return None


def _acl(resource_name: str, pattern: int) -> Any:
    return CreateAclsRequest[1].AclCreation(resource_type=TOPIC_RT, resource_name=resource_name,
                                            resource_pattern_type=pattern, principal="User:alice", host="*",
                                            operation=DESCRIBE, permission_type=ALLOW)


def _each_sees(cluster: Cluster, ids: list[int], topic: str, code: int) -> float:
    """Seconds until alice's Metadata for ``topic`` answers ``code`` on every broker of ``ids``."""
    started = time.monotonic()
    for port in [cluster.sasl(i) for i in ids]:
        wait_until(partial(_alice_answers, port, topic, code), f"port {port} answering alice {code} for {topic}",
                   timeout=15)
    return time.monotonic() - started


def _alice_answers(port: int, topic: str, code: int) -> bool:
    return _alice_topic_error(port, topic) == code


def test_acls_made_through_one_broker_hold_on_all(cluster: Cluster) -> None:
    assert _alice_topic_error(cluster.sasl(2), TOPIC) == TOPIC_AUTHORIZATION_FAILED
    created = cluster.call(1, CreateAclsRequest[1](creations=[_acl(TOPIC, LITERAL), _acl("keep-", PREFIXED),
                                                              _acl("a/b", LITERAL)]), CreateAclsResponse)
    codes = [r.error_code for r in created.results]
    assert codes[:2] == [0, 0] and codes[2] == 42, created  # INVALID_REQUEST: a "/" cannot name a znode
    assert _each_sees(cluster, [2, 3], TOPIC, 0) < PROPAGATION_S
    assert _each_sees(cluster, [2, 3], PREFIXED_TOPIC, 0) < PROPAGATION_S

    # Kafka's layout and JSON
    entry = {"principal": "User:alice", "permissionType": "Allow", "operation": "Describe", "host": "*"}
    assert cluster.znode(f"/kafka-acl/Topic/{TOPIC}") == {"version": 1, "acls": [entry]}
    assert cluster.znode("/kafka-acl-extended/prefixed/Topic/keep-") == {"version": 1, "acls": [entry]}
    literal = [cluster.zk.get(f"/kafka-acl-changes/{c}")[0] for c in cluster.zk.get_children("/kafka-acl-changes")]
    assert f"TOPIC:{TOPIC}".encode() in literal
    extended = [json.loads(cluster.zk.get(f"/kafka-acl-extended-changes/{c}")[0])
                for c in cluster.zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "keep-", "patternType": "PREFIXED"} in extended
    assert all(c.startswith("acl_changes_") for c in cluster.zk.get_children("/kafka-acl-changes"))

    # brokers writing the same pattern at once: each write is conditional on the znode's version, so none is lost
    def grant(i: int) -> int:
        creation = CreateAclsRequest[1].AclCreation(
            resource_type=TOPIC_RT, resource_name="contended", resource_pattern_type=LITERAL,
            principal=f"User:u{i}", host="*", operation=DESCRIBE, permission_type=ALLOW)
        return int(cluster.call(i % 3 + 1, CreateAclsRequest[1](creations=[creation]),
                                CreateAclsResponse).results[0].error_code)
    with ThreadPoolExecutor(6) as pool:
        assert list(pool.map(grant, range(6))) == [0] * 6
    principals = {a["principal"] for a in cluster.znode("/kafka-acl/Topic/contended")["acls"]}
    assert principals == {f"User:u{i}" for i in range(6)}

    F = DeleteAclsRequest[1].DeleteAclsFilter
    deleted = cluster.call(1, DeleteAclsRequest[1](filters=[F(
        resource_type_filter=TOPIC_RT, resource_name_filter=TOPIC, pattern_type_filter=LITERAL, principal_filter=None,
        host_filter=None, operation=ANY, permission_type=ANY)]), DeleteAclsResponse)
    [result] = deleted.filter_results
    assert result.error_code == 0 and [m.resource_name for m in result.matching_acls] == [TOPIC]
    assert _each_sees(cluster, [2, 3], TOPIC, TOPIC_AUTHORIZATION_FAILED) < PROPAGATION_S
    assert not cluster.zk.exists(f"/kafka-acl/Topic/{TOPIC}")  # a pattern without ACLs has no znode
    assert _alice_topic_error(cluster.sasl(3), PREFIXED_TOPIC) == 0  # the other binding stays


def _scram_authenticates(port: int, user: str = SCRAM_USER, password: str = SCRAM_PASSWORD,
                         timeout: float = 3) -> bool:
    """Whether librdkafka logs in as a SCRAM user on ``port`` (only that broker is known to it) within
    ``timeout``."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": password})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:  # authentication refused (not yet known there): the caller's wait goes on
        return False


def _set_scram_user(cluster: Cluster, broker_id: int) -> bytes:
    """carol's SCRAM-SHA-256 credential set through the broker; the salted password sent."""
    salt, iterations = os.urandom(16), 4096
    salted = hashlib.pbkdf2_hmac("sha256", SCRAM_PASSWORD.encode(), salt, iterations)
    U = AlterUserScramCredentialsRequest[0].ScramCredentialUpsertion
    answer = cluster.call(broker_id, AlterUserScramCredentialsRequest[0](deletions=[], upsertions=[
        U(name=SCRAM_USER, mechanism=SCRAM_SHA_256, iterations=iterations, salt=salt, salted_password=salted)]),
        AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code) for r in answer.results] == [(SCRAM_USER, 0)]
    return salted


def test_scram_user_made_through_one_broker_logs_in_on_all(cluster: Cluster) -> None:
    salted = _set_scram_user(cluster, 2)
    stored = cluster.znode(f"/config/users/{SCRAM_USER}")
    assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-256"]
    fields = dict(part.split("=", 1) for part in stored["config"]["SCRAM-SHA-256"].split(","))
    assert list(fields) == ["salt", "stored_key", "server_key", "iterations"] and fields["iterations"] == "4096"
    assert salted.hex() not in json.dumps(stored)  # only the derived keys are kept

    started = time.monotonic()
    for i in (1, 3):
        wait_until(partial(_scram_authenticates, cluster.sasl(i)), f"{SCRAM_USER} logging in on broker {i}",
                   timeout=20)
    assert time.monotonic() - started < 15
    assert not _scram_authenticates(cluster.sasl(3), SCRAM_USER, "wrong-password", timeout=1.5)


def _set_quota(cluster: Cluster, broker_id: int) -> None:
    E = AlterClientQuotasRequest[1].EntryData
    answer = cluster.call(broker_id, AlterClientQuotasRequest[1](entries=[E(
        entity=[E.EntityData(entity_type="client-id", entity_name=QUOTA_CLIENT)],
        ops=[E.OpData(key="producer_byte_rate", value=QUOTA_RATE, remove=False)])], validate_only=False),
        AlterClientQuotasResponse)
    assert [e.error_code for e in answer.entries] == [0]


def _quotas_on(cluster: Cluster, broker_id: int) -> dict[str, float]:
    C = DescribeClientQuotasRequest[1].ComponentData
    answer = cluster.call(broker_id, DescribeClientQuotasRequest[1](
        components=[C(entity_type="client-id", match_type=0, match=QUOTA_CLIENT)], strict=False),
        DescribeClientQuotasResponse)
    return {v.key: v.value for e in answer.entries for v in e.values}


def test_quota_set_through_one_broker_throttles_on_another(cluster: Cluster) -> None:
    _set_quota(cluster, 3)
    assert cluster.znode(f"/config/clients/{QUOTA_CLIENT}") == {
        "version": 1, "config": {"producer_byte_rate": repr(QUOTA_RATE)}}
    wait_until(lambda: _quotas_on(cluster, 1) == {"producer_byte_rate": QUOTA_RATE}, "the quota known on broker 1",
               timeout=PROPAGATION_S)

    throttled: list[tuple[int, float]] = []
    producer = Producer({"bootstrap.servers": cluster.brokers[1].bootstrap, "client.id": QUOTA_CLIENT,
                         "linger.ms": 5, "acks": 1, "throttle_cb": lambda e: throttled.append(
                             (e.broker_id, e.throttle_time))})
    value = b"x" * 10_000
    for _ in range(15):  # 150 kB at 50 kB/s over a 1 s burst: throttled about 2 s
        producer.produce(QUOTA_CLIENT, value, partition=0)  # partition 0 is on broker 1 alone
    assert producer.flush(30) == 0
    wait_until(lambda: any(b == 1 and t > 0 for b, t in throttled) or None, "a throttle from broker 1",
               timeout=10, interval=0.2, seen=lambda: throttled)


def test_all_of_it_survives_a_restart(cluster: Cluster) -> None:
    # made (again: each is idempotent) through brokers 1, 2 and 3, whatever ran before
    created = cluster.call(1, CreateAclsRequest[1](creations=[_acl("keep-", PREFIXED)]), CreateAclsResponse)
    assert [r.error_code for r in created.results] == [0]
    _set_scram_user(cluster, 2)
    _set_quota(cluster, 3)
    broker = cluster.brokers[1]
    # what a broker kept from single-node use (alice may describe "local-only"): not used in a cluster, and said so
    (broker.log_dir / "headwater-acls.json").write_text(json.dumps({"acls": [
        {"resource_type": 2, "resource_name": "local-only", "pattern_type": 3, "principal": "User:alice",
         "host": "*", "operation": 8, "permission": 3}]}))
    broker.cli_args = ["--add-scram", f"SCRAM-SHA-256=[name={SCRAM_USER},password=not-kept]",
                       "--add-scram", f"SCRAM-SHA-256=[name={ADDED_USER},password={ADDED_PASSWORD}]"]
    broker.stop()  # a clean stop: its registration goes at once
    wait_until(lambda: agreed_controller([cluster.brokers[2], cluster.brokers[3]], {2, 3}), "broker 1 gone",
               timeout=30)
    broker.start()
    wait_until(lambda: agreed_controller(list(cluster.brokers.values()), IDS), "the cluster back", timeout=30)
    assert f"1 ACLs in {broker.log_dir / 'headwater-acls.json'} (from single-node use) are not used" in \
        broker.log_text(since_start=True)
    wait_until(lambda: _alice_topic_error(cluster.sasl(1), PREFIXED_TOPIC) == 0, "the prefixed ACL on broker 1")
    # the local file's binding would answer UNKNOWN_TOPIC_OR_PARTITION: not used, so not authorized
    assert _alice_topic_error(cluster.sasl(1), "local-only") == TOPIC_AUTHORIZATION_FAILED
    assert _scram_authenticates(cluster.sasl(1))
    assert _quotas_on(cluster, 1) == {"producer_byte_rate": QUOTA_RATE}
    # --add-scram in a cluster: written to ZooKeeper, so the new user logs in on another broker; carol's
    # credential, already there, is kept (her password did not change)
    wait_until(lambda: _scram_authenticates(cluster.sasl(3), ADDED_USER, ADDED_PASSWORD), "dave on broker 3")
    assert _scram_authenticates(cluster.sasl(3))
