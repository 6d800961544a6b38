"""Replication between three real brokers registered in a real ZooKeeper (tests/support/zkserver.py), run on one
event loop in this process: partitions created on each broker through its Cluster, roles handed to each
broker's ReplicaManager by the test as the controller would hand them (``apply``), ISR changes written to an
in-memory IsrWriter. Clients are real: librdkafka producing with acks=all, kafka-python's protocol classes
for the exact error codes; the logs are compared byte for byte."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer
from kafka.protocol.consumer import FetchResponse, ListOffsetsResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from support import zkserver
from support.rawkafka import fetch_records, fetch_req, list_offsets_req, produce, request

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.replication.checkpoint import HIGH_WATERMARK_FILE, read_checkpoint
from headwater.broker.replication.replica import PartitionReplica
from headwater.broker.replication.state import PartitionState
from headwater.broker.server.broker_server import BrokerServer
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import Record, build_batch, iter_batches
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

T = TypeVar("T")
TOPIC = "replicated"
LAG_MS = 1500  # replica.lag.time.max.ms: short, so the ISR shrinks within the test


class MemoryIsrWriter:
    """The ZooKeeper-backed writer's contract (conditional on the version) over a dict; ``refuse`` makes every
    write lose, as when the controller changed the state first."""

    def __init__(self) -> None:
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.refuse = False

    async def write_isr(self, topic: str, index: int, state: PartitionState,
                        isr: tuple[int, ...]) -> PartitionState | None:
        stored = self.states[(topic, index)]
        if self.refuse or stored.zk_version != state.zk_version:
            return None
        written = dataclasses.replace(stored, isr=isr, zk_version=stored.zk_version + 1)
        self.states[(topic, index)] = written
        return written


class Brokers:
    """Brokers 1..3 on one event loop in a thread of their own."""

    def __init__(self, base: Path, connect: str) -> None:
        self.base, self.connect = base, connect
        self.writer = MemoryIsrWriter()
        self.servers: dict[int, BrokerServer] = {}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, fn: Callable[[], Any], timeout: float = 60) -> Any:
        """``fn()`` on the brokers' loop (awaited when it returns an awaitable); its result."""
        async def call() -> Any:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(timeout)

    def start(self, broker_id: int) -> BrokerServer:
        server = BrokerServer(BrokerConfig.model_validate({
            "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.base / f"b{broker_id}"),
            "broker.id": broker_id, "zookeeper.connect": self.connect, "zookeeper.session.timeout.ms": 6000,
            "replica.lag.time.max.ms": LAG_MS, "replica.fetch.wait.max.ms": 200, "replica.fetch.backoff.ms": 200,
            "replica.high.watermark.checkpoint.interval.ms": 300}))
        self.run(server.start)
        assert server.cluster.replication is not None
        server.cluster.replication.isr_writer = self.writer
        self.servers[broker_id] = server
        return server

    def stop(self, broker_id: int) -> None:
        self.run(self.servers.pop(broker_id).stop)

    def create(self, broker_id: int, overrides: dict[str, str]) -> None:
        """The topic's partition on one broker, through its own Cluster (not ZooKeeper's topics: the test hands
        the roles itself)."""
        cluster = self.servers[broker_id].cluster
        self.run(lambda: cluster.create_topic(TOPIC, 1, overrides=overrides))

    def apply(self, state: PartitionState, *broker_ids: int) -> list[int]:
        """``state`` handed to each broker; each one's high watermark right after (before any fetch)."""
        self.writer.states[(TOPIC, 0)] = state

        async def apply(b: int) -> int:
            cluster = self.servers[b].cluster
            assert cluster.replication is not None
            partition = cluster.partition(TOPIC, 0)
            await cluster.replication.apply(partition, state)
            return int(partition.replica.high_watermark)
        return [self.run(functools.partial(apply, b)) for b in broker_ids]

    def port(self, broker_id: int) -> int:
        return self.servers[broker_id].bound[0].port

    def replica(self, broker_id: int) -> PartitionReplica:
        return self.servers[broker_id].cluster.partition(TOPIC, 0).replica

    def log_bytes(self, broker_id: int) -> bytes:
        return (self.base / f"b{broker_id}" / f"{TOPIC}-0" / f"{0:020d}.log").read_bytes()

    def end(self, broker_id: int) -> int:
        return self.servers[broker_id].cluster.partition(TOPIC, 0).log.log_end_offset

    def close(self) -> None:
        for b in list(self.servers):
            self.stop(b)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def brokers(tmp_path: Path, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Brokers]:
    b = Brokers(tmp_path, zookeeper.connect + "/" + unique("hw"))
    try:
        yield b
    finally:
        b.close()


