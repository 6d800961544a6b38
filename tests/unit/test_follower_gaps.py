"""A follower replicating a compacted leader log whose cleaned segments have offset gaps
(PartitionLog.append_as_follower, fetcher.append_fetched): the leader's batches are appended with their offsets
as they are, the follower's log end follows the last batch, segments roll at a batch's own base offset, and
reads, the offset index, recovery and truncation cope with the gaps. The yardstick: the follower's log holds
exactly the leader's batches (offsets, CRCs, leader epochs), and reading it from any offset answers what the
leader answers. The cleaner on a cluster replica stops at its high watermark (LogHousekeeping)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from headwater.broker.config.broker_config import BrokerConfig, TopicConfig
from headwater.broker.log import PartitionLog
from headwater.broker.log.cleaner import clean_partition
from headwater.broker.log.flusher import PartitionFlusher
from headwater.broker.log.segment import MAX_RELATIVE_OFFSET
from headwater.broker.replication.fetcher import ReplicationError, append_fetched
from headwater.broker.replication.replica import PartitionReplica
from headwater.broker.replication.state import PartitionState
from headwater.broker.topics.cluster import Cluster
from headwater.broker.topics.housekeeping import LogHousekeeping
from headwater.broker.topics.producer_state import PartitionProducerState
from headwater.broker.topics.topic import Partition
from headwater.kafka.records import Record, build_batch, iter_batches, parse_header, set_base_offset

T0 = 1_700_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def _keyed(key: bytes, value: bytes, count: int = 1) -> bytearray:
    return bytearray(build_batch([Record(i, T0 + i, key, value) for i in range(count)]))


def _cleaned_leader(path: Path) -> PartitionLog:
    """A compacted log of one-record batches (a few of two), every fourth with a key of its own, the others
    updating three keys, cleaned: most batches gone, so its offsets have gaps; epochs 3 then 5."""
    plog = PartitionLog.open(path, TopicConfig(**{"cleanup.policy": "compact", "segment.bytes": 700,
                                                  "index.interval.bytes": 100}), clock=Clock())
    for n in range(90):
        key = b"u%d" % n if n % 4 == 0 else b"k%d" % (n % 3)
        batch = _keyed(key, b"v%d" % n * 10, count=2 if n % 17 == 0 else 1)
        plog.append(batch, parse_header(batch), 3 if n < 50 else 5)
    assert clean_partition(plog, T0, force=True) is not None
    return plog


def _batches(data: bytes) -> list[tuple[int, int, int, int]]:
    return [(h.base_offset, h.last_offset, h.crc, h.partition_leader_epoch) for _, h in iter_batches(data)]


def _gaps(plog: PartitionLog) -> int:
    """How many times a batch does not begin where the one before it ended."""
    batches = _batches(plog.read(plog.log_start_offset, 1 << 24))
    return sum(1 for a, b in zip(batches, batches[1:], strict=False) if b[0] != a[1] + 1)


def _follower(path: Path, **config: object) -> PartitionReplica:
    topic_config = TopicConfig(**{"cleanup.policy": "compact", "segment.bytes": 500, "index.interval.bytes": 60,
                                  **config})
    plog = PartitionLog.open(path, topic_config, clock=Clock())
    partition = Partition(0, plog, PartitionFlusher(plog), PartitionProducerState(path))
    state = PartitionState(leader=1, leader_epoch=5, isr=(1, 2), controller_epoch=1, replicas=(1, 2))
    replica = PartitionReplica("t", partition, 2, state, 0)
    replica.become_follower(state)
    return replica


def _replicate(leader: PartitionLog, replica: PartitionReplica, max_bytes: int) -> int:
    """Fetch from the follower's log end as the fetcher does (``max_bytes`` per read, at least one batch), until
    it reaches the leader's log end; how many fetches."""
    fetches = 0
    while replica.partition.log.log_end_offset < leader.log_end_offset:
        fetches += 1
        assert fetches < 1000, "the follower does not advance"
        append_fetched(replica, leader.read(replica.partition.log.log_end_offset, max_bytes))
    return fetches


def test_a_follower_appends_a_cleaned_log_with_its_gaps_and_reads_like_the_leader(tmp_path: Path) -> None:
    leader = _cleaned_leader(tmp_path / "leader")
    assert _gaps(leader) >= 10  # the case: most batches were cleaned away
    replica = _follower(tmp_path / "follower")
    _replicate(leader, replica, max_bytes=150)
    follower = replica.partition.log
    assert follower.log_end_offset == leader.log_end_offset
    assert _batches(follower.read(0, 1 << 24)) == _batches(leader.read(0, 1 << 24))
    assert len(follower.segments) > 2  # its own segment boundaries, gaps at their ends and starts
    # Every offset, in a gap or not, reads the same batches on both (the offset index points within a gap)
    for offset in range(leader.log_end_offset):
        assert _batches(follower.read(offset, 200)) == _batches(leader.read(offset, 200)), offset
    # Each epoch starts at its first batch still there (the leader's entry may point into a gap, as in Kafka)
    firsts: dict[int, int] = {}
    for base, _, _, epoch in _batches(leader.read(0, 1 << 24)):
        firsts.setdefault(epoch, base)
    assert [(e.epoch, e.start_offset) for e in follower.leader_epochs.entries] == sorted(firsts.items()) == [
        (3, firsts[3]), (5, firsts[5])]
    # Reopened (recovery scans the active segment, checks the closed ones' indexes): the same log
    follower.close()
    reopened = PartitionLog.open(follower.directory, follower.config, clock=Clock())
    assert reopened.log_end_offset == leader.log_end_offset
    assert all(s.indexes_ok() for s in reopened.segments[:-1])
    assert _batches(reopened.read(0, 1 << 24)) == _batches(leader.read(0, 1 << 24))
    reopened.close()
    leader.close()


