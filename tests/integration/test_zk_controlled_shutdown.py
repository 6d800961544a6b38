"""Controlled shutdown on a real ZooKeeper with three real brokers: a rolling restart, each broker in turn stopped
with SIGTERM and started again (the controller last), while an idempotent librdkafka producer (acks=all) writes
numbered records to a replication-factor-3 topic and a librdkafka consumer group reads them. Before each broker
stops, the controller has moved its leaderships to other in-sync replicas (both logs say so) within a small part of
the session timeout a SIGKILL waits for; the producer's application is handed no error and the group reads every
acknowledged record. ControlledShutdown itself: NOT_CONTROLLER off the controller, STALE_BROKER_EPOCH for an epoch
older than the broker's registration, BROKER_NOT_AVAILABLE for a broker that is not registered."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import request
from support.zkcluster import NumberedProducer, agreed_controller, agreed_topic, read_numbers, running_cluster

from headwater.broker.protocol.schemas import ControlledShutdownRequest, ControlledShutdownResponse
from headwater.kafka.errors import ErrorCode
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PARTITIONS = 3
# short retries: a broker whose partitions cannot move yet asks again soon (Kafka's default backoff is 5 s)
OVERRIDES = ("controlled.shutdown.retry.backoff.ms=200", "group.initial.rebalance.delay.ms=0",
             "offsets.topic.num.partitions=3")


class Cluster3:
    def __init__(self, brokers: dict[int, BrokerProcess]) -> None:
        self.brokers = brokers
        self.every = list(brokers.values())

    def controller(self) -> int:
        return wait_until(lambda: agreed_controller(self.every, IDS), "one controller")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Cluster3]:
    with running_cluster(tmp_path_factory.mktemp("zk-shutdown"), f"{zookeeper.connect}/{unique('hw')}", IDS,
                         SESSION_TIMEOUT_MS, *OVERRIDES) as brokers:
        yield Cluster3(brokers)


def _shutdown(broker: BrokerProcess, broker_id: int, broker_epoch: int) -> Any:
    return request(broker.port, ControlledShutdownRequest[3](broker_id=broker_id, broker_epoch=broker_epoch),
                   ControlledShutdownResponse)


class GroupReader(threading.Thread):
    """A librdkafka consumer in a group, reading the topic's numbers until ``stop`` (committing as it goes)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.read: set[int] = set()
        self.errors: list[str] = []  # what the consumer reported (it carries on by itself)
        self.stop = threading.Event()

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": unique("readers"),
                             "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
        consumer.subscribe([self.topic])
        try:
            while not self.stop.is_set():
                for msg in consumer.consume(num_messages=500, timeout=0.2):
                    if msg.error() is None:
                        self.read.add(int(msg.value() or b""))
                    else:
                        self.errors.append(str(msg.error()))
        finally:
            consumer.close()


def test_controlled_shutdown_refusals(cluster: Cluster3) -> None:
    controller = cluster.controller()
    other = next(i for i in sorted(IDS) if i != controller)
    assert _shutdown(cluster.brokers[other], other, -1).error_code == ErrorCode.NOT_CONTROLLER
    stale = _shutdown(cluster.brokers[controller], other, 0)  # older than any registration's czxid
    assert (stale.error_code, stale.remaining_partitions) == (ErrorCode.STALE_BROKER_EPOCH, [])
    assert _shutdown(cluster.brokers[controller], 99, 1).error_code == ErrorCode.BROKER_NOT_AVAILABLE
    assert f"Shutting down broker {other}" not in cluster.brokers[controller].log_text()  # nothing moved


def test_rolling_restart_moves_leaders_before_each_broker_stops(cluster: Cluster3) -> None:
    topic = unique("rolling")
    every = cluster.every
    bootstrap = ",".join(b.bootstrap for b in every)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next(iter(admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=20).values())).result(30)

    def settled(v: dict) -> bool:  # every replica in sync, every partition led by its preferred replica
        return all(set(p[3]) == IDS and p[0] == p[2][0] for p in v.values())
    wait_until(lambda: agreed_topic(every, topic, settled), "the topic on every broker")
    controller = cluster.controller()
    writer, reader = NumberedProducer(bootstrap, topic, PARTITIONS), GroupReader(bootstrap, topic)
    writer.start()
    reader.start()
    moves: dict[int, float] = {}
    try:
        for broker_id in sorted(IDS, key=lambda i: i == controller):  # the controller last
            broker = cluster.brokers[broker_id]
            others = [b for b in every if b is not broker]
            view = wait_until(lambda: agreed_topic(every, topic, settled), "every replica in sync, preferred leaders",
                              timeout=20)
            assert any(p[0] == broker_id for p in view.values())  # it leads something to move
            began = time.monotonic()
            broker.terminate()
            wait_until(lambda o=others, b=broker_id: agreed_topic(  # type: ignore[misc]
                o, topic, lambda v: all(p[0] not in (-1, b) and b not in p[3] for p in v.values())),
                f"broker {broker_id}'s leaderships moved", timeout=SESSION_TIMEOUT_MS / 1000, interval=0.02)
            moves[broker_id] = time.monotonic() - began
            assert broker.stop() == 0
            log = broker.log_text(since_start=True)
            assert "Controlled shutdown request returned successfully" in log, log[-3000:]
            broker.start()
    finally:
        writer.finish()
    acknowledged = {n for acked in writer.acked.values() for n in acked}

    def unread() -> str:  # (on failure: whether the records are in the log, and what the consumer reported)
        missing = sorted(acknowledged - reader.read)
        logged = {n for numbers in read_numbers(bootstrap, topic, PARTITIONS).values() for n in numbers}
        return (f"{len(missing)} not read, e.g. {missing[:5]}; {len(set(missing) - logged)} of them not in the log; "
                f"the consumer's errors: {reader.errors[-5:]}")
    wait_until(lambda: reader.read >= acknowledged, "the group read every acknowledged record", timeout=30,
               seen=unread)
    reader.stop.set()
    reader.join(10)
    assert not writer.failed, writer.failed[:5]
    assert all(len(acked) > 100 for acked in writer.acked.values())
    # each broker's leaderships moved before it stopped, by the controller of the moment
    for broker_id in IDS:
        assert any(f"Shutting down broker {broker_id}" in b.log_text() for b in every)
    # far below the session timeout a SIGKILLed leader's partitions wait for (test_zk_topics: 4.2-4.4 s)
    assert max(moves.values()) < SESSION_TIMEOUT_MS / 1000 * 0.75, moves  # (typically 0.03-0.2 s)
    times = sorted(t for at in writer.acked_at.values() for t in at)
    pause = max(b - a for a, b in zip(times, times[1:], strict=False))
    print(f"leaderships moved after SIGTERM in {', '.join(f'{m * 1000:.0f} ms' for m in moves.values())}; "
          f"the longest pause between acknowledgements {pause * 1000:.0f} ms")
