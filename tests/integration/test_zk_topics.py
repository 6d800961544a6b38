"""Topics of a broker cluster on a real ZooKeeper (Debian's package) with three real brokers: created with
a replication factor by confluent-kafka's AdminClient, in Kafka's ZooKeeper layout; every broker's Metadata
answers the same leaders, replicas and ISRs; a SIGKILLed leader's partitions get a new leader from the ISR
within the session timeout with a higher leader epoch; partitions added and the topic deleted cluster-wide;
a librdkafka producer's records over partitions led by all three brokers all read back; a returning broker
catches up, rejoins the ISRs and leads its preferred partitions again (tests/integration/test_zk_failover.py:
records acknowledged with acks=all through leader kills)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse
from kazoo.client import KazooClient
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn
from support.zkcluster import PartitionView, agreed_controller, agreed_topic, cluster_broker, topic_view

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.replication.state import PartitionState
from headwater.broker.server.broker_server import BrokerServer
from headwater.broker.topics.topic import Partition
from headwater.kafka.errors import ErrorCode
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}


class Cluster3:
    def __init__(self, base: Path, zookeeper: zkserver.ZooKeeperServer) -> None:
        self.chroot = "/" + unique("hw")
        self.brokers = {i: cluster_broker(base, zookeeper.connect + self.chroot, i, SESSION_TIMEOUT_MS) for i in IDS}
        self.zk = KazooClient(hosts=zookeeper.connect)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.running)

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.running]

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def znode(self, path: str) -> dict:
        return json.loads(self.zk.get(self.chroot + path)[0])

    def agreed(self, topic: str, wanted=bool, timeout: float = 20) -> dict[int, PartitionView]:
        brokers = self.live()
        return wait_until(lambda: agreed_topic(brokers, topic, wanted), f"every broker's Metadata of {topic}",
                          timeout=timeout, seen=lambda: {b.port: topic_view(b, topic) for b in brokers})


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Cluster3]:
    c = Cluster3(tmp_path_factory.mktemp("zk-topics"), zookeeper)
    c.zk.start(timeout=15)
    try:
        for b in c.brokers.values():
            b.start()
        every = list(c.brokers.values())
        wait_until(lambda: agreed_controller(every, IDS), "three brokers and a controller", timeout=20)
        yield c
    finally:
        for b in c.brokers.values():
            b.kill()
        c.zk.stop()
        c.zk.close()


def _create(admin: AdminClient, topic: NewTopic) -> None:
    next(iter(admin.create_topics([topic], operation_timeout=20).values())).result(30)


def test_replicated_topic_in_kafka_layout_partitions_added_and_deleted(cluster: Cluster3) -> None:
    topic = unique("rf3")
    admin = cluster.admin()
    _create(admin, NewTopic(topic, 3, 3, config={"retention.ms": "3600000"}))
    view = cluster.agreed(topic, lambda v: len(v) == 3 and all(p[0] >= 0 for p in v.values()))
    assert {p[0] for p in view.values()} == IDS  # round-robin: each broker leads one partition
    for leader, epoch, replicas, isr in view.values():
        assert sorted(replicas) == sorted(IDS) and leader == replicas[0] and set(isr) == IDS and epoch == 0

    # Kafka's ZooKeeper layout
    data = cluster.znode(f"/brokers/topics/{topic}")
    assert data["version"] == 3 and data["adding_replicas"] == {} and data["removing_replicas"] == {}
    assert {int(p): tuple(r) for p, r in data["partitions"].items()} == {p: v[2] for p, v in view.items()}
    assert cluster.znode(f"/config/topics/{topic}") == {"version": 1, "config": {"retention.ms": "3600000"}}
    state = cluster.znode(f"/brokers/topics/{topic}/partitions/0/state")
    assert state["version"] == 1 and state["leader"] == view[0][0] and state["leader_epoch"] == 0
    assert state["controller_epoch"] >= 1 and set(state["isr"]) == IDS
    for b in cluster.brokers.values():  # every broker is a replica of all three
        assert all((b.log_dir / f"{topic}-{p}").is_dir() for p in range(3))

    # more replicas than live brokers: refused with Kafka's words
    refused = next(iter(admin.create_topics([NewTopic(unique("rf4"), 1, 4)], operation_timeout=10).values()))
    error = refused.exception(30)
    assert error is not None and error.args[0].code() == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "Replication factor: 4 larger than available brokers: 3." in str(error)

    # partitions added: RF 2 kept, spread as the topic's first ones
    grown = unique("grow")
    _create(admin, NewTopic(grown, 2, 2))
    next(iter(admin.create_partitions([NewPartitions(grown, 5)], operation_timeout=20).values())).result(30)
    view = cluster.agreed(grown, lambda v: len(v) == 5 and all(p[0] >= 0 for p in v.values()))
    assert all(len(set(p[2])) == 2 and p[0] == p[2][0] for p in view.values())
    assert {p[0] for p in view.values()} == IDS
    # (broker, partition) replicas that exist as directories
    on_disk = {(i, p) for i, b in cluster.brokers.items() for p in range(5) if (b.log_dir / f"{grown}-{p}").is_dir()}
    assert on_disk == {(r, p) for p, v in view.items() for r in v[2]}  # logs of its replicas only

    # deleted: znodes and every broker's logs go
    next(iter(admin.delete_topics([grown], operation_timeout=20).values())).result(30)
    assert cluster.zk.exists(f"{cluster.chroot}/brokers/topics/{grown}") is None
    assert cluster.zk.exists(f"{cluster.chroot}/admin/delete_topics/{grown}") is None
    assert cluster.zk.exists(f"{cluster.chroot}/config/topics/{grown}") is None
    wait_until(lambda: not any((b.log_dir / f"{grown}-{p}").exists() for b in cluster.brokers.values()
                               for p in range(5)), "the deleted topic's logs gone from every broker")
    wait_until(lambda: all(grown not in AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=5).topics
                           for b in cluster.live()), "the deleted topic gone from every broker's Metadata")


def test_librdkafka_producer_over_partitions_led_by_three_brokers(cluster: Cluster3) -> None:
    topic = unique("rf1")
    _create(cluster.admin(), NewTopic(topic, 6, 1))
    view = cluster.agreed(topic, lambda v: len(v) == 6 and all(p[0] >= 0 for p in v.values()))
    assert {p[0] for p in view.values()} == IDS
    count = 3000
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1, "linger.ms": 5})
    failed: list[str] = []

    def delivered(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))
    for i in range(count):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode(), on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0 and not failed
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("g"), "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(6)])
    seen: dict[int, set[bytes]] = {}
    deadline = time.monotonic() + 30
    try:
        while sum(len(v) for v in seen.values()) < count and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                partition, value = msg.partition(), msg.value()
                assert partition is not None and value is not None
                seen.setdefault(partition, set()).add(value)
    finally:
        consumer.close()
    assert set().union(*seen.values()) == {f"v{i}".encode() for i in range(count)}
    assert sorted(seen) == list(range(6))  # every partition, so every broker, took records


def test_topic_deleted_and_made_again_at_once_starts_empty(cluster: Cluster3) -> None:
    topic = unique("redo")
    admin = cluster.admin()
    _create(admin, NewTopic(topic, 1, 3))
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1})
    producer.produce(topic, b"old")
    assert producer.flush(20) == 0
    next(iter(admin.delete_topics([topic], operation_timeout=20).values())).result(30)
    _create(admin, NewTopic(topic, 1, 3))
    cluster.agreed(topic, lambda v: v[0][0] >= 0 and len(v[0][3]) == 3)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        consumer.close()


def test_topic_made_again_while_a_replica_was_away_starts_empty_there(cluster: Cluster3) -> None:
    """A topic deleted while its replica's broker was down, then made again (here by a tool writing Kafka's
    older topic JSON, without an id): the returning broker removes the old directory, never serving its
    records as the new topic's (Kafka's partition.metadata names the topic id a directory belongs to)."""
    topic = unique("again")
    broker = cluster.brokers[3]
    _create(cluster.admin(), NewTopic(topic, 1, replica_assignment=[[3]]))
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1})
    producer.produce(topic, b"old")
    assert producer.flush(20) == 0
    assert "topic_id: " in (broker.log_dir / f"{topic}-0" / "partition.metadata").read_text()
    broker.stop()
    admin = cluster.admin()
    next(iter(admin.delete_topics([topic], operation_timeout=20).values())).result(30)
    cluster.zk.create(f"{cluster.chroot}/brokers/topics/{topic}", json.dumps(
        {"version": 2, "partitions": {"0": [3]}, "adding_replicas": {}, "removing_replicas": {}}).encode())
    broker.start()
    cluster.agreed(topic, lambda v: v[0][0] == 3)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("g")})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 0)
    finally:
        consumer.close()
    assert f"{topic}-0 was left by an earlier topic named {topic}" in broker.log_text(since_start=True)


def test_killed_leader_replaced_from_the_isr_and_preferred_leader_back(cluster: Cluster3) -> None:
    """SIGKILL a leader: the first live ISR replica leads (epoch + 1), the dead broker leaves every ISR; back,
    it catches up, its leaders write it into their ISRs and the controller makes it preferred leader again.
    (Which replica an election picks with and without unclean.leader.election.enable is
    tests/unit/test_cluster_election.py's.)"""
    topic = unique("failover")
    admin = cluster.admin()
    _create(admin, NewTopic(topic, 3, 3))
    before = cluster.agreed(topic, lambda v: len(v) == 3 and all(p[0] >= 0 for p in v.values()))
    victim = before[0][0]
    killed = cluster.brokers[victim]
    started = time.monotonic()
    killed.kill()

    def moved(v: dict[int, PartitionView]) -> bool:
        return all(p[0] >= 0 and p[0] != victim and victim not in p[3] for p in v.values())
    after = cluster.agreed(topic, moved, timeout=SESSION_TIMEOUT_MS / 1000 + 20)
    took = time.monotonic() - started
    print(f"leader failover after SIGKILL: {took:.1f} s (session timeout {SESSION_TIMEOUT_MS} ms)")
    assert took < SESSION_TIMEOUT_MS / 1000 + 10
    for p, (leader, epoch, replicas, isr) in after.items():
        assert replicas == before[p][2]
        assert set(isr) == IDS - {victim} and leader in before[p][3]  # from the ISR
        assert epoch == before[p][1] + 1  # one change each: a new leader, or the ISR without the dead follower
    assert after[0][0] == next(r for r in before[0][2] if r != victim)  # the first live ISR replica in order

    # the broker comes back: it fetches from the leaders, which take it into their ISRs, and the controller
    # makes the preferred replica (the victim, first in partition 0's assignment) leader again
    killed.start()
    every = list(cluster.brokers.values())
    wait_until(lambda: agreed_controller(every, IDS), "the restarted broker back in every Metadata", timeout=20)
    final = cluster.agreed(topic, lambda v: v[0][0] == victim and all(set(p[3]) == IDS for p in v.values()),
                           timeout=30)
    assert final[0][1] == after[0][1] + 1  # one leader change: back to the preferred replica
    assert all(final[p][2] == before[p][2] for p in final)


def test_broker_cut_off_past_its_session_follows_the_cluster_when_back(cluster: Cluster3) -> None:
    """SIGSTOP (a broker cut off): its leaderships move when its session expires; back (SIGCONT), with a new
    session, it reads the partition states again and answers the cluster's leaders, not its stale own."""
    topic = unique("cut")
    _create(cluster.admin(), NewTopic(topic, 3, 3))
    before = cluster.agreed(topic, lambda v: len(v) == 3 and all(p[0] >= 0 for p in v.values()))
    victim = before[1][0]
    stopped = cluster.brokers[victim]
    assert stopped.proc is not None
    stopped.proc.send_signal(signal.SIGSTOP)
    try:
        others = [b for b in cluster.brokers.values() if b is not stopped]
        wait_until(lambda: agreed_topic(others, topic, lambda v: v[1][0] not in (-1, victim)),
                   "partition 1's leadership moved", timeout=SESSION_TIMEOUT_MS / 1000 + 20)
    finally:
        stopped.proc.send_signal(signal.SIGCONT)
    every = list(cluster.brokers.values())
    wait_until(lambda: agreed_controller(every, IDS), "the cut-off broker registered again", timeout=30)
    # every broker, the returned one too, answers a later leader epoch than before the cut (the returned broker
    # may already lead again: the preferred replica leads once back in the ISR)
    cluster.agreed(topic, lambda v: v[1][1] > before[1][1])


class _Recorder:
    """A stand-in for the replication code's hook: what apply() was handed, in order."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, int, PartitionState, PartitionState | None]] = []

    async def apply(self, partition: Partition, state: PartitionState) -> None:
        self.applied.append((partition.log.directory.name, partition.index, state, partition.state))


def test_replication_hook_and_isr_writer_in_process(tmp_path: Path, zookeeper: zkserver.ZooKeeperServer) -> None:
    """One in-process broker: every state of its replicas reaches ``cluster.replication.apply`` (with
    Partition.state set), the ZooKeeper IsrWriter writes only over the version it read, and a deleted
    topic's replicas are stopped (no replicas in the state handed over) before their logs go."""
    loop = asyncio.new_event_loop()
    recorder = _Recorder()
    started: Future[BrokerServer] = Future()
    stop = asyncio.Event()

    async def main() -> None:
        server = BrokerServer(BrokerConfig.model_validate({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(tmp_path / "data"), "broker.id": 9,
            "zookeeper.connect": zookeeper.connect + "/" + unique("hw"),
            "zookeeper.session.timeout.ms": SESSION_TIMEOUT_MS}))
        server.cluster.replication = recorder  # type: ignore[assignment]  # records apply() calls only
        try:
            await server.start()
        except BaseException as exc:
            started.set_exception(exc)
            raise
        started.set_result(server)
        await stop.wait()
        await server.stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    server = started.result(60)

    def run(coro):  # in the broker's loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result(20)
    try:
        bootstrap = f"127.0.0.1:{server.bound[0].port}"
        topic = unique("hook")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        _create(admin, NewTopic(topic, 2, 1))
        wait_until(lambda: {i for _, i, _, _ in recorder.applied} == {0, 1}, "both replicas handed over")
        for name, index, state, set_before in recorder.applied:
            assert name == f"{topic}-{index}" and state.leader == 9 and state.isr == (9,) and state.replicas == (9,)
            assert set_before == state  # Partition.state is set before apply is called
        membership = server.cluster.membership
        assert membership is not None and membership.isr_writer is not None
        held = server.cluster.partition(topic, 0).state
        assert held is not None and held.zk_version == 0
        written = run(membership.isr_writer.write_isr(topic, 0, held, (9,)))
        assert written is not None and written.zk_version == 1 and written.leader_epoch == held.leader_epoch
        assert run(membership.isr_writer.write_isr(topic, 0, held, (9,))) is None  # stale: refused
        wait_until(lambda: server.cluster.partition(topic, 0).state == written, "the written state held")
        # the controller's write over a state changed meanwhile is skipped, and the controller stays active
        controller = membership.controller
        assert controller is not None and controller.active
        stale = dataclasses.replace(held, leader_epoch=held.leader_epoch + 1)
        assert run(asyncio.to_thread(controller._write_states, [(topic, 0, stale, False)])) == []
        assert controller.active and server.cluster.partition(topic, 0).state == written

        next(iter(admin.delete_topics([topic], operation_timeout=20).values())).result(30)
        wait_until(lambda: not (tmp_path / "data" / f"{topic}-0").exists(), "the deleted topic's log removed")
        stops = [s for _, _, s, _ in recorder.applied if s.replicas == ()]
        assert len(stops) == 2 and all(s.leader == -1 for s in stops)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)


def test_idempotent_producers_get_producer_ids_unique_in_the_cluster(cluster: Cluster3) -> None:
    """Producer ids are the cluster's (blocks reserved in ZooKeeper's /latest_producer_id_block, as Kafka's
    ZooKeeper mode does), not each broker's own: two producers given the same id by two brokers would share
    one sequence per partition, so the second one's batches would be refused as out of order or, worse,
    acknowledged as duplicates of the first one's and never written."""
    ids = []
    for broker in cluster.live():
        with Conn(broker.port) as conn:
            for _ in range(2):
                answer = conn.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                            producer_id=-1, producer_epoch=-1), InitProducerIdResponse)
                assert answer.error_code == 0
                ids.append(answer.producer_id)
    assert len(set(ids)) == len(ids), f"producer ids given by brokers {[b.port for b in cluster.live()]}: {ids}"
    block = cluster.znode("/latest_producer_id_block")
    assert block["version"] == 1 and int(block["block_end"]) >= max(ids), block
