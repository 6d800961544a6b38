"""Replication between three real brokers on a real ZooKeeper over a SASL_SSL inter-broker listener, as Kafka's
brokers do it: TLS with the listener's ``ssl.*`` settings (certificates made at test time by
tests/support/certs.py), SASL PLAIN with ``sasl.mechanism.inter.broker.protocol`` and the login of the
listener's JAAS entry; the authorizer on, the brokers' principal in ``super.users``.

acks=all records are acknowledged and land on every replica; a SIGKILLed leader's partitions move and the
broker, restarted with a wrong inter-broker password, logs the refused authentication and retries, then with
the right one catches up over TLS and rejoins the ISR; a principal without CLUSTER_ACTION fetching as a replica
is refused (TOPIC_AUTHORIZATION_FAILED) although it may read the topic as a consumer. The inter-broker client
(broker/replication/peer.py) is also driven directly: SCRAM-SHA-256, mutual TLS, an untrusted certificate.
The test's own clients use a PLAINTEXT listener, whose ANONYMOUS principal is a super user here."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
)
from kafka.protocol.consumer import FetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from support import zkserver
from support.brokerproc import BrokerProcess
from support.certs import CertificateAuthority, Issued
from support.rawkafka import Conn, fetch_req
from support.zkcluster import agreed_topic, high_watermarks, replicas_equal, running_cluster

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.replication.peer import PeerAuthenticationError, PeerConnection, connect_peer
from headwater.kafka.errors import ErrorCode
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PARTITIONS = 3
BROKER_PASSWORD = "broker-secret"
USERS = {"broker": BROKER_PASSWORD, "alice": "alice-secret"}
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
JAAS_KEY = "listener.name.internal.plain.sasl.jaas.config"


def _jaas(username: str = "broker", password: str = BROKER_PASSWORD) -> str:
    """The INTERNAL listener's PLAIN entry: the users it accepts, and the login this broker uses on it."""
    users = " ".join(f'user_{u}="{p}"' for u, p in USERS.items())
    return f'{PLAIN_MODULE} required username="{username}" password="{password}" {users};'


@dataclass
class Secured:
    brokers: dict[int, BrokerProcess]
    ca: CertificateAuthority
    cert: Issued  # every broker's certificate (server and client)
    topic: str  # RF 3, min.insync.replicas 2, PARTITIONS partitions

    def security(self, jaas: str | None = None) -> dict[str, str]:
        """The brokers' listener and security settings (what a broker's own client side reads too)."""
        return {
            "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,MTLS://127.0.0.1:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,MTLS:SSL",
            "inter.broker.listener.name": "INTERNAL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.cert.pem),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca.cert),
            "listener.name.mtls.ssl.client.auth": "required",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
            JAAS_KEY: jaas or _jaas(),
        }

    def overrides(self, jaas: str | None = None) -> list[str]:
        return [f"{k}={v}" for k, v in self.security(jaas).items()] + [
            "authorizer.enabled=true", "super.users=User:broker;User:ANONYMOUS", "min.insync.replicas=2"]

    def peer_config(self, listener: str = "INTERNAL", **settings: str) -> BrokerConfig:
        """A broker configuration whose inter-broker client side is ``listener``'s, with ``settings`` over it."""
        return BrokerConfig.model_validate({**self.security(), "inter.broker.listener.name": listener, **settings})

    def leader(self, partition: int = 0) -> int:
        """The partition's leader once every broker agrees on it (leadership may be moving back)."""
        view = wait_until(lambda: agreed_topic(list(self.brokers.values()), self.topic,
                                               lambda v: v[partition][0] in IDS), "an agreed leader", timeout=20)
        return view[partition][0]

    def with_jaas(self, broker: BrokerProcess, jaas: str) -> None:
        """``broker`` started next with ``jaas`` as its INTERNAL listener's PLAIN entry."""
        broker.overrides = [f"{JAAS_KEY}={jaas}" if o.startswith(JAAS_KEY + "=") else o for o in broker.overrides]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Secured]:
    base, chroot = tmp_path_factory.mktemp("zk-interbroker"), "/" + unique("hw")
    ca = CertificateAuthority(base / "certs")
    cert = ca.issue("broker", server=True, client_too=True, CN="broker", O="Headwater")
    secured = Secured({}, ca, cert, unique("secured"))
    with running_cluster(base, f"{zookeeper.connect}{chroot}", IDS, SESSION_TIMEOUT_MS,
                         *secured.overrides()) as brokers:
        secured.brokers = brokers
        admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
        admin.create_topics([NewTopic(secured.topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})]
                            )[secured.topic].result(30)
        wait_until(lambda: agreed_topic(list(brokers.values()), secured.topic,
                                        lambda v: all(len(p[3]) == 3 for p in v.values())),
                   "the topic's partitions led, every replica in sync", timeout=20)
        yield secured


