"""Failover that loses nothing acknowledged, on a real ZooKeeper with three real brokers: an idempotent
librdkafka producer (acks=all) writes numbered records to a replication-factor-3 topic with
min.insync.replicas=2 while the test SIGKILLs the leader of each partition in turn and starts it again;
afterwards every acknowledged record is read back exactly once, in order per partition, and the three
replicas' logs hold the same batches up to the high watermark."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support import zkserver
from support.brokerproc import BrokerProcess
from support.zkcluster import (
    NumberedProducer,
    agreed_topic,
    assert_each_acknowledged_once,
    high_watermarks,
    read_numbers,
    replicas_equal,
    running_cluster,
)

from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PARTITIONS = 3


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    base, chroot = tmp_path_factory.mktemp("zk-failover"), "/" + unique("hw")
    with running_cluster(base, zookeeper.connect + chroot, IDS, SESSION_TIMEOUT_MS) as started:
        yield started


def test_acknowledged_records_survive_killing_each_leader_in_turn(brokers: dict[int, BrokerProcess]) -> None:
    topic = unique("failover")
    every = list(brokers.values())
    bootstrap = ",".join(b.bootstrap for b in every)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next(iter(admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=20).values())).result(30)
    wait_until(lambda: agreed_topic(every, topic, lambda v: len(v) == PARTITIONS
                                    and all(set(p[3]) == IDS for p in v.values())), "the topic on every broker")

    writer = NumberedProducer(bootstrap, topic, PARTITIONS)
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
        writer.finish()
    assert not writer.failed, writer.failed[:5]
    acked = writer.acked
    assert all(acked.values())

    # every replica caught up: the same batches below the high watermark on all three
    wait_until(lambda: agreed_topic(every, topic, lambda v: all(set(p[3]) == IDS for p in v.values())),
               "every replica back in the ISR", timeout=30)
    highs = high_watermarks(bootstrap, topic, PARTITIONS)
    wait_until(lambda: replicas_equal([b.log_dir for b in every], topic, highs),
               "the three replicas' logs equal below the high watermark", timeout=30)
    assert_each_acknowledged_once(acked, read_numbers(bootstrap, topic, PARTITIONS))
    print(f"acknowledged {sum(map(len, acked.values()))} records through {PARTITIONS} leader kills, all read once")
