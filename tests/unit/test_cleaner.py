"""Unit tests for headwater.broker.log.cleaner: compaction of a PartitionLog, crash safety of the swap."""

from __future__ import annotations

import asyncio
import os
import struct
from collections.abc import Sequence
from pathlib import Path

import cramjam
import pytest
from crc32c import crc32c

from headwater.broker.config.broker_config import TopicConfig
from headwater.broker.log import PartitionLog
from headwater.broker.log.cleaner import (
    CHECKPOINT_FILE,
    CleanerAborted,
    CleanerCheckpoint,
    _commit,
    _run_pass,
    clean_partition,
    clean_partition_async,
    plan_cleaning,
    read_checkpoint,
)
from headwater.broker.log.recovery import CLEANER_SWAP_FILE
from headwater.broker.topics.producer_state import PartitionProducerState, replay
from headwater.kafka.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from headwater.kafka.records import (
    ATTR_CONTROL,
    HEADER_SIZE,
    Record,
    build_batch,
    crc_ok,
    decode_batch_records,
    iter_batches,
    parse_header,
)

T0 = 1_700_000_000_000  # ms; record timestamps and the cleaner's clock start here


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compact_log(path: Path, clock: Clock | None = None, /, **overrides: object) -> PartitionLog:
    props = {"cleanup.policy": "compact", "segment.bytes": 1024, **overrides}
    return PartitionLog.open(path, TopicConfig(**props), clock=clock or Clock())


def raw_snappy_batch(records: list[Record], **kw) -> bytes:
    """A snappy batch as librdkafka sends it: one raw block, no xerial framing."""
    plain = build_batch(records, **kw)
    header = parse_header(plain)
    payload = bytes(cramjam.snappy.compress_raw(plain[HEADER_SIZE:]))
    tail = bytearray(plain[21:HEADER_SIZE]) + payload
    struct.pack_into(">h", tail, 0, header.attributes | SNAPPY)
    head = struct.pack(">qiibI", header.base_offset, len(tail) + 9, header.partition_leader_epoch, 2, crc32c(tail))
    return head + bytes(tail)


def put(log: PartitionLog, items: Sequence[tuple[bytes | None, bytes | None]], *, codec: int = NONE,
        ts: int = T0, raw_snappy: bool = False, **kw) -> int:
    """Append one batch of (key, value) records; returns its base offset."""
    records = [Record(offset=i, timestamp=ts + i, key=k, value=v) for i, (k, v) in enumerate(items)]
    batch = bytearray(raw_snappy_batch(records, **kw) if raw_snappy else build_batch(records, codec=codec, **kw))
    return log.append(batch, parse_header(batch))


def checkpoint(log: PartitionLog) -> CleanerCheckpoint:
    """The log's cleaner checkpoint, which the test expects to be there."""
    found = read_checkpoint(log.directory)
    assert found is not None, "no cleaner checkpoint"
    return found


def read_all(log: PartitionLog) -> list[Record]:
    """Every record from the log start, as a consumer would see them (CRCs checked)."""
    out: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        if not data:
            break
        for pos, header in iter_batches(data):
            assert crc_ok(data, pos, header)
            out.extend(r for r in decode_batch_records(data, pos)[1] if r.offset >= offset)
            offset = header.last_offset + 1
    return out


def latest(records: list[Record]) -> dict[bytes | None, tuple[int, bytes | None]]:
    state: dict[bytes | None, tuple[int, bytes | None]] = {}
    for r in records:
        state[r.key] = (r.offset, r.value)
    return state


def fill(log: PartitionLog, rounds: int, keys: int = 10, per_batch: int = 4, codec: int = NONE,
         tag: str = "v") -> dict[bytes, tuple[int, bytes]]:
    """``rounds`` batches of updates cycling over ``keys`` keys; returns each key's latest (offset, value)."""
    expect: dict[bytes, tuple[int, bytes]] = {}
    n = 0
    for r in range(rounds):
        items = []
        for _ in range(per_batch):
            items.append((f"k{n % keys}".encode(), f"{tag}{r}-{n}".encode() * 3))
            n += 1
        base = put(log, items, codec=codec)
        for i, (k, v) in enumerate(items):
            expect[k] = (base + i, v)
    return expect


