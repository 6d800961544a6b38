"""The brokers' ZooKeeper connection and znodes secured as Kafka's ZooKeeper-mode brokers secure them: a real
ZooKeeper with a TLS client port (Netty) and SASL DIGEST-MD5 users; two real brokers joining it over TLS
(``zookeeper.ssl.*``, their certificate presented), logging in with a JAAS ``Client`` section and writing their
znodes with ``zookeeper.set.acl=true``. A topic is made and replicated over both; an unauthenticated kazoo client
reads the brokers' registrations and the topics but cannot write anywhere, nor read the SCRAM credentials that
only their creator may (Kafka's ZkData.defaultAcls / sensitivePath); a broker with a wrong ZooKeeper password
or a truststore without ZooKeeper's CA does not start: exit status 2 with the property and the reason."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions
from support import zkserver
from support.brokerproc import BrokerProcess
from support.certs import CertificateAuthority
from support.zkcluster import agreed_topic, cluster_broker, running_cluster

from headwater.testing import unique, wait_until

pytestmark = [zkserver.needs_zookeeper(), pytest.mark.timeout(120)]

IDS = {1, 2}
ZK_USER, ZK_PASSWORD = "kafka", "kafka-zk-secret"
TOPIC, SCRAM_USER = "zk-secured", "erin"
WORLD_READ = ACL(Permissions.READ, Id("world", "anyone"))


def _jaas(path: Path, password: str) -> Path:
    path.write_text('Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n'
                    f'  username="{ZK_USER}" password="{password}";\n}};\n')
    return path


@dataclass
class Secured:
    base: Path
    connect: str  # the TLS port and chroot
    brokers: dict[int, BrokerProcess]
    anonymous: KazooClient  # the plaintext port, no credentials
    authenticated: KazooClient  # the plaintext port, the brokers' SASL user
    overrides: list[str]
    other_ca: Path  # a CA that did not sign ZooKeeper's certificate


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("zk-tls-sasl")
    ca = CertificateAuthority(base / "ca")
    server = ca.issue("zookeeper", server=True, CN="zookeeper")
    client = ca.issue("broker", CN="broker", O="Headwater")
    keystore = server.pkcs12(base / "ca" / "zookeeper.p12", "zk-store-pass")
    security = zkserver.ZooKeeperSecurity(keystore, "zk-store-pass", ca.cert, {ZK_USER: ZK_PASSWORD})
    overrides = ["zookeeper.ssl.client.enable=true", f"zookeeper.ssl.keystore.location={client.pem}",
                 "zookeeper.ssl.keystore.type=PEM", f"zookeeper.ssl.truststore.location={ca.cert}",
                 f"java.security.auth.login.config={_jaas(base / 'jaas.conf', ZK_PASSWORD)}",
                 "zookeeper.set.acl=true", "zookeeper.connection.timeout.ms=6000"]
    other_ca = CertificateAuthority(base / "other-ca", "Another CA").cert
    chroot = "/" + unique("hw")
    with zkserver.ZooKeeperServer(base / "zookeeper", security=security) as zk_server:
        connect = zk_server.secure_connect + chroot
        anonymous = KazooClient(hosts=zk_server.connect + chroot, timeout=4)
        authenticated = KazooClient(hosts=zk_server.connect + chroot, timeout=4, sasl_options={
            "mechanism": "DIGEST-MD5", "username": ZK_USER, "password": ZK_PASSWORD})
        with running_cluster(base, connect, IDS, 4000, *overrides) as brokers:
            anonymous.start(timeout=10)
            authenticated.start(timeout=10)
            try:
                yield Secured(base, connect, brokers, anonymous, authenticated, overrides, other_ca)
            finally:
                for client in (anonymous, authenticated):
                    client.stop()
                    client.close()


def test_brokers_join_over_tls_with_sasl_and_replicate(secured: Secured) -> None:
    admin = AdminClient({"bootstrap.servers": secured.brokers[1].bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 2, config={"min.insync.replicas": "2"})])[TOPIC].result(20)
    every = list(secured.brokers.values())
    view = wait_until(lambda: agreed_topic(every, TOPIC, lambda v: all(len(p[3]) == 2 for p in v.values())),
                      "both replicas of each partition in sync", timeout=15)
    assert all(set(p[2]) == IDS for p in view.values())
    producer = Producer({"bootstrap.servers": secured.brokers[2].bootstrap, "acks": "all"})
    failed: list[KafkaError] = []

    def delivered(err: KafkaError | None, _: Message) -> None:
        if err is not None:
            failed.append(err)

    for n in range(20):
        producer.produce(TOPIC, str(n).encode(), on_delivery=delivered)
    assert producer.flush(20) == 0 and not failed  # acks=all with min.insync.replicas=2: on both brokers
    for b in every:  # joined over TLS with SASL, as their log says
        assert "(TLS + SASL DIGEST-MD5, secure ACLs)" in b.log_text()


def test_znodes_carry_kafkas_acls(secured: Secured) -> None:
    zk = secured.anonymous
    assert sorted(zk.get_children("/brokers/ids")) == ["1", "2"]
    registration, _ = zk.get("/brokers/ids/1")  # world-readable
    assert b'"endpoints"' in registration
    for path in ("/brokers/ids/1", "/controller", f"/brokers/topics/{TOPIC}", "/brokers/topics", "/config/topics"):
        acls, _ = zk.get_acls(path)
        # creator-all: the SASL user (and the certificate's x509 name) the broker authenticated as; world read
        assert ACL(Permissions.ALL, Id("sasl", ZK_USER)) in acls, (path, acls)
        assert WORLD_READ in acls and not [a for a in acls if a.id.scheme == "world" and a.perms != 1], (path, acls)
    writes = [lambda: zk.create("/brokers/ids/9", b"{}"), lambda: zk.set(f"/brokers/topics/{TOPIC}", b"{}"),
              lambda: zk.delete("/controller"), lambda: zk.create("/config/topics/intruder", b"{}"),
              lambda: zk.create("/admin/delete_topics/" + TOPIC, b""), lambda: zk.set("/controller_epoch", b"99"),
              lambda: zk.create("/intruder", b""),  # the chroot itself, made by the first broker
              lambda: zk.set_acls("/brokers/ids", list(OPEN_ACL_UNSAFE))]
    for write in writes:
        with pytest.raises(NoAuthError):
            write()
    assert zk.exists("/brokers/ids/9") is None


def test_scram_credentials_only_for_their_creator(secured: Secured) -> None:
    admin = AdminClient({"bootstrap.servers": secured.brokers[2].bootstrap})
    upsert = UserScramCredentialUpsertion(SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"erin-password")
    admin.alter_user_scram_credentials([upsert])[SCRAM_USER].result(20)
    zk, path = secured.anonymous, f"/config/users/{SCRAM_USER}"
    assert wait_until(lambda: zk.exists(path), "the credentials znode", timeout=5)
    for sensitive in (path, "/config/users"):
        acls, _ = secured.authenticated.get_acls(sensitive)  # reading ACLs needs READ: the creator's
        assert ACL(Permissions.ALL, Id("sasl", ZK_USER)) in acls
        assert not [a for a in acls if a.id.scheme == "world"], (sensitive, acls)  # Kafka's sensitive path
        for read in (zk.get, zk.get_children, zk.get_acls):
            with pytest.raises(NoAuthError):
                read(sensitive)
    assert b"SCRAM-SHA-256" in secured.authenticated.get(path)[0]  # the creator reads the credentials


def _refused(broker: BrokerProcess) -> str:
    """The start failure of ``broker`` (its log's tail); AssertionError when it starts or exits otherwise."""
    try:
        broker.start(timeout=30)
    except RuntimeError as exc:
        assert "exited with 2" in str(exc), str(exc)[-2000:]
        return str(exc)
    raise AssertionError(f"broker {broker.log_dir.name} started")


def test_refused_broker_exits_with_the_reason(secured: Secured) -> None:
    wrong_jaas = _jaas(secured.base / "wrong-jaas.conf", "not-the-password")
    bad = {7: f"java.security.auth.login.config={wrong_jaas}",
           8: f"zookeeper.ssl.truststore.location={secured.other_ca}"}
    brokers = [cluster_broker(secured.base, secured.connect, i, 4000, *secured.overrides, o) for i, o in bad.items()]
    with ThreadPoolExecutor(2) as pool:  # both at once: a start is mostly the interpreter's
        wrong_password, untrusted = pool.map(_refused, brokers)
    assert (f"headwater broker: java.security.auth.login.config: ZooKeeper refused the SASL DIGEST-MD5 login of "
            f"user '{ZK_USER}' (wrong username or password") in wrong_password
    assert ("headwater broker: zookeeper.ssl.truststore.location: ZooKeeper's certificate is not trusted "
            "(unable to get local issuer certificate)") in untrusted
    assert sorted(secured.anonymous.get_children("/brokers/ids")) == ["1", "2"]
