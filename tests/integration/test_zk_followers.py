"""Followers and coordinators on a real ZooKeeper with three real brokers.

- A compacted topic (replication factor 3) whose leader's cleaner has removed whole batches, so its log has
  offset gaps, and batches holding fewer records than offsets: a replica wiped while its broker was down
  catches up from offset 0, its batches equal to the leader's (offsets, CRCs), and it rejoins the ISR.
- A ``__consumer_offsets`` partition holding many commits: when its leader stops, the new leader loads the
  groups in the background and answers COORDINATOR_LOAD_IN_PROGRESS meanwhile (OffsetFetch), then the group's
  every committed offset.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn, request, simple_commit
from support.zkcluster import agreed_controller, agreed_topic, replica_batches, running_cluster, topic_view

from headwater.broker.group.store import offsets_partition
from headwater.kafka.records import iter_batches
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
OFFSETS_PARTITIONS = 50
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR = 14, 16
ROUNDS = 20  # batches of the compacted topic before its tail


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    with running_cluster(tmp_path_factory.mktemp("zk-followers"), f"{zookeeper.connect}/{unique('hw')}", IDS,
                         SESSION_TIMEOUT_MS, "log.cleaner.backoff.ms=200", "group.initial.rebalance.delay.ms=0",
                         "replica.lag.time.max.ms=3000") as started:
        yield started


def _all_up(brokers: dict[int, BrokerProcess]) -> None:
    """Every broker running and agreeing on the cluster (a test that stopped one starts it again)."""
    for b in brokers.values():
        if not b.running:
            b.start()
    wait_until(lambda: agreed_controller(list(brokers.values()), IDS), "three brokers and a controller", timeout=30)


def _record_counts(log_dir: Path, topic: str) -> list[tuple[int, int, int]]:
    """(base offset, last offset, record count) of every batch in a replica's segment files."""
    out: list[tuple[int, int, int]] = []
    for segment in sorted((log_dir / f"{topic}-0").glob("*.log")):
        out.extend((h.base_offset, h.last_offset, h.record_count) for _, h in iter_batches(segment.read_bytes()))
    return out


def test_a_wiped_replica_of_a_cleaned_compacted_log_catches_up_with_its_gaps(
        brokers: dict[int, BrokerProcess]) -> None:
    _all_up(brokers)
    topic = unique("compacted")
    every = list(brokers.values())
    bootstrap = ",".join(b.bootstrap for b in every)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
              "min.insync.replicas": "2"}
    next(iter(admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]], config=config)],
                                  operation_timeout=20).values())).result(30)
    wait_until(lambda: agreed_topic(every, topic, lambda v: v[0][0] == 1 and len(v[0][3]) == 3),
               "the topic led by broker 1 with its three replicas in sync")
    # one batch a flush: linger.ms is long, and a flush sends at once
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5000})
    # Each round one batch: every key updated again, so a round's batch goes whole once a later round is cleaned
    # (a gap), except that even rounds carry a key of their own, which stays (a batch of one record and many
    # offsets). The tail is larger than what a segment has left: it rolls one of its own, the only part of the
    # leader's log left uncleaned.
    for r in range(ROUNDS):
        keys = ([f"only-{r}"] if r % 2 == 0 else []) + [f"key-{k}" for k in range(20)]
        for key in keys:
            producer.produce(topic, f"{r}".encode() * 20, key=key.encode(), partition=0)
        assert producer.flush(30) == 0
    tail: list[int | None] = []
    producer.produce(topic, b"t" * 3500, key=b"tail", partition=0, on_delivery=lambda _, m: tail.append(m.offset()))
    assert producer.flush(30) == 0 and tail

    # The leader's cleaner passes (log.cleaner.backoff.ms) reach the tail: all before it is cleaned
    leader_dir = brokers[1].log_dir
    wait_until(lambda: f"cleaned {topic}-0 up to offset {tail[0]}:" in brokers[1].log_text(since_start=True),
               "the leader's log cleaned up to its tail", timeout=30)
    leader_batches = _record_counts(leader_dir, topic)
    assert len(leader_batches) == ROUNDS // 2 + 2  # the even rounds' (one record each), the last round's, the tail
    gaps = sum(1 for a, b in zip(leader_batches, leader_batches[1:], strict=False) if b[0] > a[1] + 1)
    fewer = sum(1 for base, last, count in leader_batches if count < last - base + 1)
    assert gaps == ROUNDS // 2 - 1 and fewer == ROUNDS // 2  # the case: gaps, and batches thinner than their range

    wiped = brokers[3]
    wiped.stop()
    shutil.rmtree(wiped.log_dir / f"{topic}-0")
    wiped.start()
    end = leader_batches[-1][1] + 1

    def caught_up() -> bool:
        try:
            return replica_batches(wiped.log_dir, topic, 0, end) == replica_batches(leader_dir, topic, 0, end)
        except FileNotFoundError:
            return False
    wait_until(caught_up, "the wiped replica holding the leader's batches", timeout=30)
    wait_until(lambda: agreed_topic(every, topic, lambda v: set(v[0][3]) == IDS), "the wiped replica back in the ISR",
               timeout=30)
    assert replica_batches(wiped.log_dir, topic, 0, end)[0][0] == leader_batches[0][0]
    assert "overlaps this log's end" not in wiped.log_text(since_start=True)