def _produce_all(bootstrap: str, topic: str, numbers: range) -> None:
    """acks=all, each record acknowledged (an error fails the test)."""
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    for n in numbers:
        producer.produce(topic, str(n).encode(), partition=n % PARTITIONS,
                         on_delivery=lambda err, _msg: errors.append(err) if err is not None else None)
    assert producer.flush(60) == 0
    assert errors == []


def _highs(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's high watermark, waited for while leadership moves (back to a returned broker)."""
    return wait_until(lambda: high_watermarks(bootstrap, topic, PARTITIONS), "the high watermarks",
                      not_yet=(KafkaException,), timeout=20)


def _in_sync(brokers: list[BrokerProcess], topic: str) -> bool:
    return agreed_topic(brokers, topic, lambda v: all(len(p[3]) == 3 for p in v.values())) is not None


async def _call(config: BrokerConfig, port: int, request: Any, response_cls: Any) -> Any:
    connection: PeerConnection = await connect_peer(config, "127.0.0.1", port, "interbroker-test", 10)
    try:
        return await connection.call(request, response_cls, 10)
    finally:
        connection.close()


def test_acks_all_replicated_over_sasl_ssl(cluster: Secured) -> None:
    brokers = list(cluster.brokers.values())
    _produce_all(brokers[0].bootstrap, cluster.topic, range(300))
    highs = _highs(brokers[0].bootstrap, cluster.topic)
    assert sum(highs.values()) >= 300
    wait_until(lambda: replicas_equal([b.log_dir for b in brokers], cluster.topic, highs),
               "every replica holding the acknowledged batches", timeout=15)
    for b in brokers:
        follows = re.findall(r"fetching from broker \d+ at 127\.0\.0\.1:(\d+) \(listener (\w+), (\w+)\)", b.log_text())
        assert follows, f"broker {b.log_dir.name} never fetched"
        assert {(listener, protocol) for _, listener, protocol in follows} == {("INTERNAL", "SASL_SSL")}


def test_a_principal_without_cluster_action_cannot_fetch_as_a_replica(cluster: Secured) -> None:
    leader_id = cluster.leader()
    leader = cluster.brokers[leader_id]
    follower_id = min(IDS - {leader_id})
    # alice may read the topic (an ACL on the leader, which answers her fetches)
    acl = CreateAclsRequest.AclCreation(resource_type=2, resource_name=cluster.topic, resource_pattern_type=3,
                                        principal="User:alice", host="*", operation=3, permission_type=3)
    with Conn(leader.port) as conn:
        answer = conn.call(CreateAclsRequest[1](creations=[acl]), CreateAclsResponse)
    assert [r.error_code for r in answer.results] == [0]
    _produce_all(leader.bootstrap, cluster.topic, range(0, 30, PARTITIONS))  # partition 0 holds some
    alice = cluster.peer_config(**{JAAS_KEY: _jaas("alice", USERS["alice"])})
    port = leader.ports["INTERNAL"]

    as_consumer = asyncio.run(_call(alice, port, fetch_req(cluster.topic), FetchResponse))
    part = as_consumer.responses[0].partitions[0]
    assert part.error_code == 0 and part.records, "alice reads the topic as a consumer"

    as_replica = fetch_req(cluster.topic)
    as_replica.replica_id = follower_id
    refused = asyncio.run(_call(alice, port, as_replica, FetchResponse))
    assert [(p.error_code, p.records or b"") for t in refused.responses for p in t.partitions] == \
        [(ErrorCode.TOPIC_AUTHORIZATION_FAILED, b"")]

    # the brokers' own principal (a super user) may: the same request as broker answers the records
    broker = asyncio.run(_call(cluster.peer_config(), port, as_replica, FetchResponse))
    assert broker.responses[0].partitions[0].error_code == 0 and broker.responses[0].partitions[0].records

    # OffsetForLeaderEpoch as Kafka: CLUSTER_ACTION, else DESCRIBE on the topic (KIP-320); alice has neither
    # on a topic she was given nothing on
    other = unique("other")
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})  # referenced until answered
    admin.create_topics([NewTopic(other, 1, 1)])[other].result(30)
    Topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    epochs = OffsetForLeaderEpochRequest[3](replica_id=follower_id, topics=[Topic(topic=other, partitions=[
        Topic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])])
    answer = asyncio.run(_call(alice, port, epochs, OffsetForLeaderEpochResponse))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED


