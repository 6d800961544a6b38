"""Replica reassignment and leader elections on request, on a real ZooKeeper with three real brokers
(``auto.leader.rebalance.enable=false``, so only an election moves a leader to its preferred replica):

- a partition of replication factor 2 moved to another pair of brokers by kafka-python's AdminClient
  (AlterPartitionReassignments) while an idempotent librdkafka producer writes with acks=all: listed as under way
  (ListPartitionReassignments, the topic znode's adding_replicas / removing_replicas) while the added broker is
  paused, then complete once it caught up; the leader moved into the target, every acknowledged record on the
  new replicas, the removed broker's log deleted; a second partition's reassignment cancelled;
- ElectLeaders (confluent-kafka's elect_leaders and raw requests) moves the leader to the preferred replica, with
  Kafka's errors: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_CONTROLLER on the other brokers;
- a tool's /admin/reassign_partitions and /admin/preferred_replica_election znodes carried out and deleted;
- a move under way when the controller stops completed by the next controller.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import NoReassignmentInProgressError
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kazoo.client import KazooClient
from support import zkcluster as zc
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import request
from support.zkcluster import PartitionView, agreed_controller, agreed_topic, running_cluster, topic_view

from headwater.kafka.errors import ErrorCode
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
PREFERRED, UNCLEAN = 0, 1

Alter = AlterPartitionReassignmentsRequest
Elect = ElectLeadersRequest


class Reassign3:
    def __init__(self, brokers: dict[int, BrokerProcess], zk: KazooClient, chroot: str) -> None:
        self.brokers, self.zk, self.chroot = brokers, zk, chroot

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def controller(self) -> BrokerProcess:
        every = list(self.brokers.values())
        return self.brokers[wait_until(lambda: agreed_controller(every, IDS), "a controller", timeout=20)]

    def create(self, topic: str, assignment: list[list[int]]) -> dict[int, PartitionView]:
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        next(iter(admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)],
                                      operation_timeout=20).values())).result(30)
        return self.agreed(topic, lambda v: all(v[p][0] == a[0] and len(v[p][3]) == len(a)
                                                for p, a in enumerate(assignment)))

    def agreed(self, topic: str, wanted: Any, timeout: float = 30) -> dict[int, PartitionView]:
        every = list(self.brokers.values())
        return wait_until(lambda: agreed_topic(every, topic, wanted), f"every broker's Metadata of {topic}",
                          timeout=timeout, seen=lambda: {b.port: topic_view(b, topic) for b in every})

    def znode(self, path: str) -> Any:
        return json.loads(self.zk.get(self.chroot + path)[0])

    def exists(self, path: str) -> bool:
        return self.zk.exists(self.chroot + path) is not None

    def kadmin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=15000)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Reassign3]:
    chroot = "/" + unique("hw")
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=15)
    try:
        with running_cluster(tmp_path_factory.mktemp("zk-reassign"), zookeeper.connect + chroot, IDS,
                             SESSION_TIMEOUT_MS, "auto.leader.rebalance.enable=false") as brokers:
            yield Reassign3(brokers, zk, chroot)
    finally:
        zk.stop()
        zk.close()


# -- raw requests (to one broker: the controller, or another to see it refuse) --------------------------------

def _alter(broker: BrokerProcess, moves: dict[tuple[str, int], list[int] | None]) -> tuple[int, dict[Any, int]]:
    """(top-level error, each partition's error) of AlterPartitionReassignments v0."""
    topics: dict[str, list[Any]] = {}
    for (name, index), replicas in moves.items():
        topics.setdefault(name, []).append(Alter.ReassignableTopic.ReassignablePartition(
            partition_index=index, replicas=replicas))
    answer = request(broker.port, Alter[0](timeout_ms=10000, topics=[
        Alter.ReassignableTopic(name=n, partitions=p) for n, p in topics.items()]),
        AlterPartitionReassignmentsResponse)
    return answer.error_code, {(t.name, p.partition_index): p.error_code for t in answer.responses
                               for p in t.partitions}


def _listed(broker: BrokerProcess) -> tuple[int, dict[tuple[str, int], tuple[list[int], list[int], list[int]]]]:
    answer = request(broker.port, ListPartitionReassignmentsRequest[0](timeout_ms=10000, topics=None),
                     ListPartitionReassignmentsResponse)
    return answer.error_code, {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                                             list(p.removing_replicas))
                               for t in answer.topics for p in t.partitions}


