"""Failover that loses nothing acknowledged, on a real ZooKeeper with three real brokers: an idempotent
librdkafka producer (acks=all) writes numbered records to a replication-factor-3 topic with
min.insync.replicas=2 while the test SIGKILLs the leader of each partition in turn and starts it again;
afterwards every acknowledged record is read back exactly once, in order per partition, and the three
replicas' logs hold the same batches up to the high watermark."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support import zkserver
from support.brokerproc import BrokerProcess
from support.zkcluster import agreed_controller, agreed_topic, cluster_broker

from headwater.kafka.records import iter_batches
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PARTITIONS = 3


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    base, chroot = tmp_path_factory.mktemp("zk-failover"), "/" + unique("hw")
    started = {i: cluster_broker(base, zookeeper.connect + chroot, i, SESSION_TIMEOUT_MS) for i in IDS}
    try:
        for b in started.values():
            b.start()
        every = list(started.values())
        wait_until(lambda: agreed_controller(every, IDS), "three brokers and a controller", timeout=20)
        yield started
    finally:
        for b in started.values():
            b.kill()


def _batches(log_dir: Path, topic: str, partition: int, below: int) -> list[tuple[int, int, int]]:
    """(base offset, last offset, CRC) of every batch below ``below`` in a replica's segment files."""
    out = []
    for segment in sorted((log_dir / f"{topic}-{partition}").glob("*.log")):
        for _, h in iter_batches(segment.read_bytes()):
            if h.last_offset < below:
                out.append((h.base_offset, h.last_offset, h.crc))
    return out


def test_acknowledged_records_survive_killing_each_leader_in_turn(brokers: dict[int, BrokerProcess]) -> None:
    topic = unique("failover")
    every = list(brokers.values())
    bootstrap = ",".join(b.bootstrap for b in every)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next(iter(admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=20).values())).result(30)
    wait_until(lambda: agreed_topic(every, topic, lambda v: len(v) == PARTITIONS
                                    and all(set(p[3]) == IDS for p in v.values())), "the topic on every broker")

    acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}  # partition -> acknowledged numbers
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                             "linger.ms": 5, "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 500})

        def delivered(err: object, msg: Message) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                acked[msg.partition() or 0].append(int(msg.value() or b""))
        n = 0
        while not stop.is_set():
            producer.produce(topic, str(n).encode(), partition=n % PARTITIONS, on_delivery=delivered)
            n += 1
            producer.poll(0)
            if n % 200 == 0:
                time.sleep(0.02)  # ~10k records a second
        producer.flush(60)

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        for partition in range(PARTITIONS):
            time.sleep(0.5)
            view = wait_until(lambda: agreed_topic(every, topic, lambda v: all(set(p[3]) == IDS for p in v.values())),
                              "every replica back in the ISR", timeout=30)
            victim = brokers[view[partition][0]]
            victim.kill()
            others = [b for b in every if b is not victim]
            old = view[partition][0]

            def moved(v: dict, p: int = partition, old: int = old) -> bool:
                return v[p][0] not in (-1, old)
            wait_until(lambda o=others, m=moved: agreed_topic(o, topic, m),  # type: ignore[misc]
                       f"partition {partition} led by another broker", timeout=SESSION_TIMEOUT_MS / 1000 + 15)
            victim.start()
        time.sleep(0.5)
    finally:
        stop.set()
        writer.join(90)
    assert not writer.is_alive()
    assert not failed, failed[:5]
    assert all(acked.values())

    # every replica caught up: the same batches below the high watermark on all three
    wait_until(lambda: agreed_topic(every, topic, lambda v: all(set(p[3]) == IDS for p in v.values())),
               "every replica back in the ISR", timeout=30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "enable.partition.eof": True})
    try:
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}

        def same_logs() -> bool:
            return all(len({tuple(_batches(b.log_dir, topic, p, highs[p])) for b in every}) == 1
                       for p in range(PARTITIONS))
        wait_until(same_logs, "the three replicas' logs equal below the high watermark", timeout=30)
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
        ended: set[int] = set()
        deadline = time.monotonic() + 60
        while len(ended) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(1)
            if msg is None:
                continue
            error, index = msg.error(), msg.partition() or 0
            if error is not None:
                if error.code() == -191:  # _PARTITION_EOF
                    ended.add(index)
                continue
            read[index].append(int(msg.value() or b""))
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        assert len(read[p]) == len(set(read[p])), f"partition {p}: duplicates"
        assert read[p] == sorted(read[p]), f"partition {p}: out of order"
        missing = set(acked[p]) - set(read[p])
        assert not missing, f"partition {p}: {len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    print(f"acknowledged {sum(map(len, acked.values()))} records through {PARTITIONS} leader kills, all read once")