def _batch(values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, now, b"k", v) for i, v in enumerate(values)])


def _produce_all(port: int, values: list[bytes], **extra: Any) -> list[str | None]:
    """librdkafka with acks=all: each record's delivery error (None when acknowledged)."""
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "acks": "all", "linger.ms": 5,
                         "request.timeout.ms": 20000, "message.timeout.ms": 30000, **extra})
    errors: list[str | None] = []
    for v in values:
        producer.produce(TOPIC, v, partition=0,
                         on_delivery=lambda err, msg: errors.append(None if err is None else str(err)))
    assert producer.flush(40) == 0, "records still undelivered"
    return errors


def _raw_acks_all(port: int, values: list[bytes], timeout_ms: int) -> Any:
    T_ = ProduceRequest.TopicProduceData
    req = ProduceRequest[8](acks=-1, timeout_ms=timeout_ms, topic_data=[
        T_(name=TOPIC, partition_data=[T_.PartitionProduceData(index=0, records=_batch(values))])])
    return request(port, req, ProduceResponse).responses[0].partition_responses[0]


def _latest(port: int) -> Any:
    return request(port, list_offsets_req(TOPIC), ListOffsetsResponse).topics[0].partitions[0]


def test_acks_all_isr_and_high_watermark_across_three_brokers(brokers: Brokers) -> None:
    for b in (1, 2, 3):
        brokers.start(b)
        brokers.create(b, {"min.insync.replicas": "2"})
    # Broker 3 holds a record the leader never had (written under an older epoch, 0): as a follower it must
    # cut its log back to where it agrees with the leader before fetching.
    stray = _batch([b"never committed"])
    plog3 = brokers.servers[3].cluster.partition(TOPIC, 0).log
    brokers.run(lambda: plog3.append(bytearray(stray), next(iter_batches(stray))[1], 0))
    assert brokers.end(3) == 1

    state = PartitionState(leader=1, leader_epoch=1, isr=(1, 2, 3), controller_epoch=1, replicas=(1, 2, 3),
                           zk_version=0)
    brokers.apply(state, 1, 2, 3)

    # acks=all through librdkafka: acknowledged once all three have the records
    values = [f"v{i}".encode() for i in range(50)]
    assert _produce_all(brokers.port(1), values) == [None] * 50
    assert brokers.replica(1).high_watermark >= 50
    wait_until(lambda: all(brokers.replica(b).high_watermark == brokers.end(b) == 50 for b in (1, 2, 3)),
               "every replica at the leader's high watermark", timeout=20,
               seen=lambda: {b: (brokers.end(b), brokers.replica(b).high_watermark) for b in (1, 2, 3)})
    leader_log = brokers.log_bytes(1)
    assert brokers.log_bytes(2) == leader_log and brokers.log_bytes(3) == leader_log  # the stray record is gone
    assert {h.partition_leader_epoch for _, h in iter_batches(leader_log)} == {1}
    stats = brokers.servers[1].cluster.topics[TOPIC].stats
    assert stats.bytes_out == 0  # the followers' fetches are replication, not consumer traffic
    assert [r[2] for r in fetch_records(brokers.port(1), TOPIC)] == values
    assert stats.bytes_out >= len(leader_log)

    # Followers answer clients NOT_LEADER_OR_FOLLOWER: Produce, Fetch before v11, ListOffsets; a consumer's Fetch
    # v11+ a follower serves below its high watermark (KIP-392: fetching from the closest replica)
    assert produce(brokers.port(2), TOPIC, _batch([b"x"])).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = request(brokers.port(2), fetch_req(TOPIC, version=10), FetchResponse).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = request(brokers.port(2), fetch_req(TOPIC), FetchResponse).responses[0].partitions[0]
    assert (answer.error_code, answer.high_watermark) == (0, 50)
    assert _latest(brokers.port(3)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert brokers.end(2) == 50

    # A follower stops: after replica.lag.time.max.ms the leader drops it from the ISR, and acks=all answers
    brokers.stop(3)
    started = time.monotonic()
    assert _produce_all(brokers.port(1), [b"after 3 stopped"] * 5) == [None] * 5
    assert time.monotonic() - started >= LAG_MS / 1000 / 2  # held until the ISR lost broker 3
    assert brokers.writer.states[(TOPIC, 0)].isr == (1, 2)
    assert brokers.run(lambda: brokers.servers[1].cluster.partition(TOPIC, 0).state).isr == (1, 2)

    # The other follower stops too, and the ISR write loses (as when the controller moved first): the ISR stays
    # {1, 2}, so the high watermark stays, and consumers see nothing above it
    brokers.writer.refuse = True
    brokers.stop(2)
    hw = brokers.replica(1).high_watermark
    assert hw == 55
    assert produce(brokers.port(1), TOPIC, _batch([b"u1", b"u2", b"u3"])).error_code == 0
    assert brokers.end(1) == 58 and brokers.replica(1).high_watermark == hw
    assert (_latest(brokers.port(1)).offset, _latest(brokers.port(1)).leader_epoch) == (hw, 1)
    above = request(brokers.port(1), fetch_req(TOPIC, hw), FetchResponse).responses[0].partitions[0]
    assert (above.error_code, above.high_watermark, bytes(above.records or b"")) == (0, hw, b"")
    seen = fetch_records(brokers.port(1), TOPIC)
    assert [r[0] for r in seen] == list(range(hw))
    timed_out = _raw_acks_all(brokers.port(1), [b"t"], timeout_ms=500)  # appended; the ISR never gets it
    assert timed_out.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert brokers.end(1) == 59

    # The write goes through: the ISR is the leader alone, the high watermark its log end; min.insync.replicas=2
    # now refuses acks=all before appending anything
    brokers.writer.refuse = False
    wait_until(lambda: brokers.writer.states[(TOPIC, 0)].isr == (1,), "the ISR shrunk to the leader", timeout=20)
    wait_until(lambda: brokers.replica(1).high_watermark == 59, "the high watermark at the log end", timeout=10)
    refused = _raw_acks_all(brokers.port(1), [b"refused"], timeout_ms=5000)
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert brokers.end(1) == 59
    assert produce(brokers.port(1), TOPIC, _batch([b"acks=1 is fine"])).error_code == 0

    # The leader's log start moves past broker 2's end (DeleteRecords); broker 2 comes back with its high
    # watermark from its checkpoint, finds its log behind the leader's start, starts afresh there, catches up and
    # rejoins the ISR
    plog1 = brokers.servers[1].cluster.partition(TOPIC, 0).log
    brokers.run(lambda: plog1.delete_records_before(58))
    saved = read_checkpoint(brokers.base / "b2" / HIGH_WATERMARK_FILE)
    assert 50 <= saved[(TOPIC, 0)] <= 55
    brokers.start(2)
    assert brokers.apply(brokers.writer.states[(TOPIC, 0)], 2) == [saved[(TOPIC, 0)]]
    wait_until(lambda: brokers.writer.states[(TOPIC, 0)].isr == (1, 2), "broker 2 back in the ISR", timeout=20,
               seen=lambda: (brokers.end(2), brokers.writer.states[(TOPIC, 0)]))
    assert _produce_all(brokers.port(1), [b"both again"]) == [None]
    wait_until(lambda: brokers.end(2) == brokers.end(1) == 61, "broker 2 at the leader's end", timeout=20)
    plog2 = brokers.servers[2].cluster.partition(TOPIC, 0).log
    assert plog2.log_start_offset == 58
    assert brokers.run(lambda: plog2.read(58, 1 << 20)) == brokers.run(lambda: plog1.read(58, 1 << 20))

    # The topic deleted on broker 2: its replica is dropped and no longer fetched
    manager2 = brokers.servers[2].cluster.replication
    assert manager2 is not None
    brokers.run(lambda: brokers.servers[2].cluster.delete_topic(TOPIC))
    wait_until(lambda: (TOPIC, 0) not in manager2.replicas and not any(f.replicas for f in manager2.fetchers.values()),
               "the deleted partition's replica dropped", timeout=10)
