"""Rack awareness on a real ZooKeeper with three real brokers in racks a, b and c (``broker.rack``), as Kafka:

- replicas are assigned rack-aware (AdminUtils.assignReplicasToBrokersRackAware) by CreateTopics and
  CreatePartitions, and a cluster where some live brokers have a rack and some none refuses to assign them;
- with ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector`` a librdkafka consumer
  with ``client.rack=c`` is sent by each leader (``preferred_read_replica``) to the rack-c broker, which serves it
  every record (its bytes out, and none from the leaders); followers answer a consumer's Fetch v11 with Kafka's
  errors; when the rack-c broker is SIGKILLed the consumer carries on from the leaders.

The tests share one cluster and run in file order: the last one kills broker 3.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.protocol.admin import CreateTopicsResponse
from kafka.protocol.consumer import FetchResponse
from kazoo.client import KazooClient
from support import zkserver
from support.brokermetrics import metrics_url, scrape, value
from support.brokerproc import BrokerProcess
from support.rawkafka import Conn, create_topic_req, fetch_req, request
from support.rawtxn import write_markers
from support.zkcluster import PartitionView, agreed_topic, metadata_view, running_cluster, topic_view

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import ATTR_TRANSACTIONAL, Record, build_batch, iter_batches
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
RACKS = {1: "a", 2: "b", 3: "c"}
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


class Racks3:
    def __init__(self, brokers: dict[int, BrokerProcess], zk: KazooClient) -> None:
        self.brokers, self.zk = brokers, zk
        self.bootstrap = ",".join(b.bootstrap for b in brokers.values())
        self.metrics = {i: metrics_url(b) for i, b in brokers.items()}

    def live(self) -> list[BrokerProcess]:
        return [b for b in self.brokers.values() if b.running]

    def topic(self, name: str, wanted: Any = bool) -> dict[int, PartitionView]:
        every = self.live()
        return wait_until(lambda: agreed_topic(every, name, wanted), f"every broker's Metadata of {name}",
                          timeout=15, seen=lambda: {b.port: topic_view(b, name) for b in every})

    def bytes_out(self, broker: int, topic: str) -> float:
        return value(scrape(self.metrics[broker]), BYTES_OUT, topic=topic)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Racks3]:
    connect = zookeeper.connect + "/" + unique("hw")
    with running_cluster(tmp_path_factory.mktemp("zk-racks"), connect, IDS, SESSION_TIMEOUT_MS,
                         f"replica.selector.class={SELECTOR}", "metrics.listener=http://127.0.0.1:0",
                         "offsets.topic.num.partitions=1", "replica.fetch.wait.max.ms=100",
                         each=lambda i: (f"broker.rack={RACKS[i]}",)) as brokers:
        zk = KazooClient(hosts=connect)  # the cluster's chroot exists now
        zk.start(timeout=15)
        try:
            yield Racks3(brokers, zk)
        finally:
            zk.stop()
            zk.close()


def _racks_of(view: dict[int, PartitionView]) -> list[list[str]]:
    return [[RACKS[b] for b in replicas] for _, _, replicas, _ in view.values()]


def test_replicas_spread_over_the_racks(cluster: Racks3) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    nodes = admin.describe_cluster().result(10).nodes  # every broker answers its rack
    assert {n.id: n.rack for n in nodes} == RACKS
    for future in admin.create_topics([NewTopic("spread", 6, 3), NewTopic("pairs", 6, 2)]).values():
        future.result(15)
    spread = cluster.topic("spread", lambda v: len(v) == 6)
    assert all(sorted(racks) == ["a", "b", "c"] for racks in _racks_of(spread)), spread
    assert sorted(leader for leader, _, _, _ in spread.values()) == [1, 1, 2, 2, 3, 3]  # leaders spread too
    admin.create_partitions([NewPartitions("pairs", 9)])["pairs"].result(15)
    pairs = cluster.topic("pairs", lambda v: len(v) == 9)
    assert all(len(set(racks)) == 2 for racks in _racks_of(pairs)), pairs  # the added ones as well

    # a broker without broker.rack joins (its registration, as Kafka's, written here): assignments are refused
    cluster.zk.create("/brokers/ids/4", json.dumps({
        "version": 4, "host": "127.0.0.1", "port": 9, "endpoints": ["PLAINTEXT://127.0.0.1:9"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"}, "jmx_port": -1,
        "timestamp": str(int(time.time() * 1000))}).encode(), ephemeral=True)
    first = cluster.brokers[1]
    try:
        wait_until(lambda: (metadata_view(first) or (set(), -1))[0] == {1, 2, 3, 4}, "broker 4 seen", timeout=10)
        answer = request(first.port, create_topic_req("mixed", 2), CreateTopicsResponse)
        result = answer.topics[0]
        assert result.error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # Kafka's AdminOperationException
        assert result.error_message.startswith(
            "Not all brokers have rack information for replica rack aware assignment."), result.error_message
        assert "Brokers without broker.rack: [4]" in result.error_message
    finally:
        cluster.zk.delete("/brokers/ids/4")
    wait_until(lambda: all((metadata_view(b) or (set(), -1))[0] == IDS for b in cluster.live()), "broker 4 gone",
               timeout=10)
    assert topic_view(first, "mixed") is None  # nothing was made


def _fetch(broker: BrokerProcess, topic: str, partition: int, version: int = 11, offset: int = 0, rack_id: str = "",
           current_leader_epoch: int = -1, isolation_level: int = 0) -> Any:
    """A consumer's Fetch of one partition from ``broker`` (v11: naming its rack and the leader epoch it knows)."""
    req = fetch_req(topic, offset, partition, version=version, isolation_level=isolation_level)
    if version >= 11:
        req.rack_id = rack_id
    req.topics[0].partitions[0].current_leader_epoch = current_leader_epoch
    return request(broker.port, req, FetchResponse).responses[0].partitions[0]


