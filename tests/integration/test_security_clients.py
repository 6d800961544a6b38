"""Issue 26: real clients over secured listeners. confluent-kafka, kafka-python, aiokafka and kcat each
produce and consume over SSL, mTLS (ssl.client.auth=required; the principal mapped from the certificate is
what the ACLs name), SASL_SSL/PLAIN and SASL_PLAINTEXT/PLAIN; a wrong password is each library's
authentication error and writes nothing; a certificate whose principal has no ACL is refused."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from support.connectproc import unique
from support.securebroker import SecureBroker, start_secure_broker

pytestmark = pytest.mark.timeout(120)

LISTENERS = ["SSL", "MTLS", "SASL_SSL", "SASL_PLAINTEXT"]
CLIENTS = ["confluent", "kafka-python", "aiokafka", "kcat"]
VALUES = [b"one", b"two", b"three"]


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    base = tmp_path_factory.mktemp("secure")
    broker = start_secure_broker(base, "authorizer.enabled=true", "super.users=User:ANONYMOUS;User:admin")
    # alice (by SASL password or by certificate) may use the sec-* topics and groups; nobody else may
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    acls = [AclBinding(rtype, "sec-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.ALL,
                       AclPermissionType.ALLOW) for rtype in (ResourceType.TOPIC, ResourceType.GROUP)]
    for future in admin.create_acls(acls).values():
        future.result(30)
    try:
        yield broker
    finally:
        broker.proc.stop()


def _topic(secure: SecureBroker) -> str:
    name = unique("sec-")
    admin = AdminClient({"bootstrap.servers": secure.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _end_offset(secure: SecureBroker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": secure.bootstrap("PLAINTEXT"), "group.id": unique("end")})
    try:
        from confluent_kafka import TopicPartition

        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        consumer.close()


# -- one produce-and-consume round per library ------------------------------------------------------------

def _confluent(secure: SecureBroker, listener: str, topic: str) -> list[bytes | None]:
    conf = secure.confluent(listener)
    producer = Producer({**conf, "socket.timeout.ms": 20000})
    errors: list[Any] = []
    for v in VALUES:
        producer.produce(topic, v, on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer({**conf, "group.id": unique("sec-g"), "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes | None] = []
    try:
        for _ in range(60):
            if len(got) >= len(VALUES):
                break
            m = consumer.poll(1)
            if m is not None and m.error() is None:
                got.append(m.value())
            elif m is not None:
                raise KafkaException(m.error())
    finally:
        consumer.close()
    return got


def _kafka_python(secure: SecureBroker, listener: str, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    kw = secure.kafka_python(listener)
    producer = KafkaProducer(**kw, request_timeout_ms=20000)
    try:
        for v in VALUES:
            producer.send(topic, v).get(30)
    finally:
        producer.close(10)
    consumer = KafkaConsumer(topic, **kw, group_id=unique("sec-g"), auto_offset_reset="earliest",
                             consumer_timeout_ms=20000)
    try:
        got = []
        for m in consumer:
            got.append(m.value)
            if len(got) >= len(VALUES):
                break
        return got
    finally:
        consumer.close()


def _aiokafka(secure: SecureBroker, listener: str, topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    kw = secure.kafka_python(listener)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**kw)
        await producer.start()
        try:
            for v in VALUES:
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **kw, group_id=unique("sec-g"), auto_offset_reset="earliest")
        await consumer.start()
        try:
            got: list[bytes] = []
            while len(got) < len(VALUES):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for records in batch.values() for m in records if m.value is not None]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def _kcat_args(conf: dict[str, Any]) -> list[str]:
    args = ["/usr/bin/kcat", "-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    return args


def _kcat(secure: SecureBroker, listener: str, topic: str) -> list[bytes]:
    args = _kcat_args(secure.confluent(listener))
    subprocess.run([*args, "-P", "-t", topic], input=b"\n".join(VALUES) + b"\n", check=True, timeout=60,
                   capture_output=True)
    done = subprocess.run([*args, "-C", "-t", topic, "-o", "beginning", "-e", "-q"], check=True, timeout=60,
                          capture_output=True)
    return done.stdout.splitlines()


ROUNDS = {"confluent": _confluent, "kafka-python": _kafka_python, "aiokafka": _aiokafka, "kcat": _kcat}


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("client", CLIENTS)
def test_each_client_produces_and_consumes_over_each_secured_listener(secure: SecureBroker, client: str,
                                                                      listener: str) -> None:
    topic = _topic(secure)
    assert ROUNDS[client](secure, listener, topic) == VALUES
    assert _end_offset(secure, topic) == len(VALUES)


# -- refusals ---------------------------------------------------------------------------------------------

def _wrong_password_confluent(secure: SecureBroker, listener: str, topic: str) -> str:
    errors: list[KafkaError] = []  # librdkafka reports the refusal through error_cb, then keeps retrying
    producer = Producer({**secure.confluent(listener, password="not-the-password"), "message.timeout.ms": 5000,
                         "error_cb": errors.append})
    producer.produce(topic, b"x")
    producer.flush(15)
    assert errors
    return " ".join(f"{e.name()} {e.str()}" for e in errors)


@contextlib.contextmanager
def _logged(logger: str) -> Iterator[list[str]]:
    """The messages ``logger`` writes meanwhile (the Python clients log each refused connection attempt)."""
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger(logger).addHandler(handler)
    try:
        yield seen
    finally:
        logging.getLogger(logger).removeHandler(handler)


def _wrong_password_kafka_python(secure: SecureBroker, listener: str, topic: str) -> str:
    """kafka-python retries the bootstrap until bootstrap_timeout_ms (30 s by default), then raises a timeout;
    the refusal it met on each attempt is the SaslAuthenticationFailedError it logs."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as PyKafkaError

    with _logged("kafka") as seen, pytest.raises(PyKafkaError):
        producer = KafkaProducer(**secure.kafka_python(listener, password="not-the-password"), max_block_ms=4000,
                                 bootstrap_timeout_ms=4000)
        try:
            producer.send(topic, b"x").get(10)
        finally:
            producer.close(5)
    # each refused bootstrap attempt must have read the refusal: a broker that closes right behind its answer
    # leaves kafka-python with "socket disconnected" instead (the client then never learns why)
    attempts = [m for m in seen if m.startswith("Bootstrap connection to") and "failed" in m]
    refused = [m for m in attempts if "SaslAuthenticationFailedError" in m]
    assert len(refused) * 2 > len(attempts), attempts
    return " ".join(refused)