def _elect(broker: BrokerProcess, election_type: int, partitions: dict[str, list[int]]) -> dict[tuple[str, int], int]:
    answer = request(broker.port, Elect[1](election_type=election_type, timeout_ms=10000, topic_partitions=[
        Elect.TopicPartitions(topic=t, partitions=p) for t, p in partitions.items()]), ElectLeadersResponse)
    assert answer.error_code == 0
    return {(r.topic, p.partition_id): p.error_code for r in answer.replica_election_results
            for p in r.partition_result}


def test_partition_moved_with_its_records_while_an_acks_all_producer_writes(cluster: Reassign3) -> None:
    controller = cluster.controller()
    # x: the broker added; paused while the reassignment starts, so it stays under way until x catches up
    x = next(i for i in sorted(IDS) if cluster.brokers[i] is not controller)
    a, b = sorted(IDS - {x})
    topic = unique("move")
    cluster.create(topic, [[a, b], [a, b]])
    producer = zc.NumberedProducer(cluster.bootstrap, topic, 2, only=0)
    producer.start()
    try:
        wait_until(lambda: len(producer.acked[0]) >= 2000, "records acknowledged before the move", timeout=30)
        paused = cluster.brokers[x]
        assert paused.proc is not None
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            # partition 0 to [x, b] (its leader a leaves), partition 1 too, cancelled below
            assert _alter(controller, {(topic, 0): [x, b], (topic, 1): [x, b]}) == \
                (0, {(topic, 0): 0, (topic, 1): 0})
            moving = ([x, b, a], [x], [a])  # RS = TRS + ORS, AR, RR
            assert _listed(controller) == (0, {(topic, 0): moving, (topic, 1): moving})
            data = cluster.znode(f"/brokers/topics/{topic}")
            assert data["partitions"] == {"0": [x, b, a], "1": [x, b, a]}
            assert data["adding_replicas"] == {"0": [x], "1": [x]}
            assert data["removing_replicas"] == {"0": [a], "1": [a]}
            # meanwhile: its preferred replica x is not in sync, new partitions wait, other brokers refuse
            assert _elect(controller, PREFERRED, {topic: [0]}) == {(topic, 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE}
            grown = request(controller.port, CreatePartitionsRequest[0](
                topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=3, assignments=None)],
                timeout_ms=10000, validate_only=False), CreatePartitionsResponse)
            assert grown.results[0].error_code == ErrorCode.REASSIGNMENT_IN_PROGRESS
            other = cluster.brokers[b] if cluster.brokers[b] is not controller else cluster.brokers[a]
            assert _alter(other, {(topic, 1): None}) == (ErrorCode.NOT_CONTROLLER, {})
            assert _listed(other) == (ErrorCode.NOT_CONTROLLER, {})
            # partition 1's reassignment cancelled: back to its original replicas, in the order the reassignment left
            # them ([b, a]: Kafka's ORS = RS - AR, which cannot restore the original order)
            assert _alter(controller, {(topic, 1): None}) == (0, {(topic, 1): 0})
            assert _listed(controller) == (0, {(topic, 0): moving})
        finally:
            paused.proc.send_signal(signal.SIGCONT)

        kadmin = cluster.kadmin()
        try:
            wait_until(lambda: kadmin.list_partition_reassignments() == {}, "the move complete", timeout=30)
            assert kadmin.alter_partition_reassignments({TopicPartition(topic, 1): None}) == \
                {TopicPartition(topic, 1): NoReassignmentInProgressError}
        finally:
            kadmin.close()
        moved = len(producer.acked[0])
        wait_until(lambda: len(producer.acked[0]) >= moved + 1000, "records acknowledged after the move", timeout=30)
    finally:
        producer.finish()
    assert not producer.failed

    # the leader moved into the target (x, its first live in-sync replica), the ISR is the target's
    view = cluster.agreed(topic, lambda v: v[0][2] == (x, b) and set(v[0][3]) == {x, b} and v[1][2] == (b, a))
    assert view[0][0] == x and view[1][0] == a
    data = cluster.znode(f"/brokers/topics/{topic}")
    assert data["partitions"] == {"0": [x, b], "1": [b, a]}
    assert data["adding_replicas"] == {} and data["removing_replicas"] == {}
    # the removed replicas' logs deleted: a's of partition 0, x's of the cancelled partition 1
    wait_until(lambda: not (cluster.brokers[a].log_dir / f"{topic}-0").exists() and
               not (cluster.brokers[x].log_dir / f"{topic}-1").exists(), "the removed replicas' logs deleted")
    assert (cluster.brokers[a].log_dir / f"{topic}-1").is_dir() and (cluster.brokers[x].log_dir / f"{topic}-0").is_dir()
    # every acknowledged record once, and the new replicas hold the same batches
    zc.assert_each_acknowledged_once(producer.acked, zc.read_numbers(cluster.bootstrap, topic, 2))
    highs = zc.high_watermarks(cluster.bootstrap, topic, 2)
    assert highs[0] >= len(producer.acked[0])
    wait_until(lambda: zc.replicas_equal([cluster.brokers[x].log_dir, cluster.brokers[b].log_dir], topic,
                                      {0: highs[0]}), "the new replicas' logs equal below the high watermark")


