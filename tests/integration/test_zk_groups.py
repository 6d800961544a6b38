"""Group coordinators on a real ZooKeeper with three real brokers: ``__consumer_offsets`` is a cluster topic
(made by the first FindCoordinator, replicated on all three brokers), a group's coordinator is the leader of
its partition, and when that broker is SIGKILLed the group's members (librdkafka and kafka-python) find the
new coordinator and carry on from the committed offsets: nothing committed is read again, nothing skipped;
when the killed broker returns, the group moves back to it with every commit made meanwhile.
With fewer live brokers than offsets.topic.replication.factor, FindCoordinator refuses and makes nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaConsumer
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import request
from support.zkcluster import agreed_controller, agreed_topic, topic_view

from headwater.broker.group.store import offsets_partition
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PARTITIONS = 4
OFFSETS_PARTITIONS = 50  # Kafka's default offsets.topic.num.partitions
BATCH = 200
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 15, 16


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    base, chroot = tmp_path_factory.mktemp("zk-groups"), "/" + unique("hw")
    started = {i: BrokerProcess(base / f"b{i}", f"zookeeper.connect={zookeeper.connect}{chroot}", f"broker.id={i}",
                                f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                                "group.initial.rebalance.delay.ms=0") for i in IDS}
    try:
        for i in (1, 2):  # the third is started by the test, once it has seen two refuse to coordinate
            started[i].start()
        wait_until(lambda: agreed_controller([started[1], started[2]], {1, 2}), "two brokers and a controller",
                   timeout=20)
        yield started
    finally:
        for b in started.values():
            b.kill()


def _produce(producer: Producer, topic: str, numbers: range) -> None:
    for n in numbers:
        producer.produce(topic, str(n).encode(), partition=n % PARTITIONS)
    assert producer.flush(60) == 0


def _coordinator(bootstrap: str, group: str) -> int | None:
    """The group's coordinator as librdkafka's DescribeConsumerGroups finds it; None while it moves. A new
    admin client each time: librdkafka's admin client keeps a coordinator it found for a while, even after a
    NOT_COORDINATOR answer."""
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # referenced until answered
        return int(admin.describe_consumer_groups([group])[group].result(10).coordinator.id)
    except KafkaException:
        return None


def _found_coordinator(broker: BrokerProcess, group: str) -> int:
    """The coordinator FindCoordinator (v2) on ``broker`` answers for ``group``; -1 with an error."""
    answer = request(broker.port, FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse)
    return -1 if answer.error_code else int(answer.node_id)


def _offset_fetch(broker: BrokerProcess, group: str) -> Any:
    """OffsetFetch v5 for every partition the group committed, asked of ``broker``."""
    return request(broker.port, OffsetFetchRequest[5](group_id=group, topics=None), OffsetFetchResponse)


def _commit_rdkafka(consumer: Consumer) -> bool:
    """Commit the librdkafka member's positions; whether it worked (not while its coordinator moves)."""
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        return bool(exc.args[0].code() == KafkaError._NO_OFFSET)  # nothing consumed since the last commit
    return True


def _commit_kafka_python(consumer: KafkaConsumer) -> bool:
    try:
        consumer.commit()
    except Exception:  # CommitFailedError (a rebalance: its next poll joins again), a coordinator error
        return False
    return True


def _poll(rdkafka: Consumer, kpython: KafkaConsumer, read: list[tuple[str, int]]) -> None:
    """One poll of each member, what they read appended to ``read``, then each commits (a commit that fails
    leaves its records uncommitted: they may be read again, and only they)."""
    for msg in rdkafka.consume(num_messages=500, timeout=0.2):
        if msg.error() is None:
            read.append(("librdkafka", int(msg.value() or b"")))
    for records in kpython.poll(timeout_ms=200).values():
        read.extend(("kafka-python", int(r.value)) for r in records)
    _commit_rdkafka(rdkafka)
    _commit_kafka_python(kpython)


def _read_until(rdkafka: Consumer, kpython: KafkaConsumer, read: list[tuple[str, int]], numbers: range,
                timeout: float) -> None:
    """Both members poll and commit until they have read every record of ``numbers``, then until both
    commits went through."""
    wanted = set(numbers)

    def all_read() -> bool:
        _poll(rdkafka, kpython, read)
        return wanted <= {n for _, n in read}

    def both_committed() -> bool:
        _poll(rdkafka, kpython, read)
        return _commit_rdkafka(rdkafka) and _commit_kafka_python(kpython)
    wait_until(all_read, f"records {numbers.start}-{numbers.stop - 1} read", timeout=timeout)
    wait_until(both_committed, "both members' positions committed", timeout=30)


def _committed(broker: BrokerProcess, group: str) -> dict[int, int]:
    """The group's committed offset of each partition, as its coordinator ``broker`` answers."""
    answer = _offset_fetch(broker, group)
    assert answer.error_code == 0
    return {p.partition_index: p.committed_offset for t in answer.topics for p in t.partitions}


