"""Authenticated principals everywhere: two SASL users with their own ACLs see and write only their own
topics, DescribeCluster reports each one's authorized operations, and a quota set for one user entity
throttles that user and not the other (confluent-kafka, as a Kafka operator's clients would)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn

pytestmark = pytest.mark.timeout(180)
TIMEOUT = 30.0
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in USERS.items()) + ";")


def _conf(proc: BrokerProcess, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": f"127.0.0.1:{proc.ports['SASL_PLAINTEXT']}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": USERS[user]}


def _allow(admin: AdminClient, user: str, topic: str, *ops: AclOperation) -> None:
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", op,
                           AclPermissionType.ALLOW) for op in ops]
    for fut in admin.create_acls(bindings, request_timeout=TIMEOUT).values():
        fut.result()


def _user_quota(port: int, user: str, producer_byte_rate: float) -> None:
    E = AlterClientQuotasRequest.EntryData
    entry = E(entity=[E.EntityData(entity_type="user", entity_name=user)],
              ops=[E.OpData(key="producer_byte_rate", value=producer_byte_rate, remove=False)])
    with Conn(port) as conn:
        resp = conn.call(AlterClientQuotasRequest[1](entries=[entry], validate_only=False), AlterClientQuotasResponse)
    assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None)]


def _produce(proc: BrokerProcess, user: str, topic: str, count: int, size: int = 1000) -> tuple[dict[str, Any], int]:
    """Sends ``count`` records as ``user``; (the first delivery error by topic or None, throttle events)."""
    throttles = [0]
    lock = threading.Lock()

    def throttled(event: Any) -> None:
        if event.throttle_time > 0:
            with lock:
                throttles[0] += 1

    p = Producer({**_conf(proc, user), "linger.ms": 5, "message.timeout.ms": 20000, "throttle_cb": throttled})
    errors: dict[str, Any] = {}
    for _ in range(count):
        p.produce(topic, bytes(size), on_delivery=lambda err, msg: errors.setdefault(str(msg.topic()), err))
        p.poll(0)
    assert p.flush(TIMEOUT) == 0
    return errors, throttles[0]


def test_each_user_sees_writes_and_is_throttled_as_its_principal(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", "num.partitions=1", "authorizer.enabled=true",
                       "super.users=User:admin;User:ANONYMOUS",  # the PLAINTEXT listener is the operator's door
                       "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                       "sasl.enabled.mechanisms=PLAIN",
                       f"listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}") as proc:
        admin = AdminClient(_conf(proc, "admin"))
        for t in ("alice-topic", "bob-topic"):
            admin.create_topics([NewTopic(t, 1, 1)])[t].result(TIMEOUT)
        for user in ("alice", "bob"):
            _allow(admin, user, f"{user}-topic", AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)
        _user_quota(proc.port, "alice", 10_000.0)  # 10 kB/s for User:alice, whatever its client id

        # Metadata: each user is shown only the topics it may describe
        for user in ("alice", "bob"):
            topics = set(AdminClient(_conf(proc, user)).list_topics(timeout=TIMEOUT).topics)
            assert f"{user}-topic" in topics, (user, topics)
            assert not {"alice-topic", "bob-topic"} - {f"{user}-topic"} & topics, (user, topics)

        # DescribeCluster's authorized operations are the principal's
        clients = {user: AdminClient(_conf(proc, user)) for user in ("admin", "alice")}  # alive until answered
        ops = {user: set(c.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT).result()
                         .authorized_operations or []) for user, c in clients.items()}
        assert AclOperation.ALTER in ops["admin"] and AclOperation.ALTER not in ops["alice"], ops

        # writes: each to its own topic only
        errors, _ = _produce(proc, "alice", "bob-topic", 1)
        assert errors["bob-topic"] is not None and errors["bob-topic"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        errors, _ = _produce(proc, "bob", "alice-topic", 1)
        assert errors["alice-topic"].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

        # the user quota: alice's 300 kB (30 kB/s over Kafka's 10 s rate window) are throttled, bob's are not
        errors, alice_throttles = _produce(proc, "alice", "alice-topic", 300)
        assert errors["alice-topic"] is None
        errors, bob_throttles = _produce(proc, "bob", "bob-topic", 300)
        assert errors["bob-topic"] is None
        assert alice_throttles > 0
        assert bob_throttles == 0