def _wrong_password_aiokafka(secure: SecureBroker, listener: str, topic: str) -> str:
    """aiokafka's start() fails to bootstrap; why is the SaslAuthenticationFailed it logs."""
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    async def run() -> None:
        producer = AIOKafkaProducer(**secure.kafka_python(listener, password="not-the-password"))
        try:
            with pytest.raises(AioKafkaError):
                await producer.start()
        finally:
            await producer.stop()

    with _logged("aiokafka") as seen:
        asyncio.run(run())
    return " ".join(m for m in seen if "SaslAuthenticationFailed" in m)


def _wrong_password_kcat(secure: SecureBroker, listener: str, topic: str) -> str:
    args = _kcat_args(secure.confluent(listener, password="not-the-password"))
    done = subprocess.run([*args, "-X", "message.timeout.ms=5000", "-P", "-t", topic], input=b"x\n", timeout=60,
                          capture_output=True)
    assert done.returncode != 0 or b"Authentication failed" in done.stderr
    return done.stderr.decode(errors="replace")


WRONG_PASSWORD = {"confluent": _wrong_password_confluent, "kafka-python": _wrong_password_kafka_python,
                  "aiokafka": _wrong_password_aiokafka, "kcat": _wrong_password_kcat}


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
@pytest.mark.parametrize("client", CLIENTS)
def test_a_wrong_password_is_an_authentication_error_and_writes_nothing(secure: SecureBroker, client: str,
                                                                        listener: str) -> None:
    topic = _topic(secure)
    error = WRONG_PASSWORD[client](secure, listener, topic)
    assert "Authentication" in error or "AUTHENTICATION" in error, error
    assert _end_offset(secure, topic) == 0


def test_a_certificate_principal_without_acls_is_refused(secure: SecureBroker) -> None:
    """mallory's certificate is trusted, so TLS succeeds; its principal (the whole DN, no rule maps it) has
    no ACL, so its produce is refused while alice's, by certificate, went through (above)."""
    topic = _topic(secure)
    producer = Producer({**secure.confluent("MTLS", cert="mallory"), "message.timeout.ms": 8000})
    errors: list[KafkaError | None] = []
    producer.produce(topic, b"x", on_delivery=lambda err, _m: errors.append(err))
    producer.flush(20)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errors
    assert _end_offset(secure, topic) == 0


def test_mtls_refuses_a_client_without_a_certificate(secure: SecureBroker, tmp_path: Path) -> None:
    conf = secure.confluent("SSL")  # the CA, no client certificate
    conf["bootstrap.servers"] = secure.bootstrap("MTLS")
    admin = AdminClient({**conf, "socket.timeout.ms": 5000})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    # and the broker serves the others meanwhile
    assert AdminClient(secure.confluent("MTLS")).list_topics(timeout=20).brokers
