"""WriteTxnMarkers (key 27) and the transaction coordinator's marker sender on real brokers.

Three brokers on a real ZooKeeper: a marker sent to a partition's follower is NOT_LEADER_OR_FOLLOWER, to its
leader it is appended and answered once the ISR has it (it is then in all three replicas' logs), and a marker
from an older coordinator epoch than the producer's last one is TRANSACTION_COORDINATOR_FENCED. The cluster's
marker sender (run here as a coordinator on no broker would, every partition remote) writes a transaction's
markers while the leader of one of its partitions is SIGKILLed: it retries with the leaders as they move and
returns once the new leader has written and replicated the marker. On one node with the authorizer on: the
marker ends an open transaction (a read_committed consumer then reads its records), and a principal without
ALTER or CLUSTER_ACTION on the cluster gets CLUSTER_AUTHORIZATION_FAILED with nothing written.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import admin as ck
from kafka.protocol.consumer import ListOffsetsResponse
from support import zkserver
from support.brokerproc import BrokerProcess
from support.eoskit import read_isolated
from support.rawkafka import Conn, create_topic, list_offsets_req, request
from support.rawtxn import begin_transaction, write_markers
from support.zkcluster import agreed_topic, running_cluster, topic_view

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.log.control import read_marker
from headwater.broker.replication.state import NO_LEADER
from headwater.broker.txn.marker_sender import GONE, ClusterMarkerSender
from headwater.broker.txn.state import TxnMetadata, TxnState
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import ATTR_TRANSACTIONAL, Record, build_batch, iter_batches
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
PARTITIONS = 3
PRODUCER_IDS = itertools.count(900_000)  # markers need no producer the brokers know


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    base, chroot = tmp_path_factory.mktemp("zk-txn-markers"), "/" + unique("hw")
    with running_cluster(base, f"{zookeeper.connect}{chroot}", {1, 2, 3}, SESSION_TIMEOUT_MS) as started:
        yield started


def _topic(brokers: dict[int, BrokerProcess]) -> str:
    """A new topic of three partitions on all three brokers (min.insync.replicas 2), once every ISR is full."""
    topic = unique("markers")
    live = [b for b in brokers.values() if b.running]
    admin = ck.AdminClient({"bootstrap.servers": live[0].bootstrap})
    admin.create_topics([ck.NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    wait_until(lambda: agreed_topic(live, topic, lambda v: all(len(p[3]) == 3 for p in v.values())),
               f"{topic}'s full ISRs on every broker", timeout=20)
    return topic


def _replica_markers(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, bool, int]] | None:
    """(producer id, commit, coordinator epoch) of each marker in the broker's replica; None while a segment
    goes away under the read."""
    out = []
    try:
        for segment in sorted((broker.log_dir / f"{topic}-{partition}").glob("*.log")):
            data = segment.read_bytes()
            out += [(h.producer_id, *read_marker(data[pos:pos + h.size])) for pos, h in iter_batches(data)
                    if h.is_control]
    except FileNotFoundError:
        return None
    return out


def _leaders(broker: BrokerProcess, topic: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    """Each partition's (leader, replicas) as ``broker`` answers."""
    view = topic_view(broker, topic)
    assert view is not None
    return {p: (leader, replicas) for p, (leader, _, replicas, _) in view.items()}