def closed_records(log: PartitionLog) -> list[Record]:
    end = log.active_segment.base_offset
    return [r for r in read_all(log) if r.offset < end]


# ---------------------------------------------------------------------------- basics


def test_newest_value_per_key_kept_and_offsets_preserved(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    expect = fill(log, 120)
    before = read_all(log)
    segments_before = len(log.segments)
    assert segments_before > 5

    result = clean_partition(log, T0)
    assert result is not None and result.committed
    after = read_all(log)
    assert latest(after) == latest(before) == {k: v for k, v in expect.items()}
    # Every surviving record is byte-for-byte one of the originals at its original offset.
    by_offset = {r.offset: r for r in before}
    for r in after:
        assert by_offset[r.offset] == r
    # Below the active segment, each key appears once.
    keys = [r.key for r in closed_records(log)]
    assert len(keys) == len(set(keys))
    assert len(log.segments) < segments_before
    assert result.records_kept < result.records_read
    assert checkpoint(log).first_dirty_offset == log.active_segment.base_offset

    log.close()
    log = compact_log(tmp_path / "t-0")
    assert read_all(log) == after
    log.close()


def test_reads_inside_removed_ranges_get_the_next_record(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    fill(log, 60)
    clean_partition(log, T0)
    survivors = [r.offset for r in read_all(log)]
    gaps = [o for o in range(log.log_start_offset, log.log_end_offset) if o not in survivors]
    assert gaps
    for offset in gaps[:: max(len(gaps) // 20, 1)]:
        data = log.read(offset, 1 << 20)
        first_after = next(o for o in survivors if o >= offset)
        records = [r for pos, _ in iter_batches(data) for r in decode_batch_records(data, pos)[1]]
        assert min(r.offset for r in records if r.offset >= offset) == first_after
    log.close()


def test_rebuilt_batch_keeps_header_fields_and_producer_state_replays(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    state = PartitionProducerState(log.directory)
    seq = 0
    for i in range(40):
        items = [(f"k{i % 3}".encode(), b"a" * 30), (f"u{i}".encode(), b"b" * 30)]
        records = [Record(offset=j, timestamp=T0 + j, key=k, value=v) for j, (k, v) in enumerate(items)]
        batch = bytearray(build_batch(records, producer_id=7, producer_epoch=2, base_sequence=seq,
                                      partition_leader_epoch=5))
        header = parse_header(batch)
        base = log.append(batch, header)
        state.update(header, base)
        seq += 2
    before = {h.base_offset: h for _, h in iter_batches(log.read(0, 1 << 24))}
    clean_partition(log, T0)
    data = log.read(0, 1 << 24)
    rebuilt = 0
    for _, h in iter_batches(data):
        orig = before[h.base_offset]
        assert (h.last_offset_delta, h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch,
                h.base_timestamp) == (orig.last_offset_delta, 7, 2, orig.base_sequence, 5, orig.base_timestamp)
        if h.record_count != orig.record_count:
            rebuilt += 1
            assert h.record_count == 1
    assert rebuilt > 30
    # The replayed state matches the live one: gaps do not confuse it.
    replayed = PartitionProducerState(log.directory)
    replay(replayed, log, 0)
    live_last = state.producers[7].batches[-1]
    assert replayed.producers[7].batches[-1] == live_last
    assert replayed.producers[7].last_seq == seq - 1
    log.close()


def test_records_without_key_are_kept(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    for i in range(40):
        put(log, [(b"k", b"x" * 40), (None, f"n{i}".encode())])
    put(log, [(b"k", b"last")])
    for _ in range(20):
        put(log, [(b"filler", b"f" * 60)])  # "last" leaves the active segment
    clean_partition(log, T0)
    records = read_all(log)
    assert [r.value for r in records if r.key is None] == [f"n{i}".encode() for i in range(40)]
    assert [r.value for r in records if r.key == b"k"] == [b"last"]
    log.close()


def test_control_batches_are_kept(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    fill(log, 20)
    marker = Record(offset=0, timestamp=T0, key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")
    put(log, [(marker.key, marker.value)], attributes=ATTR_CONTROL, producer_id=3, producer_epoch=0)
    fill(log, 20, tag="w")
    clean_partition(log, T0)
    control = [h for _, h in iter_batches(log.read(0, 1 << 24)) if h.is_control]
    assert len(control) == 1 and control[0].producer_id == 3
    log.close()


def test_active_segment_is_never_touched(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0", **{"segment.bytes": 100_000})
    fill(log, 50)  # everything in the active segment
    active = log.active_segment
    content = active.log_path.read_bytes()
    assert clean_partition(log, T0, force=True) is None  # no closed segment: nothing to clean
    log.close()

    log = compact_log(tmp_path / "t-1")
    fill(log, 80)
    active = log.active_segment
    content = active.log_path.read_bytes()
    mtime = active.log_path.stat().st_mtime_ns
    clean_partition(log, T0)
    assert log.active_segment is active
    assert active.log_path.read_bytes() == content
    assert active.log_path.stat().st_mtime_ns == mtime
    # Duplicates in the active segment stay until it is closed and cleaned.
    active_keys = [r.key for r in read_all(log) if r.offset >= active.base_offset]
    assert active.next_offset is not None
    assert len(active_keys) == active.next_offset - active.base_offset
    log.close()


def test_min_cleanable_dirty_ratio_is_honoured(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0", **{"min.cleanable.dirty.ratio": 0.5})
    fill(log, 100, keys=400)  # distinct keys: cleaning removes little
    assert clean_partition(log, T0) is not None  # all dirty: ratio 1.0
    segments = log.segments
    clean = sum(s.size for s in segments[:-1])
    # A little more data: dirty / (clean + dirty) stays below 0.5 -> no pass, nothing rewritten.
    while True:
        fill(log, 1, keys=400, tag="x")
        plan = plan_cleaning(log, T0)
        dirty = sum(s.size for s in log.segments[:-1]) - clean
        if dirty / (clean + dirty) >= 0.5:
            break
        assert plan is None
        assert clean_partition(log, T0) is None
        assert all(a is b for a, b in zip(log.segments, segments, strict=False))
    assert plan is not None and plan.dirty_ratio >= 0.5
    assert clean_partition(log, T0) is not None
    log.close()


def test_min_compaction_lag_keeps_recent_segments_dirty(tmp_path: Path) -> None:
    clock = Clock()
    log = compact_log(tmp_path / "t-0", clock, **{"min.compaction.lag.ms": 60_000})
    for i in range(30):
        put(log, [(b"a", f"old{i}".encode() * 10), (b"b", b"x" * 30)], ts=T0)
    boundary = log.log_end_offset
    for i in range(30):
        put(log, [(b"a", f"new{i}".encode() * 10), (b"b", b"y" * 30)], ts=T0 + 50_000)
    result = clean_partition(log, T0 + 70_000)  # first half is 70 s old, the second 20 s
    assert result is not None
    cut = result.end_offset
    assert cut <= boundary + 2
    below = [r for r in read_all(log) if r.offset < cut]
    assert [r.key for r in below].count(b"a") == 1  # the old half was compacted on its own
    above = [r for r in read_all(log) if r.offset >= cut]
    assert [r.key for r in above].count(b"a") >= 25  # the recent half was not touched
    log.close()


# ---------------------------------------------------------------------------- tombstones


def tombstone_log(path: Path, retention: int = 10_000) -> tuple[PartitionLog, set[bytes]]:
    log = compact_log(path, **{"delete.retention.ms": retention})
    fill(log, 40, keys=10)
    dead = {f"k{i}".encode() for i in range(5)}
    for key in sorted(dead):
        put(log, [(key, None)])
    for i in range(40):  # more updates of live keys push the tombstones out of the active segment
        put(log, [(f"k{5 + i % 5}".encode(), f"late{i}".encode() * 10)])
    return log, dead


def test_tombstones_kept_then_removed_after_delete_retention(tmp_path: Path) -> None:
    log, dead = tombstone_log(tmp_path / "t-0")
    assert clean_partition(log, T0) is not None
    records = closed_records(log)
    assert {r.key for r in records if r.value is None} == dead  # kept: consumers must see the deletes
    assert not [r for r in records if r.key in dead and r.value is not None]
    assert set(checkpoint(log).tombstone_segments)

    # Not due yet: no pass is planned, and a forced one keeps them.
    assert plan_cleaning(log, T0 + 9_999) is None
    clean_partition(log, T0 + 9_999, force=True)
    assert {r.key for r in closed_records(log) if r.value is None} == dead

    # delete.retention.ms after the pass that cleaned them: a pass is due and drops them.
    assert plan_cleaning(log, T0 + 10_000) is not None
    result = clean_partition(log, T0 + 10_000)
    assert result is not None and result.tombstones_dropped == len(dead)
    records = read_all(log)
    assert not [r for r in records if r.key in dead]
    assert {r.key for r in records} == {f"k{i}".encode() for i in range(5, 10)}
    assert checkpoint(log).tombstone_segments == []
    log.close()


def test_tombstone_countdown_survives_later_passes_and_merges(tmp_path: Path) -> None:
    log, dead = tombstone_log(tmp_path / "t-0")
    clean_partition(log, T0)
    # New tombstones 5 s later, cleaned in a later pass: the first ones keep their countdown.
    fill(log, 40, keys=10, tag="z")
    for key in (b"k5", b"k6"):
        put(log, [(key, None)])
    for i in range(40):
        put(log, [(f"k{7 + i % 3}".encode(), f"later{i}".encode() * 10)])
    assert clean_partition(log, T0 + 5_000) is not None
    tomb = {r.key for r in closed_records(log) if r.value is None}
    assert tomb == {b"k5", b"k6"}  # k0-k4 were re-written (new values) so they are live again

    log2, dead2 = tombstone_log(tmp_path / "t-1")
    clean_partition(log2, T0)
    for i in range(60):  # new data without tombstones, cleaned at T0 + 5 s, merges with the old
        put(log2, [(f"k{5 + i % 5}".encode(), f"again{i}".encode() * 10)])
    clean_partition(log2, T0 + 5_000, force=True)
    assert {r.key for r in closed_records(log2) if r.value is None} == dead2
    clean_partition(log2, T0 + 10_000)  # the first countdown is over: merging did not restart it
    assert not [r for r in read_all(log2) if r.key in dead2]
    log.close()
    log2.close()


def test_zero_delete_retention_drops_tombstones_on_the_next_pass(tmp_path: Path) -> None:
    log, dead = tombstone_log(tmp_path / "t-0", retention=0)
    clean_partition(log, T0)
    assert {r.key for r in closed_records(log) if r.value is None} == dead
    assert clean_partition(log, T0) is not None  # due at once
    assert not [r for r in read_all(log) if r.key in dead]
    log.close()


# ---------------------------------------------------------------------------- codecs


@pytest.mark.parametrize(
    "codec,raw",
    [(NONE, False), (GZIP, False), (SNAPPY, False), (SNAPPY, True), (LZ4, False), (ZSTD, False)],
    ids=["none", "gzip", "snappy-xerial", "snappy-raw", "lz4", "zstd"],
)
def test_every_codec(tmp_path: Path, codec: int, raw: bool) -> None:
    log = compact_log(tmp_path / "t-0", **{"segment.bytes": 2048})
    expect: dict[bytes, tuple[int, bytes]] = {}
    for r in range(150):
        # A hot key (superseded later) next to a unique one: most batches lose some records only.
        keys = [f"hot{r % 5}", f"u{r}", f"hot{(r + 2) % 5}"] if r % 4 else [f"u{r}a", f"u{r}b", f"u{r}c"]
        items = [(key.encode(), f"value-{r}-{i}-".encode() * 8) for i, key in enumerate(keys)]
        base = put(log, items, codec=codec, raw_snappy=raw)
        for i, (k, v) in enumerate(items):
            expect[k] = (base + i, v)
    originals = {h.base_offset: (h, bytes(log.read(h.base_offset, h.size)[: h.size]))
                 for _, h in iter_batches(log.read(0, 1 << 24))}
    result = clean_partition(log, T0)
    assert result is not None and result.records_kept < result.records_read
    data = log.read(0, 1 << 24)
    rewritten = 0
    for pos, h in iter_batches(data):
        assert h.codec == codec
        assert crc_ok(data, pos, h)
        orig_header, orig_bytes = originals[h.base_offset]
        if h.record_count == orig_header.record_count:
            assert data[pos : pos + h.size] == orig_bytes  # untouched batches are copied as they were
        else:
            rewritten += 1
            if codec == SNAPPY:
                assert data[pos + HEADER_SIZE : pos + HEADER_SIZE + 8] == b"\x82SNAPPY\x00"
    assert rewritten
    assert latest(read_all(log)) == expect
    log.close()
    log = compact_log(tmp_path / "t-0", **{"segment.bytes": 2048})
    assert latest(read_all(log)) == expect
    log.close()


# ---------------------------------------------------------------------------- grouping


def test_small_cleaned_segments_are_grouped_up_to_segment_bytes(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0", **{"segment.bytes": 4096})
    expect = fill(log, 400, keys=30, per_batch=3)
    n_before = len(log.segments)
    clean_partition(log, T0)
    closed = log.segments[:-1]
    assert len(closed) < n_before / 5
    assert all(s.size <= 4096 for s in closed)
    assert latest(read_all(log)) == expect
    # Segments stay contiguous: each base is the end of the previous one's range.
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    log.close()


def test_group_output_never_exceeds_segment_bytes(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0", **{"segment.bytes": 1500})
    expect = fill(log, 300, keys=10_000, per_batch=3)  # nothing to remove: outputs as large as inputs
    clean_partition(log, T0)
    assert all(s.size <= 1500 for s in log.segments)
    assert latest(read_all(log)) == expect
    log.close()


# ---------------------------------------------------------------------------- crash safety


def reopen(path: Path, **overrides) -> PartitionLog:
    return compact_log(path, **overrides)


def crash(log: PartitionLog) -> None:
    for seg in log.segments:
        seg.close()
    log._closed = True


def test_leftover_cleaned_files_are_discarded(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = compact_log(path)
    expect = fill(log, 60)
    plan = plan_cleaning(log, T0)
    assert plan is not None
    work, swaps, end = _run_pass(log, plan, 1000)
    # A crash before the marker: rename the swaps back to .cleaned and drop the marker.
    for group in swaps:
        group.output.change_suffix(".cleaned")
    (path / CLEANER_SWAP_FILE).unlink()
    crash(log)
    assert list(path.glob("*.cleaned"))
    log = reopen(path)
    assert not list(path.glob("*.cleaned")) and not list(path.glob("*.swap"))
    records = read_all(log)
    assert latest(records) == expect
    assert len(records) == log.log_end_offset  # nothing was removed: the originals are back
    log.close()


def test_swap_without_marker_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = compact_log(path)
    expect = fill(log, 60)
    plan = plan_cleaning(log, T0)
    assert plan is not None
    work, swaps, end = _run_pass(log, plan, 1000)
    (path / CLEANER_SWAP_FILE).unlink()  # the crash came before the marker was durable
    crash(log)
    log = reopen(path)
    records = read_all(log)
    assert latest(records) == expect and len(records) == log.log_end_offset
    assert not list(path.glob("*.swap"))
    log.close()


@pytest.mark.parametrize("renamed", [0, 1, 3, "all"])
def test_committed_swap_is_finished_on_open(tmp_path: Path, renamed: int | str) -> None:
    """Crash after the marker, with ``renamed`` originals already moved to ``.deleted``
    ("all": also the swap renamed into place, only the leftovers remain)."""
    path = tmp_path / "t-0"
    log = compact_log(path)
    expect = fill(log, 80)
    n_before = len(log.segments)
    plan = plan_cleaning(log, T0)
    assert plan is not None
    work, swaps, end = _run_pass(log, plan, 1000)
    assert (path / CLEANER_SWAP_FILE).exists() and list(path.glob("*.log.swap"))
    originals = [seg for group in swaps for seg in group.originals]
    if renamed == "all":
        for group in swaps:
            for seg in group.originals:
                seg.change_suffix(".deleted")
            group.output.change_suffix("")
    else:
        assert isinstance(renamed, int)
        for seg in originals[:renamed]:
            seg.change_suffix(".deleted")
    crash(log)
    log = reopen(path)
    assert not (path / CLEANER_SWAP_FILE).exists()
    assert not [p for p in path.iterdir() if p.name.endswith((".swap", ".deleted", ".cleaned"))]
    assert len(log.segments) < n_before
    records = read_all(log)
    assert latest(records) == expect
    keys = [r.key for r in records if r.offset < log.active_segment.base_offset]
    assert len(keys) == len(set(keys))
    log.close()


def test_crash_between_swap_and_checkpoint_is_safe(tmp_path: Path) -> None:
    """The swap finished but the checkpoint was not advanced: the next pass treats the cleaned
    segments as dirty again (tombstones get a fresh countdown, never an early removal)."""
    path = tmp_path / "t-0"
    log, dead = tombstone_log(path, retention=10_000)
    plan = plan_cleaning(log, T0)
    assert plan is not None
    work, swaps, end = _run_pass(log, plan, 1000)
    crash(log)
    log = reopen(path, **{"delete.retention.ms": 10_000})
    assert read_checkpoint(path) is None
    clean_partition(log, T0 + 20_000)
    assert {r.key for r in closed_records(log) if r.value is None} == dead
    log.close()


def test_stale_marker_blocks_cleaning_until_reopen(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = compact_log(path)
    expect = fill(log, 60)
    plan = plan_cleaning(log, T0)
    assert plan is not None
    _run_pass(log, plan, 1000)  # as if the commit on the event loop never ran
    with pytest.raises(RuntimeError, match="did not complete"):
        clean_partition(log, T0, force=True)
    assert latest(read_all(log)) == expect
    log.close()
    log = reopen(path)
    assert latest(read_all(log)) == expect
    assert clean_partition(log, T0, force=True) is not None
    log.close()


# ---------------------------------------------------------------------------- concurrency


def test_appends_and_reads_continue_while_cleaning_in_a_thread(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    expect = fill(log, 300, keys=50)

    async def scenario() -> None:
        task = asyncio.create_task(clean_partition_async(log, T0))
        n = 0
        while not task.done():
            base = put(log, [(b"live", f"{n}".encode())])
            expect[b"live"] = (base, f"{n}".encode())
            assert log.read(0, 4096)
            n += 1
            await asyncio.sleep(0)
        result = await task
        assert result is not None and result.committed

    asyncio.run(scenario())
    assert latest(read_all(log)) == expect
    log.close()
    log = compact_log(tmp_path / "t-0")
    assert latest(read_all(log)) == expect
    log.close()


def test_retention_during_a_pass_rolls_back_the_touched_groups(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = compact_log(path, **{"cleanup.policy": "compact,delete", "retention.ms": 1000})
    fill(log, 40)
    put(log, [(b"newer", b"x" * 30)] * 3, ts=T0 + 10_000)
    expect = fill(log, 40, tag="w")
    plan = plan_cleaning(log, T0)
    assert plan is not None
    work, swaps, end = _run_pass(log, plan, 1000)
    assert log.apply_retention(T0 + 5_000) > 0  # deletes the oldest segments meanwhile
    result = _commit(log, plan, work, swaps, end, 0.0)
    assert not result.committed
    assert not (path / CLEANER_SWAP_FILE).exists()
    assert not list(path.glob("*.swap"))
    assert read_checkpoint(path) is None  # not advanced: the next pass starts over
    state = latest(read_all(log))
    assert all(state[k] == v for k, v in expect.items())
    log.close()
    log = compact_log(path, **{"cleanup.policy": "compact,delete", "retention.ms": 1000})
    assert latest(read_all(log)) == state
    log.close()


def test_compact_delete_applies_both(tmp_path: Path) -> None:
    clock = Clock()
    log = compact_log(tmp_path / "t-0", clock, **{"cleanup.policy": "compact,delete", "retention.ms": 60_000,
                                                   "segment.ms": 50_000})
    for i in range(40):
        put(log, [(f"old{i % 4}".encode(), b"o" * 40)], ts=T0)
    clock.now = T0 + 100_000  # segment.ms: the new records start a new segment
    for i in range(40):
        put(log, [(f"new{i % 4}".encode(), b"n" * 40)], ts=T0 + 100_000)
    put(log, [(b"tail", b"t")], ts=T0 + 100_000)
    # Retention removes the old segments, compaction the duplicates of what is left.
    assert log.apply_retention(T0 + 100_000) > 0
    start = log.log_start_offset
    assert start > 0
    assert clean_partition(log, T0 + 100_000) is not None
    records = read_all(log)
    assert not [r for r in records if (r.key or b"").startswith(b"old")]
    keys = [r.key for r in closed_records(log)]
    assert len(keys) == len(set(keys)) == 4
    assert log.log_start_offset == start  # compaction never moves the log start
    # Later, the cleaned segment ages out as a whole.
    assert log.apply_retention(T0 + 200_000) > 0
    assert len(log.segments) == 1 and log.log_start_offset == log.active_segment.base_offset
    log.close()


def test_close_stops_a_running_pass(tmp_path: Path) -> None:
    path = tmp_path / "t-0"
    log = compact_log(path)
    expect = fill(log, 400, keys=50)

    async def scenario() -> None:
        task = asyncio.create_task(clean_partition_async(log, T0))
        await asyncio.sleep(0)  # the worker thread has started (or is about to)
        log.close()
        with pytest.raises(CleanerAborted):
            await task

    asyncio.run(scenario())
    assert not [p for p in path.iterdir() if p.name.endswith((".swap", ".cleaned", ".deleted"))]
    assert not (path / CLEANER_SWAP_FILE).exists()
    log = compact_log(path)
    assert latest(read_all(log)) == expect
    log.close()


def test_non_compacted_topic_is_not_cleaned(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0", **{"cleanup.policy": "delete"})
    fill(log, 60)
    assert clean_partition(log, T0, force=True) is None
    assert not (log.directory / CHECKPOINT_FILE).exists()
    log.close()


def test_map_capacity_limits_a_pass_to_whole_segments(tmp_path: Path) -> None:
    log = compact_log(tmp_path / "t-0")
    expect = fill(log, 200, keys=5000)  # every key distinct
    result = clean_partition(log, T0, map_capacity=50)
    assert result is not None
    first = checkpoint(log).first_dirty_offset
    assert 0 < first < log.active_segment.base_offset
    assert first in {s.base_offset for s in log.segments}
    while (result := clean_partition(log, T0, map_capacity=50)) is not None:
        pass
    assert latest(read_all(log)) == expect
    log.close()


def test_segment_mtime_is_the_tombstone_clock(tmp_path: Path) -> None:
    log, dead = tombstone_log(tmp_path / "t-0")
    clean_partition(log, T0 + 1234)
    stamps = {s.base_offset: s.last_modified_ms() for s in log.segments[:-1]}
    hinted = checkpoint(log).tombstone_segments
    assert hinted and all(stamps[b] == T0 + 1234 for b in hinted)
    assert all(os.stat(s.log_path).st_mtime_ns // 1_000_000 == T0 + 1234 for s in log.segments[:-1])
    log.close()