def _offset_fetch(conn: Conn, group: str) -> Any:
    return conn.call(OffsetFetchRequest[5](group_id=group, topics=None), OffsetFetchResponse)


class _Prober(threading.Thread):
    """OffsetFetch for ``group`` on one broker again and again, each answer's error code noted (in order, a
    change at a time); the last answer kept."""

    def __init__(self, broker: BrokerProcess, group: str) -> None:
        super().__init__(daemon=True)
        self.broker, self.group = broker, group
        self.codes: list[int] = []
        self.last: Any = None
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with Conn(self.broker.port, timeout=10) as conn:
                    while not self.stop.is_set():
                        answer = _offset_fetch(conn, self.group)
                        if not self.codes or self.codes[-1] != answer.error_code:
                            self.codes.append(answer.error_code)
                        self.last = answer
            except (OSError, AssertionError):  # a broker stopping or starting: connect again
                self.stop.wait(0.05)


def test_a_new_coordinator_answers_load_in_progress_while_it_loads_many_commits(
        brokers: dict[int, BrokerProcess]) -> None:
    _all_up(brokers)
    every = list(brokers.values())
    bootstrap = ",".join(b.bootstrap for b in every)
    topic, group = unique("wide"), unique("loaded")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next(iter(admin.create_topics([NewTopic(topic, 100, 1)], operation_timeout=20).values())).result(30)
    wait_until(lambda: agreed_topic(every, topic, lambda v: len(v) == 100), "the topic on every broker")

    def coordinator() -> int | None:
        answer = request(brokers[1].port, FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse)
        return None if answer.error_code else int(answer.node_id)
    first = wait_until(coordinator, "the group's coordinator", timeout=30)
    offsets_view = wait_until(lambda: agreed_topic(every, "__consumer_offsets",
                                                   lambda v: len(v) == OFFSETS_PARTITIONS
                                                   and all(set(p[3]) == IDS for p in v.values())),
                              "__consumer_offsets in sync on every broker")
    partition = offsets_partition(group, OFFSETS_PARTITIONS)
    assert offsets_view[partition][0] == first
    # 10,000 commits in the group's partition: 100 rounds over the topic's 100 partitions
    with Conn(brokers[first].port) as conn:
        for r in range(100):
            simple_commit(conn, group, topic, {p: r * 1000 + p for p in range(100)})
        assert {p.partition_index: p.committed_offset for t in _offset_fetch(conn, group).topics
                for p in t.partitions} == {p: 99_000 + p for p in range(100)}

    others = {i: b for i, b in brokers.items() if i != first}
    probers = [_Prober(b, group) for b in others.values()]
    for p in probers:
        p.start()
    try:
        wait_until(lambda: all(p.codes == [NOT_COORDINATOR] for p in probers), "both others answering")
        brokers[first].stop()  # a clean stop: its leaderships move at once
        new = wait_until(lambda: (v := topic_view(next(iter(others.values())), "__consumer_offsets")) is not None
                         and v[partition][0] in others and v[partition][0], "the partition's new leader", timeout=30)
        prober = probers[list(others).index(new)]
        wait_until(lambda: prober.codes[-1] == 0, "the new coordinator answering", timeout=30)
    finally:
        for p in probers:
            p.stop.set()
            p.join(15)
    assert prober.codes == [NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, 0]
    assert prober.last is not None
    assert {p.partition_index: p.committed_offset for t in prober.last.topics
            for p in t.partitions} == {p: 99_000 + p for p in range(100)}
    assert "(1 loaded in" in brokers[new].log_text(since_start=True)
    brokers[first].start()
    wait_until(lambda: agreed_controller(every, IDS), "three brokers and a controller", timeout=30)
