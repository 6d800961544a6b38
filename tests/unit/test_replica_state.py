"""A leader's bookkeeping (broker/replication/replica.py) on a real partition log: the high watermark as the
smallest log end of the ISR (and of a proposed ISR's members while it is written) and never lower, Kafka's
caught-up rule for ISR expiry, who may join the ISR, acks=all waits; the high-watermark checkpoint file in Kafka's
layout."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from headwater.broker.config.broker_config import TopicConfig
from headwater.broker.log import PartitionLog
from headwater.broker.log.flusher import PartitionFlusher
from headwater.broker.replication.checkpoint import read_checkpoint, write_checkpoint
from headwater.broker.replication.produce import leader_refusal
from headwater.broker.replication.replica import PartitionReplica, Role
from headwater.broker.replication.state import PartitionState
from headwater.broker.topics.producer_state import PartitionProducerState
from headwater.broker.topics.topic import Partition
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import Record, build_batch, parse_header

LAG = 1000


def _partition(path: Path, **config: object) -> tuple[Partition, list[int]]:
    plog = PartitionLog.open(path / "t-0", TopicConfig.model_validate(config) if config else TopicConfig())
    woken: list[int] = []
    partition = Partition(0, plog, PartitionFlusher(plog), PartitionProducerState(path / "t-0"),
                          lambda: woken.append(1))
    return partition, woken


def _append(partition: Partition, count: int, epoch: int = 1) -> None:
    batch = build_batch([Record(i, int(time.time() * 1000), None, b"v") for i in range(count)])
    partition.log.append(bytearray(batch), parse_header(batch), epoch)


def _leader(tmp_path: Path, isr: tuple[int, ...] = (1, 2, 3), **config: object) -> tuple[PartitionReplica, list[int]]:
    partition, woken = _partition(tmp_path, **config)
    replica = PartitionReplica("t", partition, 1, PartitionState(1, 1, isr, 1, (1, 2, 3), 0), 0)
    replica.become_leader(replica.state, now_ms=10_000)
    return replica, woken


def test_high_watermark_is_the_smallest_isr_log_end_and_never_goes_back(tmp_path: Path) -> None:
    replica, woken = _leader(tmp_path)
    _append(replica.partition, 5)
    assert replica.high_watermark == 0  # the followers' positions are unknown
    replica.follower_fetched(2, 5, 10_100)
    assert replica.high_watermark == 0
    replica.follower_fetched(3, 3, 10_100)
    assert replica.high_watermark == 3 and woken  # consumers parked on the partition are woken
    replica.follower_fetched(3, 1, 10_200)  # an older position (a stale request) does not lower it
    assert replica.high_watermark == 3
    replica.follower_fetched(3, 5, 10_300)
    assert replica.high_watermark == 5


def test_leader_alone_in_its_isr_commits_at_its_log_end(tmp_path: Path) -> None:
    replica, _ = _leader(tmp_path, isr=(1,))
    _append(replica.partition, 4)
    assert replica.advance_high_watermark() and replica.high_watermark == 4


def test_a_follower_behind_for_longer_than_the_lag_is_out_of_sync(tmp_path: Path) -> None:
    replica, _ = _leader(tmp_path)  # ISR members start caught up at 10_000
    _append(replica.partition, 5)
    replica.follower_fetched(2, 5, 10_500)  # at the log end: caught up now
    replica.follower_fetched(3, 2, 10_500)  # behind
    assert replica.out_of_sync(10_000 + LAG, LAG) == []
    assert replica.out_of_sync(10_000 + LAG + 1, LAG) == [3]
    # Kafka's second rule: a fetch reaching the leader's end as of the previous fetch counts from that fetch
    replica.follower_fetched(3, 5, 11_200)
    _append(replica.partition, 1)
    replica.follower_fetched(3, 5, 11_400)
    assert replica.followers[3].last_caught_up_ms == 11_200
    assert replica.out_of_sync(11_200 + LAG, LAG) == [2]  # 2 last caught up at 10_500 and is behind now


def test_who_may_join_the_isr(tmp_path: Path) -> None:
    replica, _ = _leader(tmp_path, isr=(1, 2))
    _append(replica.partition, 5)
    replica.follower_fetched(2, 5, 10_100)
    assert replica.high_watermark == 5
    replica.follower_fetched(3, 4, 10_100)
    assert replica.ready_to_join() == []
    replica.follower_fetched(3, 5, 10_200)
    assert replica.ready_to_join() == [3]


def test_a_follower_being_taken_in_holds_the_high_watermark_until_the_isr_is_written(tmp_path: Path) -> None:
    """Kafka's maximal ISR: once the new ISR is in ZooKeeper the controller may elect the follower taken in, so the
    records acknowledged meanwhile must be on it."""
    replica, _ = _leader(tmp_path, isr=(1, 2))
    _append(replica.partition, 5)
    replica.follower_fetched(2, 5, 10_100)
    replica.follower_fetched(3, 5, 10_100)
    assert replica.ready_to_join() == [3]
    replica.isr_changing, replica.pending_isr = True, (1, 2, 3)  # the ISR write is under way
    _append(replica.partition, 4)
    replica.follower_fetched(2, 9, 10_200)
    assert replica.high_watermark == 5  # not past what 3 has
    replica.follower_fetched(3, 7, 10_300)
    assert replica.high_watermark == 7
    replica.isr_changing, replica.pending_isr = False, ()  # written elsewhere: not taken in after all
    replica.follower_fetched(2, 9, 10_400)
    assert replica.high_watermark == 9


def test_a_replica_reassigned_away_no_longer_holds_the_high_watermark(tmp_path: Path) -> None:
    """Its ISR place may outlive it for a moment (the leader took it in before it learned of the move): the
    leader counts its own replicas only, and does not take it in again."""
    replica, _ = _leader(tmp_path, isr=(1, 2, 3))
    _append(replica.partition, 5)
    replica.follower_fetched(2, 5, 10_100)
    assert replica.high_watermark == 0  # 3 has not fetched
    replica.become_leader(PartitionState(1, 1, (1, 2, 3), 1, (1, 2), 0), now_ms=10_200)  # same epoch: 3 moved away
    assert 3 not in replica.followers and replica.high_watermark == 5
    replica.follower_fetched(3, 5, 10_300)
    assert replica.ready_to_join() == [] and replica.out_of_sync(10_300 + LAG + 1, LAG) == []


def test_acks_all_waits_for_the_high_watermark_and_min_insync(tmp_path: Path) -> None:
    async def run() -> None:
        replica, _ = _leader(tmp_path, isr=(1, 2), **{"min.insync.replicas": 2})
        _append(replica.partition, 3)
        waiting = replica.wait_for(3)
        assert not waiting.done()
        replica.follower_fetched(2, 3, 10_100)
        assert waiting.done() and waiting.result() == 0
        # the ISR shrank below min.insync.replicas while a produce waited: NOT_ENOUGH_REPLICAS_AFTER_APPEND
        _append(replica.partition, 1)
        late = replica.wait_for(4)
        replica.become_leader(PartitionState(1, 1, (1,), 1, (1, 2, 3), 1), 10_200)
        assert late.result() == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert leader_refusal(replica, -1) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert leader_refusal(replica, 1) == 0
        # leadership moves: what still waits is answered NOT_LEADER_OR_FOLLOWER, and so is every produce
        _append(replica.partition, 1)
        moved = replica.wait_for(5)
        replica.become_follower(PartitionState(2, 2, (2,), 1, (1, 2, 3), 2))
        assert replica.role is Role.FOLLOWER and moved.result() == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert leader_refusal(replica, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER

    asyncio.run(run())


def test_high_watermark_checkpoint_in_kafkas_layout(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    assert read_checkpoint(path) == {}
    write_checkpoint(path, {("b", 1): 7, ("a", 0): 42})
    assert path.read_text() == "0\n2\na 0 42\nb 1 7\n"
    assert read_checkpoint(path) == {("a", 0): 42, ("b", 1): 7}
    path.write_text("0\n3\na 0 42\n")  # torn: fewer entries than its count
    assert read_checkpoint(path) == {}

