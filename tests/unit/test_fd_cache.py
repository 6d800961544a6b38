"""The broker's bounded cache of open segment files (broker/log/fd_cache.py) under partition logs: more
segments than descriptors, written, read (old segments too), flushed from a worker thread, compacted,
closed and recovered, with the open descriptors of the process counted."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from headwater.broker.config.broker_config import TopicConfig
from headwater.broker.log import PartitionLog
from headwater.broker.log.cleaner import clean_partition_async
from headwater.broker.log.fd_cache import DescriptorCache
from headwater.kafka.records import Record, build_batch, decode_batch_records, iter_batches, parse_header

CAPACITY = 12  # four segments' files
PARTITIONS = 30
T0 = 1_700_000_000_000


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _append(plog: PartitionLog, key: bytes, value: bytes, ts: int = T0) -> int:
    batch = bytearray(build_batch([Record(offset=0, timestamp=ts, key=key, value=value)]))
    return plog.append(batch, parse_header(batch))


def _values(plog: PartitionLog, offset: int = 0) -> list[bytes | None]:
    out: list[bytes | None] = []
    for data, pos, _header in plog.batches_from(offset):
        out.extend(r.value for r in decode_batch_records(data, pos)[1])
    return out


def _open_all(root: Path, cache: DescriptorCache, **props: object) -> list[PartitionLog]:
    config = TopicConfig(**{"segment.bytes": 400, "index.interval.bytes": 100, **props})
    return [PartitionLog.open(root / f"t-{i}", config, fd_cache=cache) for i in range(PARTITIONS)]


def test_more_segments_than_descriptors_are_written_read_flushed_and_recovered(tmp_path: Path) -> None:
    cache = DescriptorCache(CAPACITY)
    before = _fds()
    logs = _open_all(tmp_path, cache)
    for rnd in range(12):  # ~90 bytes a batch, 400-byte segments: each log rolls into several segments
        for i, plog in enumerate(logs):
            _append(plog, b"k", f"p{i}-r{rnd}".encode())
            assert cache.open_files <= CAPACITY
    assert sum(len(p.segments) for p in logs) >= 3 * PARTITIONS
    assert _fds() - before <= CAPACITY
    assert cache.evictions > 0
    # Old segments of every partition, read from the start and from the middle (index lookups), reopen.
    for i, plog in enumerate(logs):
        assert _values(plog) == [f"p{i}-r{r}".encode() for r in range(12)]
        assert _values(plog, 7) == [f"p{i}-r{r}".encode() for r in range(7, 12)]
        assert plog.offset_for_timestamp(T0) == (0, T0)
    assert _fds() - before <= CAPACITY
    # A flush on a worker thread reopens the segments the cache closed, as the housekeeping's does.
    threads = [threading.Thread(target=plog.flush) for plog in logs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(plog.unflushed_messages == 0 for plog in logs)
    for plog in logs:
        plog.close()
    assert cache.open_files == 0 and _fds() == before
    reopened = _open_all(tmp_path, cache)
    assert _fds() - before <= CAPACITY
    for i, plog in enumerate(reopened):
        assert plog.log_end_offset == 12
        _append(plog, b"k", b"after")
        assert _values(plog)[-2:] == [f"p{i}-r11".encode(), b"after"]
    for plog in reopened:
        plog.close()
    assert _fds() == before


def test_the_cleaner_compacts_segments_the_cache_closed(tmp_path: Path) -> None:
    cache = DescriptorCache(CAPACITY)
    logs = _open_all(tmp_path, cache, **{"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.01})
    for rnd in range(12):
        for plog in logs:
            _append(plog, f"k{rnd % 3}".encode(), f"r{rnd}".encode())

    async def clean() -> None:  # the map and rewrite on a worker thread, the swap on this one
        for plog in logs:
            assert await clean_partition_async(plog, T0 + 60_000, force=True) is not None

    asyncio.run(clean())
    assert cache.open_files <= CAPACITY
    for plog in logs:
        values = _values(plog)
        assert values[-3:] == [b"r9", b"r10", b"r11"] and len(values) < 12
        plog.close()
    assert cache.open_files == 0


def test_retention_removes_segments_whose_files_the_cache_closed(tmp_path: Path) -> None:
    cache = DescriptorCache(CAPACITY)
    logs = _open_all(tmp_path, cache, **{"retention.bytes": 100, "file.delete.delay.ms": 0})
    for rnd in range(12):
        for plog in logs:
            _append(plog, b"k", f"r{rnd}".encode())
    for plog in logs:
        assert plog.apply_retention(T0) > 0
        assert plog.log_start_offset > 0
        assert _values(plog, plog.log_start_offset)[-1] == b"r11"
        assert len(list(plog.directory.glob("*.log"))) == len(plog.segments)
        plog.close()
    assert cache.open_files == 0


@pytest.mark.parametrize("capacity", [0, 2])
def test_a_cache_too_small_for_one_segment_is_refused(capacity: int) -> None:
    with pytest.raises(ValueError, match="log.open.files.max"):
        DescriptorCache(capacity)


def test_batches_yielded_across_reopens_stay_whole(tmp_path: Path) -> None:
    """A reader walking one segment's batches while other segments open (and evict it) keeps reading it."""
    cache = DescriptorCache(3)  # one segment at a time
    config = TopicConfig(**{"segment.bytes": 10_000})
    a = PartitionLog.open(tmp_path / "a-0", config, fd_cache=cache)
    b = PartitionLog.open(tmp_path / "b-0", config, fd_cache=cache)
    for n in range(50):
        _append(a, b"k", f"a{n}".encode())
    seen = 0
    for n, (_pos, header) in enumerate(a.active_segment.batches(chunk=200)):
        _append(b, b"k", f"b{n}".encode())  # opens b's segment: a's closes
        assert header.base_offset == n
        seen += 1
    assert seen == 50 and not a.active_segment.files_open
    assert [h.base_offset for _, h in iter_batches(a.read(0, 1 << 20))] == list(range(50))
    a.close()
    b.close()