def _produce(bootstrap: str, topic: str, numbers: range, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for n in numbers:
        producer.produce(topic, str(n).encode(), partition=n % partitions)
    assert producer.flush(30) == 0


def _read(consumer: Consumer, read: list[int], count: int, timeout: float) -> None:
    def done() -> bool:
        read.extend(int(m.value() or b"") for m in consumer.consume(500, 0.2) if m.error() is None)
        return len(read) >= count
    wait_until(done, f"{count} records read", timeout=timeout, seen=lambda: len(read))


def test_consumer_reads_from_its_rack_then_from_the_leaders(cluster: Racks3) -> None:
    topic = "near"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # leaders 1, 2 (rack-c broker a follower: the consumer is sent there) and 3 (read where it leads)
    for future in admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]]),
                                       NewTopic("pending", 1, replica_assignment=[[1, 2, 3]])]).values():
        future.result(15)
    cluster.topic(topic, lambda v: all(len(p[3]) == 3 for p in v.values()))
    cluster.topic("pending", lambda v: len(v[0][3]) == 3)
    _produce(cluster.bootstrap, topic, range(300), 3)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": unique("g"), "client.rack": "c",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 500})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        read: list[int] = []
        _read(consumer, read, 300, timeout=20)
        assert sorted(read) == list(range(300))
        # every record came from the rack-c broker: its bytes out are the whole log's, the leaders' none
        sizes = scrape(cluster.metrics[3])
        log_bytes = sum(value(sizes, "kafka_log_log_size", topic=topic, partition=str(p)) for p in range(3))
        assert log_bytes > 0
        assert cluster.bytes_out(3, topic) >= log_bytes
        assert cluster.bytes_out(1, topic) == cluster.bytes_out(2, topic) == 0

        # the leader of partition 0 (broker 1) sends a rack-c consumer to broker 3, with no records; not one in
        # its own rack or none
        leader, follower, other = (cluster.brokers[i] for i in (1, 3, 2))
        sent = _fetch(leader, topic, 0, rack_id="c")
        assert (sent.error_code, sent.preferred_read_replica, sent.high_watermark, bytes(sent.records or b"")) == \
            (0, 3, 100, b"")
        for rack in ("a", "", "z"):
            kept = _fetch(leader, topic, 0, rack_id=rack)
            assert kept.preferred_read_replica == -1 and kept.records, rack
        # followers serve a consumer's Fetch v11 (never sending it elsewhere), not an older one
        served = _fetch(follower, topic, 0, rack_id="a")
        assert (served.error_code, served.preferred_read_replica, served.high_watermark) == (0, -1, 100)
        assert served.records
        assert _fetch(other, topic, 0, rack_id="c").preferred_read_replica == -1
        assert _fetch(follower, topic, 0, version=10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert _fetch(follower, topic, 0, offset=100_000).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        epoch = cluster.topic(topic)[0][1]
        assert _fetch(follower, topic, 0, current_leader_epoch=epoch + 1).error_code == \
            ErrorCode.UNKNOWN_LEADER_EPOCH
        _read_committed_on_a_follower(leader, follower)

        # the rack-c broker dies: the consumer carries on from the leaders
        killed = time.monotonic()
        cluster.brokers[3].kill()
        _produce(cluster.bootstrap, topic, range(300, 600), 3)
        _read(consumer, read, 600, timeout=30)
        carried_on = time.monotonic() - killed
        assert sorted(read) == list(range(600)), "each record read once"
        assert cluster.bytes_out(1, topic) > 0 and cluster.bytes_out(2, topic) > 0
        print(f"read on from the leaders {carried_on:.1f} s after the rack-c broker was killed "
              f"(session timeout {SESSION_TIMEOUT_MS / 1000:g} s)")
    finally:
        consumer.close()

    # the controller took broker 3 out of the ISRs, a new leader epoch: a follower fences the old one
    view = cluster.topic(topic, lambda v: all(3 not in p[3] for p in v.values()))
    leader_of_0, epoch_0 = view[0][0], view[0][1]
    follower_of_0 = cluster.brokers[next(b for b in view[0][3] if b != leader_of_0)]
    assert _fetch(follower_of_0, topic, 0, current_leader_epoch=epoch_0 - 1).error_code == \
        ErrorCode.FENCED_LEADER_EPOCH
    assert _fetch(follower_of_0, topic, 0, current_leader_epoch=epoch_0).error_code == 0


def _read_committed_on_a_follower(leader: BrokerProcess, follower: BrokerProcess) -> None:
    """A read_committed consumer on a follower reads below its last stable offset, which follows the leader's
    transactions: 3 records, then an open transaction of 2 (a raw producer's), then its commit marker."""
    pid = 4_200_001  # no coordinator knows it: the leader checks its batches against the partition's state alone
    with Conn(leader.port) as conn:
        assert conn.produce("pending", build_batch([Record(i, 1000 + i, None, b"c") for i in range(3)]), 0,
                            acks=-1).error_code == 0
        assert conn.produce("pending", build_batch([Record(i, 2000 + i, None, b"t") for i in range(2)],
                                                   attributes=ATTR_TRANSACTIONAL, producer_id=pid, producer_epoch=0,
                                                   base_sequence=0), 0, acks=-1).error_code == 0

    def on_follower(stable: int, end: int) -> Any:
        answer = _fetch(follower, "pending", 0, isolation_level=1)
        return answer if (answer.last_stable_offset, answer.high_watermark) == (stable, end) else None
    held = wait_until(lambda: on_follower(3, 5), "the follower's last stable offset at the open transaction",
                      timeout=10, seen=lambda: _fetch(follower, "pending", 0, isolation_level=1))
    assert [h.last_offset for _, h in iter_batches(bytes(held.records or b""))] == [2]  # not the open one
    assert write_markers(leader.port, pid, 0, True, 0, {"pending": [0]}) == {("pending", 0): ErrorCode.NONE}
    done = wait_until(lambda: on_follower(6, 6), "the follower's last stable offset past the commit", timeout=10,
                      seen=lambda: _fetch(follower, "pending", 0, isolation_level=1))
    assert [h.last_offset for _, h in iter_batches(bytes(done.records or b""))] == [2, 4, 5]  # and the marker
