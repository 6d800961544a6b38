"""SASL/SCRAM end to end with the four real clients (confluent-kafka, kafka-python, aiokafka, kcat): users
created over the wire (KIP-554) produce and consume over SASL_PLAINTEXT with SCRAM-SHA-256 and SCRAM-SHA-512
and over SASL_SSL with SCRAM-SHA-512; a wrong password or an unknown user gets the library's
authentication error and writes nothing; a user deleted through the admin API can no longer log in; an
authenticated user is the principal the ACLs see."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from support.brokerproc import BrokerProcess
from support.certs import CertificateAuthority
from support.connectproc import unique

pytestmark = pytest.mark.timeout(180)
TIMEOUT = 30.0
KCAT = "/usr/bin/kcat"
CLIENTS = ["confluent", "kafka-python", "aiokafka", "kcat"]
USER, PASSWORD = "alice", "alice-secret=,;\"x"  # SCRAM's reserved characters in the password
MECHS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


class Secured:
    """The broker under test and how each client reaches its SASL listeners."""

    def __init__(self, proc: BrokerProcess, ca: Path) -> None:
        self.proc, self.ca = proc, ca
        self.admin = AdminClient({"bootstrap.servers": proc.bootstrap})  # the PLAINTEXT listener

    def bootstrap(self, protocol: str) -> str:
        return f"127.0.0.1:{self.proc.ports[protocol]}"

    def set_user(self, user: str, password: str, mechanisms: list[str], iterations: int = 4096) -> None:
        for m in mechanisms:  # one request each: a user altered twice in one request is refused, as Kafka does
            upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(MECHS[m], iterations), password.encode())
            self.admin.alter_user_scram_credentials([upsertion])[user].result(TIMEOUT)

    def topic(self, prefix: str) -> str:
        name = unique(prefix)
        self.admin.create_topics([NewTopic(name, 1, 1)])[name].result(TIMEOUT)
        return name

    def end_offset(self, topic: str) -> int:
        c = Consumer({"bootstrap.servers": self.proc.bootstrap, "group.id": "end-offsets"})
        try:
            return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT)[1]
        finally:
            c.close()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    base = tmp_path_factory.mktemp("scram")
    ca = CertificateAuthority(base / "pki")
    server = ca.issue("broker", server=True, CN="localhost")
    with BrokerProcess(base / "data", "num.partitions=1",
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                       "sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256",
                       "ssl.keystore.type=PEM", f"ssl.keystore.location={server.pem}") as proc:
        s = Secured(proc, ca.cert)
        s.set_user(USER, PASSWORD, list(MECHS))
        yield s


# -- the four clients, each with its own names for the same settings --------------------------------------

def _confluent_conf(s: Secured, protocol: str, mech: str, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": s.bootstrap(protocol), "security.protocol": protocol, "sasl.mechanism": mech,
            "sasl.username": user, "sasl.password": password, "ssl.ca.location": str(s.ca)}


def _python_kwargs(s: Secured, protocol: str, mech: str, user: str, password: str, aio: bool) -> dict[str, Any]:
    kw: dict[str, Any] = {"bootstrap_servers": s.bootstrap(protocol), "security_protocol": protocol,
                          "sasl_mechanism": mech, "sasl_plain_username": user, "sasl_plain_password": password,
                          "request_timeout_ms": 15000}
    if protocol == "SASL_SSL":
        if aio:
            from aiokafka.helpers import create_ssl_context

            kw["ssl_context"] = create_ssl_context(cafile=str(s.ca))
        else:
            kw["ssl_cafile"] = str(s.ca)
    return kw


def _kcat(s: Secured, protocol: str, mech: str, user: str, password: str) -> list[str]:
    return [KCAT, "-b", s.bootstrap(protocol), "-X", f"security.protocol={protocol}", "-X", f"sasl.mechanisms={mech}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}", "-X", f"ssl.ca.location={s.ca}"]


def produce(client: str, s: Secured, protocol: str, mech: str, topic: str, values: list[bytes],
            user: str = USER, password: str = PASSWORD) -> None:
    if client == "confluent":
        p = Producer({**_confluent_conf(s, protocol, mech, user, password), "message.timeout.ms": int(TIMEOUT * 1000)})
        errors: list[Any] = []
        for v in values:
            p.produce(topic, v, on_delivery=lambda err, _msg: errors.append(err) if err else None)
        assert p.flush(TIMEOUT) == 0 and not errors, errors
    elif client == "kafka-python":
        from kafka import KafkaProducer

        kp = KafkaProducer(**_python_kwargs(s, protocol, mech, user, password, aio=False))
        try:
            for fut in [kp.send(topic, v) for v in values]:
                fut.get(TIMEOUT)
        finally:
            kp.close(timeout=10)
    elif client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        async def go() -> None:
            ap = AIOKafkaProducer(**_python_kwargs(s, protocol, mech, user, password, aio=True))
            await ap.start()
            try:
                for v in values:
                    await ap.send_and_wait(topic, v)
            finally:
                await ap.stop()

        asyncio.run(asyncio.wait_for(go(), 2 * TIMEOUT))
    else:
        done = subprocess.run([*_kcat(s, protocol, mech, user, password), "-P", "-t", topic, "-p", "0"],
                              input=b"".join(v + b"\n" for v in values), capture_output=True, timeout=TIMEOUT)
        assert done.returncode == 0 and b"ERROR" not in done.stderr, done.stderr.decode(errors="replace")


def consume(client: str, s: Secured, protocol: str, mech: str, topic: str, expected: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    if client == "confluent":
        c = Consumer({**_confluent_conf(s, protocol, mech, USER, PASSWORD), "group.id": unique("g"),
                      "enable.auto.commit": False})
        try:
            c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            while len(got) < expected and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append(m.value() or b"")
        finally:
            c.close()
    elif client == "kafka-python":
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTP

        kc = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                           **_python_kwargs(s, protocol, mech, USER, PASSWORD, aio=False))
        try:
            kc.assign([KTP(topic, 0)])
            while len(got) < expected and time.monotonic() < deadline:
                got += [m.value for msgs in kc.poll(timeout_ms=200).values() for m in msgs]
        finally:
            kc.close()
    elif client == "aiokafka":
        from aiokafka import AIOKafkaConsumer
        from aiokafka import TopicPartition as ATP

        async def go() -> None:
            ac = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                                  **_python_kwargs(s, protocol, mech, USER, PASSWORD, aio=True))
            await ac.start()
            try:
                ac.assign([ATP(topic, 0)])
                while len(got) < expected and time.monotonic() < deadline:
                    batch = await ac.getmany(timeout_ms=200)
                    got.extend(m.value for msgs in batch.values() for m in msgs)
            finally:
                await ac.stop()

        asyncio.run(asyncio.wait_for(go(), 2 * TIMEOUT))
    else:
        done = subprocess.run([*_kcat(s, protocol, mech, USER, PASSWORD), "-C", "-t", topic, "-o", "beginning", "-e",
                               "-q"], capture_output=True, timeout=TIMEOUT)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        got = done.stdout.splitlines()
    return got


CASES = [(c, "SASL_PLAINTEXT", m) for m in MECHS for c in CLIENTS] + [(c, "SASL_SSL", "SCRAM-SHA-512") for c in CLIENTS]


@pytest.mark.parametrize(("client", "protocol", "mech"), CASES, ids=[f"{c}-{p}-{m}" for c, p, m in CASES])
def test_produce_and_consume_over_scram(secured: Secured, client: str, protocol: str, mech: str) -> None:
    topic = secured.topic(f"scram-{client}")
    values = [f"{client} {mech} {i}".encode() for i in range(20)]
    produce(client, secured, protocol, mech, topic, values)
    assert consume(client, secured, protocol, mech, topic, len(values)) == values


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def auth_error(client: str, s: Secured, mech: str, topic: str, user: str, password: str) -> str:
    """What the client library reports when it cannot authenticate (a failure if it sends anything)."""
    protocol = "SASL_PLAINTEXT"
    if client == "confluent":
        errors: list[KafkaError] = []
        p = Producer({**_confluent_conf(s, protocol, mech, user, password), "message.timeout.ms": 3000,
                      "error_cb": errors.append})
        p.produce(topic, b"must not be written")
        p.flush(10)
        assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
        return errors[0].str()
    if client == "kafka-python":
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        # kafka-python 3 logs the broker's SaslAuthenticationFailedError and retries until its bootstrap times out;
        # on a loaded machine a bootstrap may time out before its first answer, so it is tried again (it never
        # logs in: the end offsets are checked by the callers)
        seen = _Records()
        logging.getLogger("kafka").addHandler(seen)
        try:
            for _ in range(5):
                with pytest.raises(KafkaTimeoutError):
                    KafkaProducer(**_python_kwargs(s, protocol, mech, user, password, aio=False),
                                  bootstrap_timeout_ms=5000)
                if any("SaslAuthenticationFailedError" in m for m in seen.messages):
                    break
        finally:
            logging.getLogger("kafka").removeHandler(seen)
        failures = [m for m in seen.messages if "SaslAuthenticationFailedError" in m]
        assert failures, seen.messages[-5:]
        return failures[0]
    if client == "aiokafka":
        from aiokafka.conn import create_conn
        from aiokafka.errors import SaslAuthenticationFailed

        async def go() -> str:
            host, port = s.bootstrap(protocol).split(":")
            with pytest.raises(SaslAuthenticationFailed) as info:
                await create_conn(host, int(port), security_protocol=protocol, sasl_mechanism=mech,
                                  sasl_plain_username=user, sasl_plain_password=password)
            return str(info.value)

        return asyncio.run(go())
    done = subprocess.run([*_kcat(s, protocol, mech, user, password), "-P", "-t", topic, "-p", "0"],
                          input=b"must not be written\n", capture_output=True, timeout=TIMEOUT)
    assert done.returncode != 0 and b"Authentication failure" in done.stderr, done.stderr
    return done.stderr.decode(errors="replace")


@pytest.mark.parametrize("client", CLIENTS)
def test_wrong_password_and_unknown_user_are_refused_alike(secured: Secured, client: str) -> None:
    topic = secured.topic(f"scram-denied-{client}")
    wrong = auth_error(client, secured, "SCRAM-SHA-512", topic, USER, "not-the-password")
    unknown = auth_error(client, secured, "SCRAM-SHA-512", topic, "nobody-" + unique("u"), PASSWORD)
    text = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"
    assert text in wrong and text in unknown
    assert secured.end_offset(topic) == 0  # nothing was written


def test_admin_created_user_logs_in_and_deleted_user_cannot(secured: Secured) -> None:
    """Users created and deleted through confluent-kafka's and kafka-python's admin clients."""
    user, password = unique("bob"), "bob-secret"
    topic = secured.topic("scram-lifecycle")
    secured.set_user(user, password, ["SCRAM-SHA-256"], iterations=8192)
    produce("confluent", secured, "SASL_PLAINTEXT", "SCRAM-SHA-256", topic, [b"one"], user=user, password=password)
    # a credential for one mechanism does not log in with the other
    auth_error("confluent", secured, "SCRAM-SHA-512", topic, user, password)
    for fut in secured.admin.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)]).values():
        fut.result(TIMEOUT)
    auth_error("kafka-python", secured, "SCRAM-SHA-256", topic, user, password)
    # the same with kafka-python's admin client (its own salt and salted password): aiokafka logs in, then not
    from kafka.admin import KafkaAdminClient
    from kafka.admin import ScramMechanism as KScramMechanism
    from kafka.admin import UserScramCredentialDeletion as KDeletion
    from kafka.admin import UserScramCredentialUpsertion as KUpsertion

    kp = KafkaAdminClient(bootstrap_servers=secured.proc.bootstrap, client_id="scram-lifecycle")
    try:
        assert kp.alter_user_scram_credentials([KUpsertion(user, KScramMechanism.SCRAM_SHA_512, password)]) \
            == {user: None}
        produce("aiokafka", secured, "SASL_PLAINTEXT", "SCRAM-SHA-512", topic, [b"two"], user=user, password=password)
        assert kp.alter_user_scram_credentials([KDeletion(user, KScramMechanism.SCRAM_SHA_512)]) == {user: None}
    finally:
        kp.close()
    auth_error("aiokafka", secured, "SCRAM-SHA-512", topic, user, password)
    assert secured.end_offset(topic) == 2


def test_principal_is_the_scram_user(tmp_path: Path) -> None:
    """With authorizer.enabled, the SCRAM user is the principal the ACLs see. As a Kafka operator bootstraps
    it: a super user of the PLAIN mechanism (its password in the broker's JAAS config) creates the SCRAM
    users and their ACLs over the wire; ANONYMOUS on the PLAINTEXT listener may not."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    plain_jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
    with BrokerProcess(tmp_path / "data", "num.partitions=1", "authorizer.enabled=true", "super.users=User:admin",
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                       "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
                       f"listener.name.sasl_plaintext.plain.sasl.jaas.config={plain_jaas}") as proc:
        sasl = f"127.0.0.1:{proc.ports['SASL_PLAINTEXT']}"

        def conf(mech: str, user: str, password: str) -> dict[str, Any]:
            return {"bootstrap.servers": sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
                    "sasl.username": user, "sasl.password": password}

        carol = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                             b"carol-secret")
        anonymous = AdminClient({"bootstrap.servers": proc.bootstrap})
        with pytest.raises(KafkaException) as info:
            anonymous.alter_user_scram_credentials([carol])["carol"].result(TIMEOUT)
        assert info.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

        admin = AdminClient(conf("PLAIN", "admin", "admin-secret"))
        admin.alter_user_scram_credentials([carol])["carol"].result(TIMEOUT)
        for t in ("carol-topic", "other-topic"):
            admin.create_topics([NewTopic(t, 1, 1)])[t].result(TIMEOUT)
        for fut in admin.create_acls([AclBinding(ResourceType.TOPIC, "carol-topic", ResourcePatternType.LITERAL,
                                                 "User:carol", "*", AclOperation.WRITE, AclPermissionType.ALLOW)],
                                     request_timeout=TIMEOUT).values():
            fut.result()
        errors: dict[str, Any] = {}
        p = Producer({**conf("SCRAM-SHA-512", "carol", "carol-secret"), "message.timeout.ms": 10000})
        for t in ("carol-topic", "other-topic"):
            p.produce(t, b"x", on_delivery=lambda err, msg: errors.__setitem__(str(msg.topic()), err))
        p.flush(TIMEOUT)
        assert errors["carol-topic"] is None
        assert errors["other-topic"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


class _BootstrappedBroker(BrokerProcess):
    """``headwater broker`` with ``--add-scram`` arguments."""

    def __init__(self, log_dir: Path, *overrides: str, add_scram: list[str]) -> None:
        super().__init__(log_dir, *overrides)
        self.add_scram = add_scram

    def _spawn(self, args: list[str], cwd: Path | None = None) -> None:
        super()._spawn([*args, *(a for spec in self.add_scram for a in ("--add-scram", spec))], cwd)


def test_first_admin_from_add_scram(tmp_path: Path) -> None:
    """KIP-900's --add-scram: a broker whose only listener takes SCRAM gets its first (super) user at start;
    a later start with another password keeps the credential the admin API may have changed since."""
    settings = ["num.partitions=1", "authorizer.enabled=true", "super.users=User:admin",
                "listeners=SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms=SCRAM-SHA-512"]

    def admin_for(proc: BrokerProcess, password: str) -> AdminClient:
        return AdminClient({"bootstrap.servers": proc.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin", "sasl.password": password})

    first = _BootstrappedBroker(tmp_path / "data", *settings,
                                add_scram=['SCRAM-SHA-512=[name=admin,password="admin,secret",iterations=8192]'])
    with first as proc:
        admin = admin_for(proc, "admin,secret")
        per_user: Any = admin.describe_user_scram_credentials(["admin"])
        assert per_user["admin"].result(TIMEOUT).scram_credential_infos[0].iterations == 8192
        carol = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                             b"carol-secret")
        admin.alter_user_scram_credentials([carol])["carol"].result(TIMEOUT)
    assert "admin,secret" not in (tmp_path / "data-broker.log").read_text()
    again = _BootstrappedBroker(tmp_path / "data", *settings,
                                add_scram=["SCRAM-SHA-512=[name=admin,password=another]"])
    with again as proc:
        admin = admin_for(proc, "admin,secret")  # (kept: a client dropped before its future completes cancels it)
        everyone: Any = admin.describe_user_scram_credentials()
        users = everyone.result(TIMEOUT)
        assert set(users) == {"admin", "carol"}
    done = subprocess.run([sys.executable, "-m", "headwater", "broker", "--set", f"log.dirs={tmp_path / 'x'}",
                           "--add-scram", "SCRAM-SHA-512=[name=a,password=b,iterations=100]"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "iterations must be 4096..16384" in done.stderr


def test_scram_sessions_are_renewed_by_reauthentication(tmp_path: Path) -> None:
    """KIP-368 with SCRAM: past connections.max.reauth.ms kafka-python re-authenticates on its connection (a
    fresh SCRAM exchange; its log says so) and goes on producing, and so do confluent-kafka's sends."""
    reauth_ms = 2000
    with BrokerProcess(tmp_path / "data", "num.partitions=1", f"connections.max.reauth.ms={reauth_ms}",
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                       "sasl.enabled.mechanisms=SCRAM-SHA-256") as proc:
        s = Secured(proc, tmp_path / "no-ca.pem")
        s.set_user(USER, PASSWORD, ["SCRAM-SHA-256"])
        topic = s.topic("scram-reauth")
        from kafka import KafkaProducer

        seen = _Records()
        logger = logging.getLogger("kafka.net.connection")
        level = logger.level
        logger.setLevel(logging.DEBUG)
        logger.addHandler(seen)
        sent = 0
        try:
            kp = KafkaProducer(**_python_kwargs(s, "SASL_PLAINTEXT", "SCRAM-SHA-256", USER, PASSWORD, aio=False))
            confluent = Producer(_confluent_conf(s, "SASL_PLAINTEXT", "SCRAM-SHA-256", USER, PASSWORD))
            try:
                deadline = time.monotonic() + 2.2 * reauth_ms / 1000
                while time.monotonic() < deadline:
                    kp.send(topic, b"kafka-python %d" % sent).get(TIMEOUT)
                    confluent.produce(topic, b"confluent %d" % sent)
                    assert confluent.flush(TIMEOUT) == 0
                    sent += 1
                    time.sleep(0.2)
            finally:
                kp.close(10)
        finally:
            logger.removeHandler(seen)
            logger.setLevel(level)
        assert any("Beginning SASL re-authentication" in m for m in seen.messages), seen.messages[-5:]
        assert not any("re-authentication failed" in m for m in seen.messages)
        assert s.end_offset(topic) == 2 * sent
        logged = proc.log_text()
        assert "authentication of user" not in logged  # no SCRAM exchange failed