def test_one_batch_per_fetch_reaches_the_end_too(tmp_path: Path) -> None:
    leader = _cleaned_leader(tmp_path / "leader")
    replica = _follower(tmp_path / "follower", **{"segment.bytes": 10_000})
    fetches = _replicate(leader, replica, max_bytes=1)  # min one batch: one batch a fetch, each past a gap
    assert fetches == len(_batches(leader.read(0, 1 << 24)))
    assert _batches(replica.partition.log.read(0, 1 << 24)) == _batches(leader.read(0, 1 << 24))


def test_a_batch_beyond_the_segment_index_range_rolls_a_segment_at_its_own_offset(tmp_path: Path) -> None:
    replica = _follower(tmp_path / "follower")
    plog = replica.partition.log
    far = MAX_RELATIVE_OFFSET + 10
    for base in (far, 2 * far):  # the first into an empty active segment, the second into a written one
        batch = _keyed(b"k", b"v")
        set_base_offset(batch, 0, base)
        append_fetched(replica, bytes(batch))
        assert plog.active_segment.base_offset == base and plog.log_end_offset == base + 1
    assert [(h.base_offset, h.crc) for _, h in iter_batches(plog.read(far + 1, 1 << 20))] == [
        (2 * far, parse_header(batch).crc)]


def test_a_batch_overlapping_the_log_end_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    replica = _follower(tmp_path / "follower")
    plog = replica.partition.log
    first = _keyed(b"k", b"v", count=3)
    append_fetched(replica, bytes(first))
    overlapping = _keyed(b"k", b"w", count=3)
    set_base_offset(overlapping, 0, 2)  # offsets 2-4 against a log ending at 3
    with pytest.raises(ReplicationError, match="overlaps this log's end 3"):
        append_fetched(replica, bytes(overlapping))
    with pytest.raises(ValueError, match="begins before the log end"):
        plog.append_as_follower(overlapping, parse_header(overlapping))
    assert plog.log_end_offset == 3 and len(_batches(plog.read(0, 1 << 20))) == 1


def test_truncation_into_a_gap_then_fetching_again_gives_the_leaders_log(tmp_path: Path) -> None:
    leader = _cleaned_leader(tmp_path / "leader")
    replica = _follower(tmp_path / "follower")
    _replicate(leader, replica, max_bytes=400)
    batches = _batches(leader.read(0, 1 << 24))
    gap = next(b[0] - 1 for a, b in zip(batches[len(batches) // 2:], batches[len(batches) // 2 + 1:], strict=False)
               if b[0] > a[1] + 1)  # an offset inside a gap, halfway
    follower = replica.partition.log
    follower.truncate_to(gap)
    assert follower.log_end_offset == gap
    assert all(b[1] < gap for b in _batches(follower.read(0, 1 << 24)))
    _replicate(leader, replica, max_bytes=400)
    assert _batches(follower.read(0, 1 << 24)) == batches


def test_the_cleaner_of_a_cluster_replica_stops_at_its_high_watermark(tmp_path: Path) -> None:
    """Records above the high watermark may yet be truncated: cleaning an older record of their key away below
    it would lose a committed record (Kafka bounds the cleaner by the last stable offset, itself bounded by the
    high watermark)."""
    cluster = Cluster(BrokerConfig.model_validate({"log.dirs": str(tmp_path / "data")}))
    cluster.load()
    p = cluster.create_topic("c", 1, overrides={"cleanup.policy": "compact", "segment.bytes": "300",
                                                "min.cleanable.dirty.ratio": "0.01"}).partitions[0]
    for n in range(12):
        batch = _keyed(b"k", b"v%d" % n * 20)
        p.log.append(batch, parse_header(batch), 0)
    assert len(p.log.segments) > 3
    state = PartitionState(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1, replicas=(1, 2))
    p.replica = PartitionReplica("c", p, 1, state, 0)
    p.replica.become_leader(state, now_ms=T0)
    assert p.replica.high_watermark == 0  # the follower has not fetched
    housekeeping = LogHousekeeping(cluster, cluster.config)
    before = _batches(p.log.read(0, 1 << 24))
    assert asyncio.run(housekeeping.clean_logs()) == 0
    assert _batches(p.log.read(0, 1 << 24)) == before
    p.replica.follower_fetched(2, p.log.log_end_offset, T0)  # now committed: cleaned
    assert p.replica.high_watermark == p.log.log_end_offset
    assert asyncio.run(housekeeping.clean_logs()) == 1
    assert len(_batches(p.log.read(0, 1 << 24))) < len(before)
    cluster.close()