def test_markers_on_the_leader_are_replicated_and_refused_elsewhere(brokers: dict[int, BrokerProcess]) -> None:
    topic = _topic(brokers)
    live = [i for i, b in brokers.items() if b.running]
    leader, replicas = _leaders(brokers[live[0]], topic)[0]
    follower = next(r for r in replicas if r != leader)
    pid = next(PRODUCER_IDS)

    assert write_markers(brokers[follower].port, pid, 0, True, 3, {topic: [0]}) == {
        (topic, 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert write_markers(brokers[leader].port, pid, 0, True, 3, {topic: [0], "no-such-topic": [0]}) == {
        (topic, 0): ErrorCode.NONE, ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # answered once the ISR (all three) had it: on every replica
    for r in replicas:
        assert (pid, True, 3) in (_replica_markers(brokers[r], topic, 0) or []), f"no marker on broker {r}"
    # a zombie coordinator (an older coordinator epoch) is fenced; the current one may write again
    assert write_markers(brokers[leader].port, pid, 0, False, 2, {topic: [0]}) == {
        (topic, 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert write_markers(brokers[leader].port, pid, 0, False, 3, {topic: [0]}) == {(topic, 0): ErrorCode.NONE}
    assert [m for m in _replica_markers(brokers[leader], topic, 0) or [] if m[0] == pid] == [
        (pid, True, 3), (pid, False, 3)]


class MetadataLeaders:
    """The leaders as the live brokers' Metadata answers them (a coordinator's broker learns the same from its
    ZooKeeper watches), each broker at its listener."""

    def __init__(self, brokers: dict[int, BrokerProcess]) -> None:
        self.brokers = brokers

    def leader_of(self, topic: str, index: int) -> int:
        for broker in self.brokers.values():
            view = topic_view(broker, topic) if broker.running else None
            if view is not None:
                return view[index][0] if index in view else GONE
        return NO_LEADER

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        return "127.0.0.1", self.brokers[broker_id].port


async def _never(*args: object) -> list[dict[tuple[str, int], ErrorCode]]:
    raise AssertionError("no partition is led by the sender's broker")


def test_the_cluster_sender_follows_a_leader_that_moves(brokers: dict[int, BrokerProcess]) -> None:
    topic = _topic(brokers)
    leaders = _leaders(next(b for b in brokers.values() if b.running), topic)
    victim = leaders[0][0]
    pid = next(PRODUCER_IDS)
    txn = TxnMetadata(unique("tid"), pid, 0, 60000, TxnState.PREPARE_COMMIT, {(topic, p) for p in range(PARTITIONS)})
    sender = ClusterMarkerSender(99, BrokerConfig(**{"node.id": "99", "request.timeout.ms": "30000"}),
                                 MetadataLeaders(brokers), _never)

    async def send() -> None:
        try:
            await sender.send(txn, True, 5)
        finally:
            sender.close()

    brokers[victim].kill()
    started = time.monotonic()
    asyncio.run(send())
    took = time.monotonic() - started
    survivors = [b for i, b in brokers.items() if i != victim]
    moved = _leaders(survivors[0], topic)
    assert moved[0][0] not in (victim, NO_LEADER)
    # every live replica of every partition has the marker: the moved partition's from its new leader
    for p in range(PARTITIONS):
        for b in survivors:
            assert (pid, True, 5) in (_replica_markers(b, topic, p) or []), f"{topic}-{p} on {b.log_dir}"
    assert took > 1, "sent before the leadership could move: the kill was not in the way"

    brokers[victim].start()  # back into every ISR, for the other tests of the module
    wait_until(lambda: agreed_topic(list(brokers.values()), topic, lambda v: all(len(p[3]) == 3 for p in v.values())),
               "the restarted broker back in the ISRs", timeout=30)


def _lso(port: int, topic: str) -> int:
    answer = request(port, list_offsets_req(topic, isolation_level=1), ListOffsetsResponse)
    return int(answer.topics[0].partitions[0].offset)


def _open_transaction(broker: BrokerProcess, topic: str, values: list[bytes]) -> tuple[int, int]:
    """(producer id, epoch) of a transaction of a raw transactional producer holding ``values`` on partition 0."""
    pid, epoch = begin_transaction(broker.port, unique("tid"), topic)
    batch = build_batch([Record(i, 1000 + i, None, v) for i, v in enumerate(values)], attributes=ATTR_TRANSACTIONAL,
                        producer_id=pid, producer_epoch=epoch, base_sequence=0)
    with Conn(broker.port) as conn:
        assert conn.produce(topic, batch, 0, acks=-1).error_code == 0
    return pid, epoch


def test_one_node_markers_end_transactions_and_need_cluster_action(tmp_path: Path) -> None:
    topic = "ended"
    with BrokerProcess(tmp_path / "data", "authorizer.enabled=true", "allow.everyone.if.no.acl.found=true") as proc:
        create_topic(proc.port, topic)
        pid, epoch = _open_transaction(proc, topic, [b"a", b"b"])
        assert _lso(proc.port, topic) == 0  # open: read_committed reads nothing yet
        # no ACL on the cluster yet: allowed, as allow.everyone.if.no.acl.found says
        assert write_markers(proc.port, pid, epoch, True, 0, {topic: [0]}) == {(topic, 0): ErrorCode.NONE}
        assert _lso(proc.port, topic) == 3  # two records and the marker
        assert [r.value for r in read_isolated(proc.bootstrap, topic, "read_committed")] == [b"a", b"b"]

        # the cluster now has an ACL, but ANONYMOUS only DESCRIBE: neither ALTER nor CLUSTER_ACTION
        rule = ck.AclBinding(ck.ResourceType.BROKER, "kafka-cluster", ck.ResourcePatternType.LITERAL,
                             "User:ANONYMOUS", "*", ck.AclOperation.DESCRIBE, ck.AclPermissionType.ALLOW)
        admin = ck.AdminClient({"bootstrap.servers": proc.bootstrap})
        for future in admin.create_acls([rule], request_timeout=10).values():
            future.result()
        pid, epoch = _open_transaction(proc, topic, [b"c"])
        assert write_markers(proc.port, pid, epoch, True, 0, {topic: [0], "other": [1]}) == {
            (topic, 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ("other", 1): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
        assert _lso(proc.port, topic) == 3  # still held back by the open transaction: no marker written
