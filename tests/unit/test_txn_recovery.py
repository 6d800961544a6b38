"""The transaction coordinator rebuilt from its logs after a crash (issue 29), on a real log directory.

A transaction whose PREPARE_COMMIT was written but not its markers is completed when the coordinator
loads: each partition gets its commit marker and the group offsets its TxnOffsetCommit held become
committed (and stay so after the next start, replayed from ``__consumer_offsets``). A transaction found
ONGOING past its timeout is aborted by the first periodic round, its epoch bumped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.group.coordinator import GroupCoordinator
from headwater.broker.group.records import OffsetAndMetadata
from headwater.broker.log.control import read_marker
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.producer_state import ProducerIdManager
from headwater.broker.txn import TransactionCoordinator, TxnState
from headwater.broker.txn.marker_sender import LocalMarkerSender
from headwater.kafka.errors import ErrorCode

T = TypeVar("T")


def run(awaitable: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(awaitable)


class Node:
    """The parts of a broker the coordinator stands on, opened on ``log_dir`` as a start opens them."""

    def __init__(self, log_dir: Path) -> None:
        config = BrokerConfig(**{"log.dirs": str(log_dir), "offsets.topic.num.partitions": "2",
                                 "transaction.state.log.num.partitions": "3"})
        self.cluster = Cluster(config)
        self.cluster.load()
        self.groups = GroupCoordinator(self.cluster, config)
        self.groups.load()
        self.txns = TransactionCoordinator(self.cluster, config, ProducerIdManager(self.cluster.log_dir),
                                           self.groups.offsets, LocalMarkerSender(self.cluster, self.groups.offsets))
        asyncio.run(self.txns.load())

    def markers(self, topic: str, index: int) -> list[tuple[int, bool]]:
        plog = self.cluster.partition(topic, index).log
        return [(h.base_offset, read_marker(bytes(data[pos:pos + h.size])).commit)
                for data, pos, h in plog.batches_from(0) if h.is_control]


def test_a_prepared_commit_is_completed_on_load(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.cluster.create_topic("out", 1, 1, {})
    code, pid, epoch = run(node.txns.init_producer("tid", 60000))
    assert code == ErrorCode.NONE
    offsets_tp = node.txns.offsets_partition("g")
    assert run(node.txns.add_partitions("tid", pid, epoch, [("out", 0), offsets_tp])) == ErrorCode.NONE
    run(node.groups.offsets.commit_pending("g", pid, epoch, {("out", 0): OffsetAndMetadata(5)}))
    assert node.groups.offsets.fetch("g", [("out", 0)]) == {("out", 0): None}
    # The crash came after the prepare was written, before any marker
    node.txns.store.append("tid", replace(node.txns.txns["tid"], state=TxnState.PREPARE_COMMIT))
    node.cluster.close()

    node = Node(tmp_path)
    assert node.markers("out", 0) == [(0, True)]
    assert node.markers(*offsets_tp) == [(1, True)]  # after the held offset record
    assert node.groups.offsets.fetch("g", [("out", 0)])[("out", 0)].offset == 5  # type: ignore[union-attr]
    assert node.txns.describe("tid").state == TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    node.cluster.close()

    node = Node(tmp_path)  # replayed from __consumer_offsets: the marker makes the held offset committed
    assert node.groups.offsets.fetch("g", [("out", 0)])[("out", 0)].offset == 5  # type: ignore[union-attr]
    assert node.markers("out", 0) == [(0, True)]  # not written twice
    node.cluster.close()


def test_an_ongoing_transaction_past_its_timeout_is_aborted_after_a_restart(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.cluster.create_topic("out", 1, 1, {})
    _, pid, epoch = run(node.txns.init_producer("tid", 1))
    offsets_tp = node.txns.offsets_partition("g")
    assert run(node.txns.add_partitions("tid", pid, epoch, [("out", 0), offsets_tp])) == ErrorCode.NONE
    run(node.groups.offsets.commit_pending("g", pid, epoch, {("out", 0): OffsetAndMetadata(7)}))
    node.cluster.close()

    node = Node(tmp_path)
    assert node.txns.describe("tid").state == TxnState.ONGOING  # type: ignore[union-attr]
    assert run(node.txns.abort_timed_out()) == ["tid"]
    txn = node.txns.describe("tid")
    assert txn is not None and (txn.state, txn.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert node.markers("out", 0) == [(0, False)]
    assert node.groups.offsets.fetch("g", [("out", 0)]) == {("out", 0): None}
    assert node.groups.groups["g"].pending_txn == {}
    # The fenced producer's requests are refused; a new init gets the next epoch
    assert run(node.txns.end_transaction("tid", pid, epoch, commit=True)) == ErrorCode.PRODUCER_FENCED
    assert run(node.txns.init_producer("tid", 1000, pid, epoch + 1))[1:] == (pid, epoch + 2)
    node.cluster.close()


def test_an_idle_transactional_id_expires(tmp_path: Path) -> None:
    node = Node(tmp_path)
    node.cluster.create_topic("out", 1, 1, {})
    _, pid, epoch = run(node.txns.init_producer("idle", 60000))
    _, busy_pid, busy_epoch = run(node.txns.init_producer("busy", 60000))
    assert run(node.txns.add_partitions("busy", busy_pid, busy_epoch, [("out", 0)])) == ErrorCode.NONE
    node.txns.config = node.txns.config.model_copy(update={"transactional_id_expiration_ms": 1})
    for txn in node.txns.txns.values():
        txn.last_update_ms -= 10
    run(node.txns.remove_expired())
    assert node.txns.describe("idle") is None  # its transaction is not open: forgotten
    assert node.txns.describe("busy") is not None  # an open transaction is aborted by its timeout, not expired
    node.cluster.close()
    node = Node(tmp_path)  # the tombstone is replayed
    assert node.txns.describe("idle") is None and node.txns.describe("busy") is not None
    assert run(node.txns.init_producer("idle", 60000))[1] != pid  # a new producer id for the id used again
    node.cluster.close()
