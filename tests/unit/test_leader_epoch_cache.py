"""The leader-epoch cache (broker/log/leader_epochs.py) against Kafka's LeaderEpochFileCache rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.broker.log.leader_epochs import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
    batch_leader_epoch,
    stamp_leader_epoch,
)
from headwater.kafka.records import Record, build_batch, crc_ok, parse_header

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def cache_with(tmp_path: Path, entries: list[tuple[int, int]], log_end: int = 40) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path, lambda: log_end)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


def test_end_offset_for_follows_kafka(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(2, 10), (4, 20), (6, 30)], log_end=40)
    assert cache.end_offset_for(UNDEFINED_EPOCH) == UNDEFINED  # undefined epoch
    assert cache.end_offset_for(1) == (1, 10)  # below the first epoch: itself and the first start
    assert cache.end_offset_for(2) == (2, 20)  # an exact epoch: the next epoch's start
    assert cache.end_offset_for(4) == (4, 30)
    assert cache.end_offset_for(3) == (2, 20)  # between epochs: the one before and the next start
    assert cache.end_offset_for(5) == (4, 30)
    assert cache.end_offset_for(6) == (6, 40)  # the latest epoch: the log end offset
    assert cache.end_offset_for(7) == UNDEFINED  # above every epoch
    assert LeaderEpochCache(tmp_path / "empty", lambda: 5).end_offset_for(0) == UNDEFINED


def test_assign_keeps_both_columns_increasing(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(2, 10), (4, 20)])
    cache.assign(4, 25)  # the latest epoch again, later: nothing changes
    cache.assign(3, 30)  # an epoch older than the latest: the entries it conflicts with give way (Kafka)
    assert cache.entries == [EpochEntry(2, 10), EpochEntry(3, 30)]
    cache.assign(5, 40)
    cache.assign(6, 40)  # a new epoch at the same offset replaces the empty one
    assert cache.entries == [(2, 10), (3, 30), (6, 40)]
    cache.assign(6, 35)  # the latest epoch starting earlier moves back
    assert cache.entries == [(2, 10), (3, 30), (6, 35)]
    assert cache.latest_epoch == 6 and cache.latest == 6
    with pytest.raises(ValueError, match="must be >= 0"):
        cache.assign(-1, 3)


def test_truncations(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(2, 10), (4, 20), (6, 30)])
    cache.truncate_from_start(15)  # the epoch holding the new log start now starts there
    assert cache.entries == [(2, 15), (4, 20), (6, 30)]
    cache.truncate_from_start(20)  # an entry starting exactly there stays
    assert cache.entries == [(4, 20), (6, 30)]
    cache.truncate_from_end(31)
    assert cache.entries == [(4, 20), (6, 30)]
    cache.truncate_from_end(30)  # entries starting at or after the end go
    assert cache.entries == [(4, 20)]
    assert cache.latest == 4
    cache.truncate_from_end(0)
    assert cache.entries == [] and cache.latest_epoch is None and cache.latest == UNDEFINED_EPOCH


def test_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, [(0, 0), (3, 17)])
    path = tmp_path / LEADER_EPOCH_CHECKPOINT_FILE
    assert path.read_text() == "0\n2\n0 0\n3 17\n"
    assert LeaderEpochCache.read_checkpoint(path) == [(0, 0), (3, 17)]
    cache.truncate_from_end(17)
    assert path.read_text() == "0\n1\n0 0\n"
    assert not list(tmp_path.glob("*.tmp"))
    for bad in ("1\n0\n", "0\n2\n0 0\n", "0\n1\nx y\n", "0\n2\n3 5\n2 9\n", ""):
        path.write_text(bad)
        assert LeaderEpochCache.read_checkpoint(path) is None, bad
    path.unlink()
    assert LeaderEpochCache.read_checkpoint(path) is None


def test_stamp_leader_epoch_leaves_the_crc_valid() -> None:
    batch = bytearray(build_batch([Record(0, 1000, b"k", b"v")]))
    assert batch_leader_epoch(batch) == -1
    stamp_leader_epoch(batch, 7)
    header = parse_header(batch)
    assert header.partition_leader_epoch == 7 == batch_leader_epoch(batch)
    assert crc_ok(batch, 0, header)
