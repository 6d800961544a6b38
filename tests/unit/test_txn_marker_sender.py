"""Transaction markers as the coordinator sends them (broker/txn/marker_sender.py) and a partition takes them.

A partition refuses a marker from an older coordinator epoch than the producer's last marker there
(TRANSACTION_COORDINATOR_FENCED) or of an older producer epoch (INVALID_PRODUCER_EPOCH), as Kafka's
ProducerStateManager, and remembers the epoch across a restart and a rebuild from the log. The one-node sender
writes each marker locally (a ``__consumer_offsets`` one ends the producer's pending TxnOffsetCommit offsets) and
skips deleted topics; the cluster sender's rounds retry what its leaders refuse
or cannot take yet, with the leaders as they are then, until ``request.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from headwater.broker.cluster.topic_meta import TopicMeta
from headwater.broker.cluster.znodes import ClusterView, RegisteredBroker
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.errors import BrokerError
from headwater.broker.group.coordinator import GroupCoordinator
from headwater.broker.group.records import OffsetAndMetadata
from headwater.broker.group.store import OFFSETS_TOPIC
from headwater.broker.log.control import read_marker
from headwater.broker.replication.state import NO_LEADER, PartitionState
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.producer_state import SNAPSHOT_FILE
from headwater.broker.txn.marker_append import MarkerEntry
from headwater.broker.txn.marker_sender import (
    GONE,
    ClusterMarkerSender,
    LocalMarkerSender,
    MarkerError,
    marker_sender,
)
from headwater.broker.txn.state import TxnMetadata, TxnState
from headwater.kafka.errors import ErrorCode

TP = tuple[str, int]


def open_node(log_dir: Path, **props: str) -> tuple[Cluster, GroupCoordinator]:
    config = BrokerConfig(**{"log.dirs": str(log_dir), "offsets.topic.num.partitions": "2", **props})
    cluster = Cluster(config)
    cluster.load()
    groups = GroupCoordinator(cluster, config)
    groups.load()
    return cluster, groups


def markers(cluster: Cluster, topic: str, index: int) -> list[tuple[int, bool, int]]:
    """(offset, commit, coordinator epoch) of each marker in the partition."""
    plog = cluster.partition(topic, index).log
    return [(h.base_offset, *read_marker(bytes(data[pos:pos + h.size])))
            for data, pos, h in plog.batches_from(0) if h.is_control]


def txn(partitions: set[TP], producer_id: int = 7, epoch: int = 0) -> TxnMetadata:
    return TxnMetadata("tid", producer_id, epoch, 60000, TxnState.PREPARE_COMMIT, set(partitions))


def test_a_marker_from_an_older_coordinator_or_producer_epoch_is_refused(tmp_path: Path) -> None:
    cluster, _ = open_node(tmp_path)
    p = cluster.create_topic("t", 1).partitions[0]
    p.append_marker(7, 2, True, 5)
    with pytest.raises(BrokerError) as fenced:
        p.append_marker(7, 2, False, 4)  # a zombie coordinator's
    assert fenced.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    with pytest.raises(BrokerError) as old_epoch:
        p.append_marker(7, 1, False, 6)
    assert old_epoch.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert markers(cluster, "t", 0) == [(0, True, 5)]  # nothing appended by the refused ones
    p.append_marker(7, 2, False, 5)  # the same coordinator again (a retry), and a newer one
    p.append_marker(7, 3, True, 6)
    p.append_marker(8, 0, True, 1)  # another producer has its own
    cluster.close()

    cluster, _ = open_node(tmp_path)  # from the snapshot
    p = cluster.partition("t", 0)
    with pytest.raises(BrokerError) as again:
        p.append_marker(7, 3, True, 5)
    assert again.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    cluster.close()

    (tmp_path / "t-0" / SNAPSHOT_FILE).unlink()  # rebuilt from the log's markers (a replica's way, too)
    cluster, _ = open_node(tmp_path)
    p = cluster.partition("t", 0)
    with pytest.raises(BrokerError) as replayed:
        p.append_marker(7, 3, True, 5)
    assert replayed.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert [m[2] for m in markers(cluster, "t", 0)] == [5, 5, 6, 1]
    cluster.close()


def test_the_one_node_sender_writes_each_marker_and_skips_deleted_topics(tmp_path: Path) -> None:
    cluster, groups = open_node(tmp_path)
    cluster.create_topic("t", 2)
    sender = LocalMarkerSender(cluster, groups.offsets)
    asyncio.run(sender.send(txn({("t", 0), ("t", 1), ("deleted", 0)}), True, 3))
    assert markers(cluster, "t", 0) == markers(cluster, "t", 1) == [(0, True, 3)]
    with pytest.raises(MarkerError) as raised:
        asyncio.run(sender.send(txn({("t", 0)}), False, 2))
    assert raised.value.fenced and "TRANSACTION_COORDINATOR_FENCED" in str(raised.value)
    assert markers(cluster, "t", 0) == [(0, True, 3)]
    cluster.close()


def test_a_consumer_offsets_marker_ends_the_producers_pending_offsets(tmp_path: Path) -> None:
    cluster, groups = open_node(tmp_path)
    cluster.create_topic("out", 1)
    asyncio.run(groups.offsets.commit_pending("g", 7, 0, {("out", 0): OffsetAndMetadata(5)}))
    asyncio.run(groups.offsets.commit_pending("h", 8, 0, {("out", 0): OffsetAndMetadata(9)}))
    assert groups.offsets.fetch("g", None) == {}  # held until the marker
    offsets_tp = (OFFSETS_TOPIC, groups.store.partition_for("g"))
    sender = LocalMarkerSender(cluster, groups.offsets)
    asyncio.run(sender.send(txn({offsets_tp, ("out", 0)}), True, 0))
    assert groups.offsets.fetch("g", None) == {("out", 0): OffsetAndMetadata(5)}
    asyncio.run(sender.send(txn({(OFFSETS_TOPIC, groups.store.partition_for("h"))}, producer_id=8), False, 0))
    assert groups.offsets.fetch("h", None) == {}  # aborted: dropped
    assert 8 not in groups.groups["h"].pending_txn
    cluster.close()


class Leaders:
    """A LeaderView whose leaders a test moves."""

    def __init__(self, leaders: dict[TP, int], addresses: dict[int, tuple[str, int]] | None = None) -> None:
        self.leaders = leaders
        self.addresses = addresses or {}

    def leader_of(self, topic: str, index: int) -> int:
        return self.leaders.get((topic, index), GONE)

    def address_of(self, broker_id: int) -> tuple[str, int] | None:
        return self.addresses.get(broker_id)


class LocalLeader:
    """The appends of the sender's own broker: answers each partition with the codes queued for it (then
    NONE), and records what it was asked."""

    def __init__(self, queued: dict[TP, list[ErrorCode]] | None = None) -> None:
        self.queued = queued or {}
        self.asked: list[tuple[TP, ...]] = []

    async def __call__(self, entries: Sequence[MarkerEntry], timeout_ms: int) -> list[dict[TP, ErrorCode]]:
        self.asked.extend(e.partitions for e in entries)
        return [{tp: (self.queued.get(tp) or [ErrorCode.NONE]).pop(0) for tp in e.partitions} for e in entries]


def cluster_sender(view: Leaders, local: LocalLeader, timeout_ms: int = 2000) -> ClusterMarkerSender:
    config = BrokerConfig(**{"node.id": "1", "request.timeout.ms": str(timeout_ms)})
    return ClusterMarkerSender(1, config, view, local)


def test_the_cluster_sender_retries_with_the_leaders_as_they_move() -> None:
    a, b, gone = ("t", 0), ("t", 1), ("deleted", 0)
    view = Leaders({a: 1, b: -1})  # b has no leader yet
    local = LocalLeader({a: [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS]})

    async def run() -> None:
        sending = asyncio.ensure_future(cluster_sender(view, local).send(txn({a, b, gone}), True, 4))
        await asyncio.sleep(0.3)
        assert not sending.done()  # b is still waiting for a leader
        view.leaders[b] = 1
        await asyncio.wait_for(sending, 5)

    asyncio.run(run())
    # each round asks for what is still pending on its leader: a until its third answer, b once it has a leader
    assert len([asked for asked in local.asked if a in asked]) == 3 and b in local.asked[-1]
    assert all(gone not in asked for asked in local.asked)


def test_the_cluster_sender_gives_up_after_the_request_timeout_and_at_once_when_fenced() -> None:
    a, b = ("t", 0), ("t", 1)
    # a leader that is not registered (no address) and one that never answers NONE
    stuck = cluster_sender(Leaders({a: 2, b: 1}), LocalLeader({b: [ErrorCode.REQUEST_TIMED_OUT] * 100}), 300)
    with pytest.raises(MarkerError) as timed_out:
        asyncio.run(stuck.send(txn({a, b}), False, 4))
    assert not timed_out.value.fenced
    assert "not registered" in str(timed_out.value) and "REQUEST_TIMED_OUT" in str(timed_out.value)

    local = LocalLeader({a: [ErrorCode.TRANSACTION_COORDINATOR_FENCED]})
    with pytest.raises(MarkerError) as fenced:
        asyncio.run(cluster_sender(Leaders({a: 1, b: 1}), local).send(txn({a, b}), True, 4))
    assert fenced.value.fenced and local.asked == [(a, b)]  # not sent again

    broken = LocalLeader({a: [ErrorCode.CORRUPT_MESSAGE]})  # unexpected: fails the send, not retried
    with pytest.raises(MarkerError) as unexpected:
        asyncio.run(cluster_sender(Leaders({a: 1}), broken).send(txn({a}), True, 4))
    assert not unexpected.value.fenced and broken.asked == [(a,)]


def test_a_cluster_broker_finds_leaders_in_its_zookeeper_watches(tmp_path: Path) -> None:
    cluster, groups = open_node(tmp_path)
    assert isinstance(marker_sender(cluster, groups.offsets), LocalMarkerSender)  # one node
    cluster.close()
    cluster, groups = open_node(tmp_path, **{"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})
    sender = marker_sender(cluster, groups.offsets)
    assert isinstance(sender, ClusterMarkerSender) and sender.broker_id == 1
    meta = TopicMeta("t", uuid.uuid4(), {0: (2, 1), 1: (1, 2)}, {}, 0, 0,
                     states={0: PartitionState(leader=2, leader_epoch=3, isr=(2, 1), controller_epoch=1)})
    # what the ZooKeeper watches keep (cluster/membership.py): the topics' partition states, the live brokers
    cluster.membership = SimpleNamespace(  # type: ignore[assignment]
        sync=SimpleNamespace(topics={"t": meta}),
        view=ClusterView({2: RegisteredBroker(2, {"PLAINTEXT": ("10.0.0.2", 9092), "OTHER": ("10.0.0.2", 9093)})}))
    view = sender.view
    assert [view.leader_of("t", 0), view.leader_of("t", 1), view.leader_of("t", 2), view.leader_of("u", 0)] == [
        2, NO_LEADER, GONE, GONE]  # partition 1 has no state yet; t-2 and topic u do not exist
    assert view.address_of(2) == ("10.0.0.2", 9092)  # on the inter-broker listener
    assert view.address_of(3) is None  # not registered
    cluster.membership = None
    cluster.close()