def test_elect_leaders_moves_the_leader_to_the_preferred_replica(cluster: Reassign3) -> None:
    controller = cluster.controller()
    topic = unique("elect")
    cluster.create(topic, [[1, 2, 3]])
    # reordered: 2 is preferred now while 1 still leads (nothing moves it: no auto rebalance)
    kadmin = cluster.kadmin()
    try:
        assert kadmin.alter_partition_reassignments({TopicPartition(topic, 0): [2, 1, 3]}) == \
            {TopicPartition(topic, 0): None}
    finally:
        kadmin.close()
    before = cluster.agreed(topic, lambda v: v[0][2] == (2, 1, 3))
    assert before[0][0] == 1
    for broker in cluster.brokers.values():
        if broker is not controller:
            assert _elect(broker, PREFERRED, {topic: [0]}) == {(topic, 0): ErrorCode.NOT_CONTROLLER}

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    elected = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(topic, 0)]).result(30)
    assert elected == {CTopicPartition(topic, 0): None}
    after = cluster.agreed(topic, lambda v: v[0][0] == 2)
    assert after[0][1] > before[0][1] and set(after[0][3]) == IDS
    assert cluster.znode(f"/brokers/topics/{topic}/partitions/0/state")["leader"] == 2

    assert _elect(controller, PREFERRED, {topic: [0, 7]}) == {
        (topic, 0): ErrorCode.ELECTION_NOT_NEEDED, (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _elect(controller, UNCLEAN, {topic: [0]}) == {(topic, 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_reassignment_and_election_asked_through_admin_znodes(cluster: Reassign3) -> None:
    """As ``kafka-reassign-partitions --zookeeper`` and ``kafka-preferred-replica-election --zookeeper`` ask: the
    controller carries them out and deletes the znodes; a partition it cannot move is left out, logged."""
    controller = cluster.controller()
    topic = unique("legacy")
    cluster.create(topic, [[1]])
    request_data = {"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [3, 2]},
        {"topic": topic, "partition": 5, "replicas": [1]}]}  # no such partition
    cluster.zk.create(cluster.chroot + "/admin/reassign_partitions", json.dumps(request_data).encode(), makepath=True)
    wait_until(lambda: not cluster.exists("/admin/reassign_partitions"), "/admin/reassign_partitions done")
    view = cluster.agreed(topic, lambda v: v[0][2] == (3, 2) and set(v[0][3]) == {2, 3})
    assert view[0][0] == 3  # the old leader 1 is not a target: the target's first in-sync replica leads
    assert f"the reassignment of {topic}-5 to [1] is refused: UNKNOWN_TOPIC_OR_PARTITION" in \
        controller.log_text(since_start=True)
    wait_until(lambda: not (cluster.brokers[1].log_dir / f"{topic}-0").exists(), "broker 1's replica deleted")

    # reordered (complete at once), so that 2 is preferred while 3 leads; then the preferred election
    reorder = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 3]}]}
    cluster.zk.create(cluster.chroot + "/admin/reassign_partitions", json.dumps(reorder).encode())
    wait_until(lambda: not cluster.exists("/admin/reassign_partitions"), "/admin/reassign_partitions done")
    assert cluster.agreed(topic, lambda v: v[0][2] == (2, 3))[0][0] == 3
    election = {"version": 1, "partitions": [{"topic": topic, "partition": 0}]}
    cluster.zk.create(cluster.chroot + "/admin/preferred_replica_election", json.dumps(election).encode())
    wait_until(lambda: not cluster.exists("/admin/preferred_replica_election"), "the preferred election done")
    cluster.agreed(topic, lambda v: v[0][0] == 2)