def test_group_resumes_from_committed_offsets_after_its_coordinator_is_killed(
        brokers: dict[int, BrokerProcess]) -> None:
    topic, group = unique("orders"), unique("group")
    # fewer live brokers than offsets.topic.replication.factor (3): no coordinator, no __consumer_offsets
    refused = request(brokers[1].port, FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse)
    assert refused.error_code == COORDINATOR_NOT_AVAILABLE
    assert "does not meet the required replication factor '3'" in refused.error_message
    assert topic_view(brokers[1], "__consumer_offsets") is None
    brokers[3].start()
    every = list(brokers.values())
    wait_until(lambda: agreed_controller(every, IDS), "three brokers and a controller", timeout=20)
    bootstrap = ",".join(b.bootstrap for b in every)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next(iter(admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=20).values())).result(30)
    wait_until(lambda: agreed_topic(every, topic, lambda v: len(v) == PARTITIONS), "the topic on every broker")

    rdkafka = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                        "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                        "topic.metadata.refresh.interval.ms": 1000})
    kpython = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                            auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=1000,
                            metadata_max_age_ms=1000)
    # one idempotent producer throughout, writing through the coordinator's death
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 500})
    read: list[tuple[str, int]] = []
    try:
        rdkafka.subscribe([topic])

        def both_assigned() -> bool:
            rdkafka.poll(0.1)
            kpython.poll(timeout_ms=100)
            return bool(rdkafka.assignment()) and bool(kpython.assignment()) and \
                len(rdkafka.assignment()) + len(kpython.assignment()) == PARTITIONS
        wait_until(both_assigned, "both members assigned", timeout=40)

        # __consumer_offsets: a cluster topic with a replica on every broker, the coordinator its partition's leader
        def replicated_everywhere(v: dict) -> bool:
            return len(v) == OFFSETS_PARTITIONS and all(set(p[2]) == IDS for p in v.values())
        offsets_view = wait_until(lambda: agreed_topic(every, "__consumer_offsets", replicated_everywhere),
                                  "__consumer_offsets on every broker, replicated on all three")
        # and it stays as made: not deleted, not grown (its groups' partitions would move)
        with pytest.raises(KafkaException) as refused_deletion:
            admin.delete_topics(["__consumer_offsets"], operation_timeout=5)["__consumer_offsets"].result(10)
        assert refused_deletion.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
        with pytest.raises(KafkaException) as refused_growth:
            admin.create_partitions([NewPartitions("__consumer_offsets", 60)])["__consumer_offsets"].result(10)
        assert refused_growth.value.args[0].code() == KafkaError.INVALID_REQUEST
        coordinator = wait_until(lambda: _coordinator(bootstrap, group), "the group's coordinator")
        assert coordinator == offsets_view[offsets_partition(group, OFFSETS_PARTITIONS)][0]

        _produce(producer, topic, range(BATCH))
        _read_until(rdkafka, kpython, read, range(BATCH), timeout=60)
        at_kill = _committed(brokers[coordinator], group)  # what the group has committed when its coordinator dies
        assert sum(at_kill.values()) == BATCH
        before = len(read)

        brokers[coordinator].kill()
        others = [b for i, b in brokers.items() if i != coordinator]
        wait_until(lambda: (v := topic_view(others[0], "__consumer_offsets")) is not None and
                   v[offsets_partition(group, OFFSETS_PARTITIONS)][0] not in (-1, coordinator),
                   "the group's offsets partition led by another broker", timeout=SESSION_TIMEOUT_MS / 1000 + 15)

        _produce(producer, topic, range(BATCH, 2 * BATCH))
        _read_until(rdkafka, kpython, read, range(2 * BATCH), timeout=90)
        new_coordinator = wait_until(lambda: (c := _coordinator(bootstrap, group)) != coordinator and c,
                                     "the group's new coordinator")
        # the group's requests elsewhere answer NOT_COORDINATOR; its coordinator has the committed offsets
        bystander = next(i for i in IDS if i not in (coordinator, new_coordinator))
        assert _offset_fetch(brokers[bystander], group).error_code == NOT_COORDINATOR
        assert sum(_committed(brokers[new_coordinator], group).values()) == 2 * BATCH
    finally:
        rdkafka.close()
        kpython.close()
    # value n went to partition n % 4 at offset n // 4 (one idempotent producer, in order)
    again = sorted(n for _, n in read[before:] if n // PARTITIONS < at_kill[n % PARTITIONS])
    assert not again, f"committed before the coordinator's death and read again after it: {again[:10]}"
    skipped = set(range(2 * BATCH)) - {n for _, n in read}
    assert not skipped, f"never read: {sorted(skipped)[:10]}"
    assert {who for who, _ in read} == {"librdkafka", "kafka-python"}

    # the killed broker returns, leads its preferred partitions again and with them the group, whose commits
    # made meanwhile it has from replication: a new member reads only what follows them
    brokers[coordinator].start()
    offsets_index = offsets_partition(group, OFFSETS_PARTITIONS)
    wait_until(lambda: agreed_topic(every, "__consumer_offsets", lambda v: v[offsets_index][0] == coordinator),
               "the returning broker leading the group's offsets partition again", timeout=40)
    wait_until(lambda: all(_found_coordinator(b, group) == coordinator for b in every) and
               _offset_fetch(brokers[coordinator], group).error_code == 0,
               "the group coordinated by the returning broker", timeout=20)
    assert sum(_committed(brokers[coordinator], group).values()) == 2 * BATCH
    _produce(producer, topic, range(2 * BATCH, 2 * BATCH + 20))
    late = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    got: list[int] = []
    try:
        late.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            msg = late.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(int(msg.value() or b""))
        settle = time.monotonic() + 1.5  # anything beyond would be a record committed before and read again
        while time.monotonic() < settle:
            msg = late.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(int(msg.value() or b""))
    finally:
        late.close()
    assert sorted(got) == list(range(2 * BATCH, 2 * BATCH + 20))
