"""Unit tests for headwater.broker.log: segments, indexes, recovery, retention."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from headwater.broker.config.broker_config import TopicConfig
from headwater.broker.log import LogClosed, LogSegment, OffsetOutOfRange, PartitionLog
from headwater.broker.log.leader_epochs import LEADER_EPOCH_CHECKPOINT_FILE
from headwater.broker.log.partition_log import LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE
from headwater.kafka.records import (
    Record,
    build_batch,
    crc_ok,
    decode_batch_records,
    iter_batches,
    parse_header,
    set_base_offset,
)


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def make_batch(n: int, ts: int | list[int] = 1000, value: bytes = b"v" * 20, tag: str = "") -> bytearray:
    stamps = ts if isinstance(ts, list) else [ts + i for i in range(n)]
    records = [
        Record(offset=i, timestamp=stamps[i], key=f"{tag}k{i}".encode(), value=value) for i in range(n)
    ]
    return bytearray(build_batch(records))


def append(log: PartitionLog, n: int, **kw) -> int:
    batch = make_batch(n, **kw)
    return log.append(batch, parse_header(batch))


def decode(data: bytes) -> list[Record]:
    out: list[Record] = []
    for pos, header in iter_batches(data):
        assert crc_ok(data, pos, header)
        out.extend(decode_batch_records(data, pos)[1])
    return out


def batch_bases(data: bytes) -> list[int]:
    return [h.base_offset for _, h in iter_batches(data)]


def cfg(**overrides) -> TopicConfig:
    return TopicConfig(**overrides)


def open_log(path: Path, clock: Clock | None = None, /, **overrides: Any) -> PartitionLog:
    return PartitionLog.open(path, cfg(**overrides), clock=clock)


def crash(log: PartitionLog) -> None:
    """Drop the log without flushing/sealing, as a crash would (page cache survives)."""
    for seg in log.segments:
        seg.close()
    log._closed = True


def active_log_file(path: Path) -> Path:
    return sorted(path.glob("*.log"))[-1]


# ---------------------------------------------------------------------------- append / read


def test_append_assigns_continuous_offsets_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert [append(log, n, tag=f"b{n}") for n in (5, 3, 7)] == [0, 5, 8]
    assert log.log_end_offset == 15
    assert log.unflushed_messages == 15
    data = log.read(0, 1 << 20)
    assert batch_bases(data) == [0, 5, 8]
    records = decode(data)
    assert [r.offset for r in records] == list(range(15))
    assert records[5].key == b"b3k0"
    assert len(data) == log.size_bytes
    log.close()


def test_append_accepts_bytes_and_modifies_bytearray_in_place(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, 2)
    batch = make_batch(2)
    assert log.append(batch, parse_header(batch)) == 2
    assert parse_header(batch).base_offset == 2
    raw = bytes(make_batch(1))
    assert log.append(raw, parse_header(raw)) == 4  # type: ignore[arg-type]
    assert decode(log.read(0, 1 << 20))[-1].offset == 4
    log.close()


def test_read_from_middle_of_batch_returns_containing_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for n in (5, 5, 5):
        append(log, n)
    assert batch_bases(log.read(7, 1 << 20)) == [5, 10]
    assert batch_bases(log.read(14, 1 << 20)) == [10]
    assert batch_bases(log.read(5, 1 << 20)) == [5, 10]
    log.close()


def test_read_max_bytes_and_min_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(4):
        append(log, 10)
    one = len(log.read(0, 1 << 20)) // 4
    assert batch_bases(log.read(0, 2 * one + one // 2)) == [0, 10]  # never a partial batch
    assert batch_bases(log.read(0, 2 * one)) == [0, 10]
    assert batch_bases(log.read(0, 10)) == [0]  # min_one: the first batch whole
    assert len(log.read(0, 10)) == one
    assert log.read(0, 10, min_one=False) == b""
    assert batch_bases(log.read(15, one, min_one=False)) == [10]
    log.close()


@pytest.mark.parametrize("interval", [0, 300, 4096])
def test_read_returns_the_largest_whole_batch_prefix(tmp_path: Path, interval: int) -> None:
    """For every byte budget and start offset, across two segments: exactly the whole batches that fit
    (the first one regardless with min_one), whatever index entries the cut is found from."""
    log = open_log(tmp_path / "t-0", index_interval_bytes=interval, segment_bytes=600)
    sizes = [1, 3, 2, 5, 1, 4, 2, 1, 3, 2]
    for n in sizes:
        append(log, n)
    assert len(log.segments) > 1
    whole = log.read(0, 1 << 20)
    batches = [(h.base_offset, h.size) for _, h in iter_batches(whole)]
    assert [b for b, _ in batches] == [sum(sizes[:i]) for i in range(len(sizes))]
    for first in range(len(batches)):
        offset = batches[first][0]
        for budget in range(1, len(whole) + 2, 7):
            got = batch_bases(log.read(offset, budget))
            fit, used = [], 0
            for base, size in batches[first:]:
                if used + size > budget:
                    break
                fit.append(base)
                used += size
            assert got == (fit or [offset]), (offset, budget)
            assert batch_bases(log.read(offset, budget, min_one=False)) == fit
    log.close()


def test_read_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.read(0, 100) == b""
    append(log, 3)
    assert log.read(3, 100) == b""
    with pytest.raises(OffsetOutOfRange) as info:
        log.read(4, 100)
    assert info.value.log_end_offset == 3
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    log.close()


# ---------------------------------------------------------------------------- rolling and indexes


def test_roll_by_size_and_reads_span_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=1000)
    size = len(make_batch(4))
    per_segment = 1000 // size
    for _ in range(10):
        append(log, 4)
    segs = log.segments
    assert len(segs) == -(-10 // per_segment)
    assert [s.base_offset for s in segs] == [i * 4 * per_segment for i in range(len(segs))]
    assert all(s.size <= 1000 for s in segs)
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))[1] == f"{4 * per_segment:020d}.log"
    assert [r.offset for r in decode(log.read(0, 1 << 20))] == list(range(40))
    assert batch_bases(log.read(4 * per_segment - 1, 3 * size)) == [
        4 * per_segment - 4,
        4 * per_segment,
        4 * per_segment + 4,
    ]
    log.close()


def test_oversized_batch_goes_alone_into_a_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=100)
    for _ in range(3):
        append(log, 5)  # each batch is bigger than segment.bytes
    assert [s.base_offset for s in log.segments] == [0, 5, 10]
    log.close()


def test_roll_by_segment_ms_never_rolls_empty_segment(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, segment_ms=1000)
    clock.now += 10_000  # an idle empty segment does not roll
    append(log, 2)
    clock.now += 1000
    append(log, 2)  # exactly segment.ms old: not yet
    assert len(log.segments) == 1
    clock.now += 1
    append(log, 2)
    assert [s.base_offset for s in log.segments] == [0, 4]
    clock.now += 500
    append(log, 2)
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.close()


def test_offset_index_is_sparse(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=1000)
    size = len(make_batch(3))
    for _ in range(30):
        append(log, 3)
    seg = log.segments[0]
    entries = seg.offset_index.entries()
    # an entry whenever more than 1000 bytes were appended since the last one (none for the first batch)
    every = 1000 // size + 1
    assert entries[0] == (3 * every, size * every)
    assert len(entries) == (30 - 1) // every
    assert all(pos == rel // 3 * size for rel, pos in entries)
    assert (tmp_path / "t-0" / f"{0:020d}.index").stat().st_size == 8 * len(entries)
    for offset in range(90):
        assert batch_bases(log.read(offset, 1))[0] == offset - offset % 3
    log.close()


def test_index_interval_zero_indexes_every_batch_but_the_first(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=0)
    for _ in range(5):
        append(log, 2)
    assert [rel for rel, _ in log.segments[0].offset_index.entries()] == [2, 4, 6, 8]
    log.close()


def test_reopen_keeps_offsets_and_data(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=600)
    for i in range(12):
        append(log, 3, ts=1000 + 10 * i)
    before = log.read(0, 1 << 20)
    segs = [s.base_offset for s in log.segments]
    index = log.segments[0].offset_index.entries()
    log.close()
    log = open_log(path, segment_bytes=600)
    assert (log.log_start_offset, log.log_end_offset) == (0, 36)
    assert [s.base_offset for s in log.segments] == segs
    assert log.segments[0].offset_index.entries() == index
    assert log.read(0, 1 << 20) == before
    assert log.offset_for_timestamp(1045) == (15, 1050)
    assert log.offset_for_timestamp(1052) == (17, 1052)
    assert append(log, 2) == 36
    log.close()


# ---------------------------------------------------------------------------- recovery


def _garbage(data: bytes) -> bytes:
    return data + os.urandom(37)


def _half_batch(data: bytes) -> bytes:
    return data + bytes(make_batch(4))[:60]


def _half_batch_short_header(data: bytes) -> bytes:
    return data + bytes(make_batch(4))[:30]


def _bad_crc_in_last(data: bytes) -> bytes:
    buf = bytearray(data)
    buf[-5] ^= 0xFF  # inside the last batch's records
    return bytes(buf)


@pytest.mark.parametrize(
    "damage,lost", [(_garbage, 0), (_half_batch, 0), (_half_batch_short_header, 0), (_bad_crc_in_last, 1)]
)
def test_recovery_truncates_torn_tail(tmp_path: Path, damage, lost: int) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, index_interval_bytes=100)
    for i in range(6):
        append(log, 4, ts=1000 + i)
    good = log.read(0, 1 << 20)
    last_batch = len(make_batch(4))
    log.close()
    seg_file = active_log_file(path)
    seg_file.write_bytes(damage(seg_file.read_bytes()))

    log = open_log(path, index_interval_bytes=100)
    kept = len(good) - lost * last_batch
    assert seg_file.stat().st_size == kept
    assert log.log_end_offset == 24 - 4 * lost
    assert log.read(0, 1 << 20) == good[:kept]
    assert append(log, 2) == 24 - 4 * lost
    assert [r.offset for r in decode(log.read(0, 1 << 20))] == list(range(26 - 4 * lost))
    # indexes rebuilt from the surviving batches only
    assert all(pos < kept for _, pos in log.segments[0].offset_index.entries())
    log.close()


def test_recovery_after_crash_without_close(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    for _ in range(10):
        append(log, 3)
    data = log.read(0, 1 << 20)
    crash(log)
    log = open_log(path, segment_bytes=500)
    assert log.log_end_offset == 30
    assert log.read(0, 1 << 20) == data
    log.close()


def test_torn_closed_segment_drops_later_segments(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    for _ in range(10):
        append(log, 3)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    crash(log)  # no recovery point: every segment is validated on open
    second = path / f"{bases[1]:020d}.log"
    data = second.read_bytes()
    second.write_bytes(data[:-10])
    log = open_log(path, segment_bytes=500)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert log.log_end_offset == bases[2] - 3
    assert not (path / f"{bases[2]:020d}.log").exists()
    assert append(log, 1) == bases[2] - 3
    log.close()


def test_closed_segments_before_recovery_point_are_not_rescanned(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    for _ in range(10):
        append(log, 3)
    log.close()
    assert int((path / RECOVERY_POINT_FILE).read_text()) == 30
    first = path / f"{0:020d}.log"
    first.write_bytes(first.read_bytes() + b"junk")  # would be truncated if it were recovered
    log = open_log(path, segment_bytes=500)
    assert first.stat().st_size == log.segments[0].size
    assert log.log_end_offset == 30
    log.close()


def test_stale_recovery_point_is_lowered_after_lost_tail(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    for _ in range(10):
        append(log, 3)
    log.close()
    last = active_log_file(path)
    last.write_bytes(last.read_bytes()[:-20])  # e.g. the disk lost unflushed data
    log = open_log(path, segment_bytes=500)
    assert log.log_end_offset == 27
    assert int((path / RECOVERY_POINT_FILE).read_text()) == 27
    log.close()


def test_start_offset_beyond_surviving_data_restarts_empty_there(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    for _ in range(4):
        append(log, 3)
    log.delete_records_before(12)
    log.close()
    last = active_log_file(path)
    last.write_bytes(last.read_bytes()[:-20])
    log = open_log(path)
    assert (log.log_start_offset, log.log_end_offset) == (12, 12)
    assert [s.base_offset for s in log.segments] == [12]
    assert append(log, 1) == 12
    log.close()


def test_closed_log_rejects_use(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, 1)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosed):
        append(log, 1)
    with pytest.raises(LogClosed):
        log.read(0, 100)


@pytest.mark.parametrize("damage", ["missing", "misaligned"])
def test_damaged_index_of_closed_segment_is_rebuilt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=2000, index_interval_bytes=200)
    for i in range(20):
        append(log, 3, ts=5000 + 3 * i)
    assert len(log.segments) >= 2
    entries = log.segments[0].offset_index.entries()
    times = log.segments[0].time_index.entries()
    assert entries and times
    data = log.read(0, 1 << 20)
    log.close()
    index = path / f"{0:020d}.index"
    timeindex = path / f"{0:020d}.timeindex"
    if damage == "missing":
        index.unlink()
        timeindex.unlink()
    else:
        with open(index, "ab") as f:
            f.write(b"xyz")
    log = open_log(path, segment_bytes=2000, index_interval_bytes=200)
    seg = log.segments[0]
    assert seg.offset_index.entries() == entries
    assert seg.time_index.entries() == times
    assert index.stat().st_size == 8 * len(entries)
    assert timeindex.stat().st_size == 12 * len(times)
    assert log.read(0, 1 << 20) == data
    assert log.offset_for_timestamp(5000 + 3 * 2 + 1) == (7, 5007)
    log.close()


def test_leftover_files_are_deleted_on_open(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, 2)
    log.close()
    for name in (f"{0:020d}.log.cleaned", f"{0:020d}.log.swap", "log-start-offset.tmp", f"{5:020d}.index"):
        (path / name).write_bytes(b"x")
    log = open_log(path)
    assert sorted(p.name for p in path.iterdir()) == sorted(
        [f"{0:020d}.log", f"{0:020d}.index", f"{0:020d}.timeindex", RECOVERY_POINT_FILE,
         LEADER_EPOCH_CHECKPOINT_FILE]  # written once, when missing, so later opens need not scan the batches
    )
    assert log.log_end_offset == 2
    log.close()


# ---------------------------------------------------------------------------- timestamps


def test_offset_for_timestamp_finds_exact_record(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, index_interval_bytes=50)
    # batch timestamps are not monotonic inside a batch
    append(log, 3, ts=[100, 300, 200])  # offsets 0..2
    append(log, 3, ts=[250, 260, 400])  # 3..5
    append(log, 3, ts=[500, 450, 600])  # 6..8
    append(log, 2, ts=[-1, -1])  # 9..10: no timestamp
    append(log, 3, ts=[700, 800, 900])  # 11..13
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(100) == (0, 100)
    assert log.offset_for_timestamp(101) == (1, 300)
    assert log.offset_for_timestamp(300) == (1, 300)
    assert log.offset_for_timestamp(301) == (5, 400)
    assert log.offset_for_timestamp(460) == (6, 500)
    assert log.offset_for_timestamp(501) == (8, 600)
    assert log.offset_for_timestamp(601) == (11, 700)
    assert log.offset_for_timestamp(850) == (13, 900)
    assert log.offset_for_timestamp(901) is None
    assert log.max_timestamp() == (900, 13)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(100) == (2, 200)
    log.close()


def test_max_timestamp_is_first_record_with_largest(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    assert log.max_timestamp() is None
    append(log, 3, ts=[10, 50, 20])
    append(log, 4, ts=[30, 90, 90, 40])  # offsets 3..6
    append(log, 2, ts=[90, 60])  # same max later: not chosen
    append(log, 2, ts=[70, 80])
    assert len(log.segments) > 1
    assert log.max_timestamp() == (90, 4)
    log.close()
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    assert log.max_timestamp() == (90, 4)
    log.close()


def test_offset_for_timestamp_many_batches_uses_time_index(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", index_interval_bytes=256)
    for i in range(200):
        append(log, 5, ts=10_000 + 5 * i)
    assert len(log.segments[0].time_index) > 10
    for target in (10_000, 10_001, 10_499, 10_995, 10_999):
        assert log.offset_for_timestamp(target) == (target - 10_000, target)
    assert log.offset_for_timestamp(11_000) is None
    assert log.max_timestamp() == (10_999, 999)
    log.close()


# ---------------------------------------------------------------------------- deletion


def test_delete_records_before(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=500)
    for _ in range(10):
        append(log, 3)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 1
    log.delete_records_before(target)
    assert log.log_start_offset == target
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert not (path / f"{0:020d}.log").exists()
    assert int((path / LOG_START_OFFSET_FILE).read_text()) == target
    with pytest.raises(OffsetOutOfRange):
        log.read(target - 1, 100)
    assert batch_bases(log.read(target, 100))[0] == bases[2]  # whole batch containing it
    log.delete_records_before(1)  # below the start: no-op
    assert log.log_start_offset == target
    with pytest.raises(ValueError):
        log.delete_records_before(31)
    log.close()
    log = open_log(path, segment_bytes=500)
    assert log.log_start_offset == target
    assert log.log_end_offset == 30
    log.delete_records_before(30)  # up to the end: the active segment stays, emptied of readable data
    assert log.read(30, 100) == b""
    assert append(log, 1) == 30
    log.close()


def test_retention_by_time_deletes_closed_segments_only(tmp_path: Path) -> None:
    clock = Clock(now=100_000)
    path = tmp_path / "t-0"
    log = open_log(path, clock, segment_bytes=400, retention_ms=10_000)
    for i in range(8):
        append(log, 3, ts=1000 * i)  # segments with old timestamps
    segs = log.segments
    assert len(segs) >= 3
    assert log.apply_retention(now_ms=100_000) == len(segs) - 1  # everything but the active
    assert log.segments == [segs[-1]]
    assert log.log_start_offset == segs[-1].base_offset
    assert int((path / LOG_START_OFFSET_FILE).read_text()) == segs[-1].base_offset
    assert segs[0].log_path.name.endswith(".log.deleted")  # file.delete.delay.ms: renamed, removed later
    assert log.delete_due(float("inf")) == len(segs) - 1 and not segs[0].log_path.exists()
    assert log.apply_retention(now_ms=100_000) == 0
    log.close()


def test_removed_segments_wait_file_delete_delay_ms(tmp_path: Path) -> None:
    at_once = open_log(tmp_path / "a-0", segment_bytes=400, file_delete_delay_ms=0)
    for _ in range(6):
        append(at_once, 3)
    first = at_once.segments[0]
    at_once.delete_records_before(at_once.segments[1].base_offset)
    assert not first.log_path.exists() and not list((tmp_path / "a-0").glob("*.deleted"))
    at_once.close()

    path = tmp_path / "d-0"
    log = open_log(path, segment_bytes=400, file_delete_delay_ms=60_000)
    for _ in range(6):
        append(log, 3)
    first = log.segments[0]
    log.delete_records_before(log.segments[1].base_offset)
    assert first.log_path.name.endswith(".log.deleted") and first.log_path.exists()
    assert {p.name.split(".", 1)[1] for p in path.glob(f"{first.base_offset:020d}.*")} == {
        "log.deleted", "index.deleted", "timeindex.deleted"}
    assert log.delete_due() == 0 and first.log_path.exists()  # not yet: 60 s
    assert log.delete_due(time.monotonic() + 61) == 1 and not list(path.glob("*.deleted"))
    log.delete_records_before(log.segments[1].base_offset)
    crash(log)  # a restart before the delay passed: recovery removes the leftovers
    reopened = open_log(path, segment_bytes=400, file_delete_delay_ms=60_000)
    assert not list(path.glob("*.deleted"))
    reopened.close()


def test_retention_by_time_keeps_recent_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_ms=10_000)
    for i in range(8):
        append(log, 3, ts=5_000 * i)
    segs = log.segments
    cutoff = segs[1].largest_timestamp + 10_000
    assert log.apply_retention(now_ms=cutoff + 1) == 2
    assert log.segments == segs[2:]
    assert log.log_start_offset == segs[2].base_offset
    assert log.apply_retention(now_ms=cutoff + 1) == 0
    forever = open_log(tmp_path / "t-1", segment_bytes=400, retention_ms=-1)
    for i in range(8):
        append(forever, 3, ts=i)
    assert forever.apply_retention(now_ms=10**15) == 0
    forever.close()
    log.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_bytes=1000, retention_ms=-1)
    for _ in range(12):
        append(log, 3)
    segs = log.segments
    sizes = [s.size for s in segs]
    deleted = log.apply_retention(now_ms=0)
    assert deleted > 0
    assert log.segments == segs[deleted:]
    # Kafka's rule: drop the oldest segment only while the log stays >= retention.bytes without it
    assert sum(sizes[deleted:]) - sizes[deleted] < 1000 <= sum(sizes[deleted:])
    assert log.log_start_offset == segs[deleted].base_offset
    assert log.read(log.log_start_offset, 1 << 20)
    log.close()


def test_retention_skipped_for_compact_only_topics(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400, retention_bytes=0, **{"cleanup.policy": "compact"})
    for _ in range(12):
        append(log, 3)
    assert log.apply_retention(now_ms=10**15) == 0
    log.close()


def test_update_config_applies_to_next_append(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for _ in range(3):
        append(log, 3)
    assert len(log.segments) == 1
    log.update_config(cfg(segment_bytes=100))
    append(log, 3)
    assert len(log.segments) == 2
    log.close()


def test_delete_removes_directory(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path)
    append(log, 2)
    log.delete()
    assert not path.exists()


# ---------------------------------------------------------------------------- flush


def test_flush_from_thread_while_appending(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = open_log(path, segment_bytes=2000)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(300):
            append(log, 4)
            if i % 50 == 49:
                log.delete_records_before(log.log_end_offset - 40)
    finally:
        stop.set()
        thread.join()
    assert not errors
    log.flush()
    assert log.unflushed_messages == 0
    assert int((path / RECOVERY_POINT_FILE).read_text()) == 1200
    assert [r.offset for r in decode(log.read(log.log_start_offset, 1 << 22))][-1] == 1199
    log.close()


def test_segment_lookup_and_read(tmp_path: Path) -> None:
    seg = LogSegment.create(tmp_path, 100, index_interval_bytes=0)
    positions = []
    for i in range(4):
        batch = make_batch(2, ts=10 * i)
        set_base_offset(batch, 0, 100 + 2 * i)  # the partition log does this on append
        positions.append(seg.append(batch, parse_header(batch), base_offset=100 + 2 * i))
    assert seg.next_offset == 108
    assert seg.find_batch(105) == (positions[2], seg.find_batch(104)[1])  # type: ignore[index]
    assert seg.find_batch(108) is None
    assert seg.largest_timestamp == 31
    header = parse_header(seg.read(positions[3], 1 << 10))
    assert header.base_offset == 106
    seg.truncate_to(positions[2])
    assert seg.size == positions[2]
    assert seg.next_offset == 104
    assert seg.largest_timestamp == 11
    seg.delete()
    assert not seg.log_path.exists()
