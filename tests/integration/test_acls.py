"""ACLs with real admin clients: CreateAcls/DescribeAcls/DeleteAcls from confluent-kafka and kafka-python
(literal, prefixed and wildcard patterns, ANY and MATCH filters, bad bindings refused one by one), kept
across a restart, and enforced with ``authorizer.enabled=true`` on produce, fetch, group join, topic
creation and metadata, as Kafka answers (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from support.brokerproc import BrokerProcess
from support.connectproc import unique

pytestmark = pytest.mark.timeout(120)
ME = "User:ANONYMOUS"  # every client, without authentication


def binding(rtype: ResourceType, name: str, op: AclOperation, perm: AclPermissionType = AclPermissionType.ALLOW,
            pattern: ResourcePatternType = ResourcePatternType.LITERAL, principal: str = ME) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def key(b: AclBinding) -> tuple:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


# None matches any name, principal or host (confluent-kafka's stubs say str)
ANY_FILTER = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                              AclOperation.ANY, AclPermissionType.ANY)


def test_acl_admin_api_with_confluent_kafka(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = unique("acl-t")
    wanted = [binding(ResourceType.TOPIC, topic, AclOperation.READ),
              binding(ResourceType.TOPIC, topic[:6], AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED),
              binding(ResourceType.TOPIC, "*", AclOperation.DESCRIBE, principal="User:bob"),
              binding(ResourceType.GROUP, unique("g"), AclOperation.READ, AclPermissionType.DENY),
              binding(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)]
    for fut in admin.create_acls(wanted, request_timeout=10).values():
        assert fut.result() is None
    # a binding Kafka refuses is refused on its own, naming the problem
    bad = admin.create_acls([binding(ResourceType.BROKER, "not-the-cluster", AclOperation.ALTER)], request_timeout=10)
    with pytest.raises(KafkaException, match="kafka-cluster"):
        list(bad.values())[0].result()
    everything = {key(b) for b in admin.describe_acls(ANY_FILTER, request_timeout=10).result()}
    assert {key(b) for b in wanted} <= everything
    # MATCH: every pattern that names this topic (literal, prefix and the * wildcard)
    match = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None,  # type: ignore[arg-type]
                             AclOperation.ANY, AclPermissionType.ANY)
    assert {key(b) for b in admin.describe_acls(match, request_timeout=10).result()} >= {key(b) for b in wanted[:3]}
    literal = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                               None, None, AclOperation.ANY, AclPermissionType.ANY)  # type: ignore[arg-type]
    assert [key(b) for b in admin.describe_acls(literal, request_timeout=10).result()] == [key(wanted[0])]
    bobs = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,  # type: ignore[arg-type]
                            AclOperation.ANY, AclPermissionType.ANY)
    deleted = admin.delete_acls([literal, bobs],
                                request_timeout=10)
    removed = [[key(b) for b in fut.result()] for fut in deleted.values()]
    assert removed == [[key(wanted[0])], [key(wanted[2])]]
    left = {key(b) for b in admin.describe_acls(ANY_FILTER, request_timeout=10).result()}
    assert key(wanted[0]) not in left and key(wanted[2]) not in left and key(wanted[1]) in left
    for fut in admin.delete_acls([ANY_FILTER], request_timeout=10).values():
        fut.result()
    assert admin.describe_acls(ANY_FILTER, request_timeout=10).result() == []


def test_acl_admin_api_with_kafka_python(broker: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="acl-test")
    try:
        group = unique("kp-g")
        acl = ACL(ME, "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                  ResourcePattern(KResourceType.GROUP, group, ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl])
        assert result["succeeded"] == [acl] and not result["failed"]
        flt = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KResourceType.GROUP, group, ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(flt)
        assert error.errno == 0 and found == [acl]
        deleted = admin.delete_acls([flt])
        (_, matched, error), = deleted
        assert matched == [acl] and error.errno == 0
        assert admin.describe_acls(flt)[0] == []
    finally:
        admin.close()


def _produce(bootstrap: str, topic: str) -> KafkaError | None:
    """One record; the delivery error, if any."""
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000,
                         "topic.metadata.refresh.interval.ms": 500, "allow.auto.create.topics": False})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    return errors[0] if errors else KafkaError(KafkaError._TIMED_OUT)


def _consume_error(bootstrap: str, topic: str, group: str) -> int | None:
    """The first error code a consumer of ``topic`` in ``group`` meets, or None once it reads a record."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        for _ in range(40):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if err := msg.error():
                return err.code()
            return None
        return KafkaError._TIMED_OUT
    finally:
        consumer.close()


@pytest.mark.slow
def test_acls_are_kept_and_enforced(tmp_path: Path) -> None:
    ok, denied, secret = "ok-data", "no-data", "ok-secret"
    with BrokerProcess(tmp_path / "data", "num.partitions=1") as proc:  # not enforced yet: set everything up
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        for fut in admin.create_topics([NewTopic(t, 1, 1) for t in (ok, denied, secret)]).values():
            fut.result(10)
        for t in (ok, denied, secret):
            assert _produce(proc.bootstrap, t) is None
        rules = [binding(ResourceType.TOPIC, "ok-", op, pattern=ResourcePatternType.PREFIXED)
                 for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.CREATE)]
        rules += [binding(ResourceType.TOPIC, secret, AclOperation.READ, AclPermissionType.DENY),
                  binding(ResourceType.GROUP, "g-ok", AclOperation.READ),
                  binding(ResourceType.BROKER, "kafka-cluster", AclOperation.IDEMPOTENT_WRITE)]
        for fut in admin.create_acls(rules, request_timeout=10).values():
            fut.result()
    with BrokerProcess(tmp_path / "data", "num.partitions=1", "authorizer.enabled=true") as proc:
        bootstrap = proc.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert _produce(bootstrap, ok) is None
        denial = _produce(bootstrap, denied)
        assert denial is not None and denial.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert _consume_error(bootstrap, ok, "g-ok") is None
        assert _consume_error(bootstrap, secret, "g-ok") == KafkaError.TOPIC_AUTHORIZATION_FAILED  # deny wins
        assert _consume_error(bootstrap, ok, "g-other") == KafkaError.GROUP_AUTHORIZATION_FAILED
        # topic creation: CREATE on "ok-" topics only
        made = admin.create_topics([NewTopic("ok-new", 1, 1), NewTopic("no-new", 1, 1)])
        made["ok-new"].result(10)
        with pytest.raises(KafkaException) as info:
            made["no-new"].result(10)
        assert info.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        # metadata of all topics lists only those the client may describe (READ/WRITE imply DESCRIBE)
        listed = set(admin.list_topics(timeout=10).topics)
        assert {ok, secret, "ok-new"} <= listed and denied not in listed
        # ACL admin itself needs the cluster permissions, which nobody has been given
        from kafka.admin import (
            ACLFilter,
            ACLOperation,
            ACLPermissionType,
            ACLResourcePatternType,
            KafkaAdminClient,
            ResourcePatternFilter,
        )
        from kafka.admin import ResourceType as KResourceType
        from kafka.errors import ClusterAuthorizationFailedError

        kp_admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="acl-enforced")
        try:
            anything = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                 ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
            with pytest.raises(ClusterAuthorizationFailedError):
                kp_admin.describe_acls(anything)
        finally:
            kp_admin.close()