def test_scram_mutual_tls_and_an_untrusted_certificate(cluster: Secured, tmp_path_factory: pytest.TempPathFactory
                                                       ) -> None:
    target = cluster.brokers[1]
    salt = b"interbroker-salt"
    salted = hashlib.pbkdf2_hmac("sha256", b"carol-secret", salt, 4096)
    with Conn(target.port) as conn:
        answer = conn.call(AlterUserScramCredentialsRequest[0](deletions=[], upsertions=[
            ("carol", 1, 4096, salt, salted)]), AlterUserScramCredentialsResponse)
    assert [r.error_code for r in answer.results] == [0]
    scram = {"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
             "listener.name.internal.scram-sha-256.sasl.jaas.config":
                 f'{SCRAM_MODULE} required username="carol" password="carol-secret";'}
    versions = asyncio.run(_call(cluster.peer_config(**scram), target.ports["INTERNAL"], ApiVersionsRequest[0](),
                                 ApiVersionsResponse))
    assert versions.error_code == 0 and versions.api_keys
    wrong = {**scram, "listener.name.internal.scram-sha-256.sasl.jaas.config":
             f'{SCRAM_MODULE} required username="carol" password="not-hers";'}
    with pytest.raises(PeerAuthenticationError, match="SASL SCRAM-SHA-256 authentication as 'carol' .*failed: "
                                                      "SASL_AUTHENTICATION_FAILED"):
        asyncio.run(_call(cluster.peer_config(**wrong), target.ports["INTERNAL"], ApiVersionsRequest[0](),
                          ApiVersionsResponse))

    # SSL with ssl.client.auth=required: this broker's keystore is its client certificate
    mtls = asyncio.run(_call(cluster.peer_config("MTLS"), target.ports["MTLS"], ApiVersionsRequest[0](),
                             ApiVersionsResponse))
    assert mtls.error_code == 0

    # a truststore without the brokers' CA: the handshake is refused on this side, naming why
    stranger = CertificateAuthority(tmp_path_factory.mktemp("stranger"), "Another CA")
    with pytest.raises(PeerAuthenticationError, match=r"TLS handshake .* \(listener INTERNAL\) failed: .*certificate "
                                                      r"verify failed"):
        asyncio.run(_call(cluster.peer_config(**{"ssl.truststore.location": str(stranger.cert)}),
                          target.ports["INTERNAL"], ApiVersionsRequest[0](), ApiVersionsResponse))


def test_killed_leader_returns_with_a_bad_password_then_catches_up_over_tls(cluster: Secured) -> None:
    brokers = cluster.brokers
    every = list(brokers.values())
    _produce_all(every[0].bootstrap, cluster.topic, range(1000, 1300))
    killed_id = cluster.leader(0)
    killed = brokers[killed_id]
    others = [b for i, b in brokers.items() if i != killed_id]
    killed.kill()
    wait_until(lambda: agreed_topic(others, cluster.topic, lambda v: all(p[0] != killed_id for p in v.values())),
               f"partitions led by broker {killed_id} moving", timeout=20)
    _produce_all(others[0].bootstrap, cluster.topic, range(2000, 2300))  # acknowledged by the two left

    cluster.with_jaas(killed, _jaas(password="not-the-password"))
    killed.start()
    refusal = re.compile(r"replica fetcher from broker \d+: SASL PLAIN authentication as 'broker' with the broker "
                         r"at 127\.0\.0\.1:\d+ \(listener INTERNAL\) failed: SASL_AUTHENTICATION_FAILED: "
                         r"Authentication failed: Invalid username or password; again in")
    wait_until(lambda: len(refusal.findall(killed.log_text(since_start=True))) >= 2,
               "the refused inter-broker authentication logged, and retried", timeout=20)
    view = wait_until(lambda: agreed_topic(others, cluster.topic), "the two others agreeing on the topic")
    assert all(killed_id not in p[3] for p in view.values()), "out of sync while refused"

    killed.stop()
    cluster.with_jaas(killed, _jaas())
    killed.start()
    wait_until(lambda: _in_sync(every, cluster.topic), f"broker {killed_id} back in every ISR", timeout=30)
    highs = _highs(others[0].bootstrap, cluster.topic)
    wait_until(lambda: replicas_equal([b.log_dir for b in every], cluster.topic, highs),
               "the returned broker's replicas equal to the leaders'", timeout=15)
    assert not refusal.search(killed.log_text(since_start=True))