def test_bad_reassignments_refused_with_kafkas_errors(cluster: Reassign3) -> None:
    controller = cluster.controller()
    topic = unique("bad")
    cluster.create(topic, [[1, 2]])
    code, errors = _alter(controller, {(topic, 0): [2, 2]})
    assert code == 0 and errors == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _alter(controller, {(topic, 0): [1, 9]})[1] == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _alter(controller, {(topic, 0): []})[1] == {(topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _alter(controller, {(topic, 3): [1, 2]})[1] == {(topic, 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert _alter(controller, {(topic, 0): None})[1] == {(topic, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    # nothing changed
    data = cluster.znode(f"/brokers/topics/{topic}")
    assert data["partitions"] == {"0": [1, 2]} and data["adding_replicas"] == {}


def test_reassignment_under_way_completed_by_the_next_controller(cluster: Reassign3) -> None:
    """The topic znode says where a move is (adding_replicas / removing_replicas), so a controller stopped while
    one is under way leaves it to the next, which completes it once the target is in sync."""
    controller = cluster.controller()
    x, y = (i for i in sorted(IDS) if cluster.brokers[i] is not controller)
    topic = unique("failover")
    cluster.create(topic, [[y]])
    paused = cluster.brokers[x]
    assert paused.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        assert _alter(controller, {(topic, 0): [x]}) == (0, {(topic, 0): 0})
        controller.stop()  # a clean stop: its session closes, y takes over at once (x is paused)
        wait_until(lambda: cluster.exists("/controller") and cluster.znode("/controller")["brokerid"] == y,
                   "broker y controller")
        # (NOT_CONTROLLER until y has read its controller epoch)
        wait_until(lambda: _listed(cluster.brokers[y]) == (0, {(topic, 0): ([x, y], [x], [y])}),
                   "the move under way, listed by the new controller", timeout=10)
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    try:
        wait_until(lambda: _listed(cluster.brokers[y]) == (0, {}), "the move completed by the new controller")
        data = cluster.znode(f"/brokers/topics/{topic}")
        assert data["partitions"] == {"0": [x]} and data["adding_replicas"] == {} and data["removing_replicas"] == {}
        state = cluster.znode(f"/brokers/topics/{topic}/partitions/0/state")
        assert state["leader"] == x and state["isr"] == [x]
        wait_until(lambda: not (cluster.brokers[y].log_dir / f"{topic}-0").exists(), "y's replica deleted")
    finally:
        controller.start()
