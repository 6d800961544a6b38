"""Log compaction (``cleanup.policy`` containing ``compact``), as Kafka's log cleaner does it.

A pass over one partition:

1. **Plan** (event-loop thread). The closed segments are split at the *first dirty offset*
   (the cleaner checkpoint, ``cleaner-checkpoint`` in the partition directory): segments
   below it were cleaned before. The dirty part ends at the active segment, or earlier at the
   first dirty segment holding records newer than ``min.compaction.lag.ms``. A pass runs when
   dirty bytes / (clean + dirty bytes) >= ``min.cleanable.dirty.ratio``, when a dirty segment's
   first batch is older than ``max.compaction.lag.ms``, or when a cleaned segment holds tombstones
   whose ``delete.retention.ms`` has run out.
2. **Map and rewrite** (a worker thread, inside ``PartitionLog.cleaning()``). An offset map
   key -> latest offset is built over the dirty segments, then every closed segment from the
   log head to the end of the mapped range is rewritten, keeping a record when it has no key,
   or when its offset is the latest for its key, unless it is a tombstone (null value) in a
   segment cleaned more than ``delete.retention.ms`` ago. A batch keeps its base offset, last
   offset delta, producer id/epoch, base sequence, attributes and base timestamp (as Kafka's
   v2 cleaner does, so offsets and sequence ranges survive and producer state replays alike);
   the kept records' bytes are spliced unchanged and re-compressed with the batch's codec.
   Untouched batches are copied byte for byte; a batch left without records disappears; control
   batches are kept. Consecutive segments are grouped into one output while it stays within
   ``segment.bytes``, so the segment count shrinks.
3. **Swap.** Each group is written to ``<base>.log.cleaned`` (+ ``.index.cleaned``,
   ``.timeindex.cleaned``), its mtime set, fsynced, renamed to ``.swap``; the directory is
   fsynced and the swap marker ``cleaner-swap`` (the groups' base and end offsets) is written
   atomically: that is the commit point. Then, on the event loop, ``replace_segments`` renames
   the originals ``.deleted``, the ``.swap`` files to their final names, fsyncs the directory
   and unlinks the originals; the marker is removed and the checkpoint advanced. On open,
   recovery.finish_swaps completes any swap its marker lists and discards unmarked
   ``.swap``/``.cleaned`` files: an original is never removed before its replacement is durable.

Tombstone clock: a rewritten segment's mtime is the time its tombstones' countdown began --
the pass that first cleaned them. Groups only merge segments whose countdowns agree, so
merging never restarts a countdown, and a segment kept as is keeps its mtime.

Transactions, as Kafka's cleaner: nothing at or past the last stable offset is cleaned (the caller passes it
as ``uncleanable_from``), so an open transaction's records never shadow older ones; the data batches of
aborted transactions (found in the segments' aborted-transaction indexes) take no part in the offset map
and are dropped; a commit or abort marker goes once nothing of its transaction's data is left and
delete.retention.ms has passed, counted like a tombstone's (a transactional offsets topic would otherwise
grow by a marker per transaction forever); a rewritten segment takes over its originals' aborted-index
entries but those of the abort markers it dropped (a reader given an entry without its marker would drop
the producer's later transactions too).

Known limits: an idempotent producer's batch whose records all go disappears with its header (Kafka keeps
an empty one), so the broker snapshots producer state before a pass (see Cluster.clean_logs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.kafka.compression import NONE, compress, decompress
from headwater.kafka.records import (
    ATTR_LOG_APPEND_TIME,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    InvalidBatch,
    assemble_batch,
    crc_ok,
    parse_header,
)
from headwater.kafka.types import DecodeError, read_varint

from ..config.topic_configs import LONG_MAX
from .control import read_marker
from .errors import LogClosed
from .recovery import CLEANER_SWAP_FILE, fsync_dir
from .segment import MAX_RELATIVE_OFFSET, LogSegment
from .validator import decompressed_limit

if TYPE_CHECKING:
    from ..config.broker_config import TopicConfig
    from .partition_log import PartitionLog

__all__ = [
    "CHECKPOINT_FILE",
    "CleanResult",
    "CleanerAborted",
    "CleanerCheckpoint",
    "clean_partition",
    "clean_partition_async",
    "plan_cleaning",
    "read_checkpoint",
]

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-checkpoint"
DEFAULT_MAP_CAPACITY = 2_000_000  # keys per pass (Python dict entries, ~150 bytes each)
_READ_CHUNK = 4 << 20
_MAX_OUTPUT_BYTES = 2**31 - 1 - (1 << 20)  # index positions are int32; leave room for recompression


class CleanerAborted(Exception):
    """The log was closed or deleted while a pass was running; nothing was changed."""


# ---------------------------------------------------------------------------------- checkpoint


@dataclass
class CleanerCheckpoint:
    """Per-partition cleaner state: everything below ``first_dirty_offset`` was cleaned;
    ``tombstone_segments`` lists the base offsets of cleaned segments still holding tombstones
    (a hint to schedule the pass that drops them once ``delete.retention.ms`` has passed)."""

    first_dirty_offset: int
    tombstone_segments: list[int] = field(default_factory=list)


def read_checkpoint(directory: Path) -> CleanerCheckpoint | None:
    try:
        data = json.loads((Path(directory) / CHECKPOINT_FILE).read_text())
        return CleanerCheckpoint(int(data["first_dirty_offset"]), [int(b) for b in data["tombstone_segments"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_json_atomically(path: Path, data: object) -> None:
    """tmp (named ``.tmp`` so recovery deletes a leftover) + fsync + rename + fsync dir."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(data).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_checkpoint(directory: Path, checkpoint: CleanerCheckpoint) -> None:
    _write_json_atomically(
        Path(directory) / CHECKPOINT_FILE,
        {"first_dirty_offset": checkpoint.first_dirty_offset,
         "tombstone_segments": sorted(checkpoint.tombstone_segments)},
    )


# ---------------------------------------------------------------------------------- plan


@dataclass
class _Plan:
    segments: list[LogSegment]  # closed segments from the log head to the cleanable end
    ends: list[int]  # end offset of each (the next segment's base offset)
    first_dirty: int
    cleanable_end: int
    clean_bytes: int
    dirty_bytes: int
    config: TopicConfig
    now_ms: int
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # producer id -> (first, marker)

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def plan_cleaning(plog: PartitionLog, now_ms: int, *, force: bool = False,
                  uncleanable_from: int | None = None) -> _Plan | None:
    """What a pass over ``plog`` would clean now, or None when it need not run (not compacted,
    nothing dirty enough, no tombstone due). ``force`` ignores min.cleanable.dirty.ratio; nothing from the
    segment holding ``uncleanable_from`` (the last stable offset) on is cleaned."""
    config = plog.config
    if not config.compact:
        return None
    segments = plog.segments
    closed = segments[:-1]
    if not closed:
        return None
    bases = [s.base_offset for s in segments]
    start = plog.log_start_offset
    checkpoint = read_checkpoint(plog.directory)
    first_dirty = start
    if checkpoint is not None and checkpoint.first_dirty_offset <= plog.log_end_offset:
        first_dirty = max(checkpoint.first_dirty_offset, start)
    # The dirty part ends at the active segment, or at the first dirty segment with records
    # newer than min.compaction.lag.ms (Kafka uses the segment's largest timestamp).
    cleanable_end = segments[-1].base_offset
    if uncleanable_from is not None:
        cleanable_end = min(cleanable_end, bases[max(bisect_right(bases, uncleanable_from) - 1, 0)])
    lag = config.min_compaction_lag_ms
    if lag > 0:
        for i, seg in enumerate(closed):
            if bases[i + 1] > first_dirty and seg.retention_timestamp() > now_ms - lag:
                cleanable_end = seg.base_offset
                break
    n = sum(1 for i in range(len(closed)) if bases[i + 1] <= cleanable_end)
    plan_segments, ends = closed[:n], bases[1 : n + 1]
    if not plan_segments:
        return None
    clean_bytes = sum(s.size for s, end in zip(plan_segments, ends, strict=True) if end <= first_dirty)
    dirty_bytes = sum(s.size for s, end in zip(plan_segments, ends, strict=True) if end > first_dirty)
    aborted: dict[int, list[tuple[int, int]]] = {}
    for seg in segments:  # a transaction's marker may lie past the cleanable end, its data before it
        for txn in seg.txn_index.entries:
            aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    plan = _Plan(plan_segments, ends, first_dirty, cleanable_end, clean_bytes, dirty_bytes, config, now_ms,
                 aborted)
    if force or (dirty_bytes > 0 and plan.dirty_ratio >= config.min_cleanable_dirty_ratio):
        return plan
    if dirty_bytes > 0 and _past_max_compaction_lag(plan):
        return plan
    if checkpoint is not None and checkpoint.tombstone_segments:
        horizon = now_ms - config.delete_retention_ms
        due = set(checkpoint.tombstone_segments)
        for seg, end in zip(plan_segments, ends, strict=True):
            if seg.base_offset in due and end <= first_dirty and seg.last_modified_ms() <= horizon:
                return plan
    return None


def _past_max_compaction_lag(plan: _Plan) -> bool:
    """Kafka's LogCleanerManager.maxCompactionDelay > 0: the earliest first-batch timestamp of a dirty
    segment is older than max.compaction.lag.ms, so the partition is cleaned whatever its dirty ratio."""
    lag = plan.config.max_compaction_lag_ms
    if lag >= LONG_MAX:
        return False
    stamps = []
    for seg, end in zip(plan.segments, plan.ends, strict=True):
        if end > plan.first_dirty and seg.size >= HEADER_SIZE:
            stamp = parse_header(seg.read(0, HEADER_SIZE)).max_timestamp
            if stamp > 0:
                stamps.append(stamp)
    return bool(stamps) and min(stamps) < plan.now_ms - lag


# ---------------------------------------------------------------------------------- records


def _scan_records(data: bytes, count: int) -> list[tuple[int, int, int, int, bytes | None, bool]]:
    """``(start, end, offset delta, timestamp delta, key, value is null)`` of each record.

    The hot loop of the cleaner: one-byte varints (most deltas and small lengths) are decoded
    inline, longer ones by the codec's ``read_varint``.
    """
    out: list[tuple[int, int, int, int, bytes | None, bool]] = []
    append = out.append
    p = 0
    n = len(data)
    try:
        for _ in range(count):
            b = data[p]
            if b < 0x80:
                length, q = (b >> 1) ^ -(b & 1), p + 1
            elif data[p + 1] < 0x80:  # two bytes: records of 64 bytes to 8 KiB
                v = (b & 0x7F) | (data[p + 1] << 7)
                length, q = (v >> 1) ^ -(v & 1), p + 2
            else:
                length, q = read_varint(data, p)
            end = q + length
            if length < 0 or end > n:
                raise InvalidBatch("record length runs past the end of the batch", corrupt=False)
            q += 1  # the record attributes byte
            b = data[q]
            if b < 0x80:
                ts_delta, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                ts_delta, q = read_varint(data, q)
            b = data[q]
            if b < 0x80:
                off_delta, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                off_delta, q = read_varint(data, q)
            b = data[q]
            if b < 0x80:
                key_len, q = (b >> 1) ^ -(b & 1), q + 1
            else:
                key_len, q = read_varint(data, q)
            key = None
            if key_len >= 0:
                key = data[q : q + key_len]
                q += key_len
            # Only the sign of the value length matters: -1 (a tombstone) is the one-byte 0x01.
            if q >= end:
                raise InvalidBatch("record fields run past the record length", corrupt=False)
            append((p, end, off_delta, ts_delta, key, data[q] == 1))
            p = end
    except (IndexError, DecodeError):
        raise InvalidBatch("record runs past the end of the batch", corrupt=False) from None
    return out


def _records_payload(header: BatchHeader, batch: bytes, max_decompressed: int) -> bytes:
    payload = batch[HEADER_SIZE : header.size]
    return decompress(header.codec, payload, max_decompressed) if header.codec != NONE else payload


def _iter_batches(seg: LogSegment, abort: Callable[[], bool]) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of a closed segment with its bytes, read in large chunks (on the cleaner's thread, through
    ``seg.reading``: the descriptor cache may close the segment's files meanwhile, see fd_cache.py)."""
    with seg.reading() as read:
        yield from _read_batches(seg, read, abort)


def _read_batches(seg: LogSegment, read: Callable[[int, int], bytes],
                  abort: Callable[[], bool]) -> Iterator[tuple[BatchHeader, bytes]]:
    pos, size = 0, seg.size
    while pos < size:
        buf = read(pos, _READ_CHUNK)
        used = 0
        while used + HEADER_SIZE <= len(buf):
            if abort():  # close()/delete() wait for this: check often
                raise CleanerAborted
            header = parse_header(buf, used)
            if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
                raise InvalidBatch(f"{seg.log_path}: bad batch length at position {pos + used}")
            if used + header.size > len(buf):
                break
            yield header, buf[used : used + header.size]
            used += header.size
        if used == 0:  # one batch larger than the chunk
            if len(buf) < HEADER_SIZE:
                raise InvalidBatch(f"{seg.log_path}: truncated batch at position {pos}")
            header = parse_header(buf)
            batch = read(pos, header.size)
            if len(batch) < header.size:
                raise InvalidBatch(f"{seg.log_path}: truncated batch at position {pos}")
            yield header, batch
            used = header.size
        pos += used


# ---------------------------------------------------------------------------------- result


@dataclass
class CleanResult:
    """What one pass did (sizes in bytes, times in seconds)."""

    first_dirty_offset: int
    end_offset: int  # the new first dirty offset
    dirty_ratio: float
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_read: int = 0
    records_kept: int = 0
    tombstones_dropped: int = 0
    markers_dropped: int = 0
    map_keys: int = 0
    seconds: float = 0.0
    committed: bool = True  # False if retention removed segments meanwhile (that part was not swapped)

    @property
    def mb_per_s(self) -> float:
        return self.bytes_before / 1e6 / self.seconds if self.seconds else 0.0


class _Group:
    """One output segment replacing a run of consecutive original segments."""

    def __init__(self, directory: Path, base: int, interval: int) -> None:
        self.base = base
        self.output = LogSegment.create(directory, base, interval, suffix=".cleaned")
        self.originals: list[LogSegment] = []
        self.end = base
        self.timer: int | None = None  # when the countdown of its kept tombstones began
        self.changed = False
        self.all_clean = True  # every original was cleaned before this pass

    @property
    def needs_swap(self) -> bool:
        # A lone original that came out unchanged stays, unless it was dirty: its rewrite is
        # fsynced and stamped with this pass's time (the countdown of its tombstones).
        return len(self.originals) > 1 or self.changed or not self.all_clean


class _Pass:
    """The map-and-rewrite phase; runs in a worker thread inside ``plog.cleaning()``."""

    def __init__(self, plog: PartitionLog, plan: _Plan, map_capacity: int) -> None:
        self.plog = plog
        self.max_decompressed = decompressed_limit(plog.config.max_message_bytes)  # past it the pass fails, logged
        self.plan = plan
        self.map_capacity = map_capacity
        self.directory = plog.directory
        config = plan.config
        self.interval = config.index_interval_bytes
        self.limit = min(config.segment_bytes, _MAX_OUTPUT_BYTES)
        self.horizon = plan.now_ms - config.delete_retention_ms
        self.offset_map: dict[bytes, int] = {}
        self.groups: list[_Group] = []
        # producer id -> whether its current transaction kept any data, while the segments are walked in order
        self.txn_kept: dict[int, bool] = {}
        self.dropped_aborts: set[tuple[int, int]] = set()  # (producer id, marker offset)
        self.result = CleanResult(plan.first_dirty, plan.first_dirty, plan.dirty_ratio, 0, 0, 0, 0)

    def abort(self) -> bool:
        return self.plog.clean_aborted

    def _aborted(self, header: BatchHeader) -> bool:
        """A data batch of a transaction that was aborted (the cleaner drops it, as Kafka's does)."""
        if not header.is_transactional:
            return False
        base = header.base_offset
        return any(first <= base <= last for first, last in self.plan.aborted.get(header.producer_id, ()))

    # -- phase 1: the offset map over the dirty segments
    def build_map(self) -> int:
        """Map keys to their latest offset; returns the end of the mapped range."""
        plan = self.plan
        offset_map = self.offset_map
        end = plan.first_dirty
        mapped_any = False
        for seg, seg_end in zip(plan.segments, plan.ends, strict=True):
            if seg_end <= plan.first_dirty:
                continue
            if mapped_any and len(offset_map) >= self.map_capacity:
                break  # the rest waits for the next pass (Kafka: the dedupe buffer is full)
            for header, batch in _iter_batches(seg, self.abort):
                if header.is_control or self._aborted(header):
                    continue
                base = header.base_offset
                for _, _, off_delta, _, key, _ in _scan_records(_records_payload(header, batch, self.max_decompressed),
                                                                 header.record_count):
                    if key is not None:
                        offset_map[key] = base + off_delta
            end = seg_end
            mapped_any = True
        self.result.map_keys = len(offset_map)
        return end

    # -- phase 2: rewrite
    def clean(self, end: int) -> None:
        plan = self.plan
        group: _Group | None = None
        for seg, seg_end in zip(plan.segments, plan.ends, strict=True):
            if seg_end > end:
                break
            clean_before = seg_end <= plan.first_dirty
            started = seg.last_modified_ms() if clean_before else plan.now_ms
            drop_tombstones = clean_before and started <= self.horizon
            if group is None or seg_end - 1 - group.base > MAX_RELATIVE_OFFSET:
                group = self._new_group(seg.base_offset)
            mark = group.output.size
            changed, tombstones = self._clean_segment(seg, group.output, drop_tombstones)
            timer = started if tombstones else None
            fits = group.output.size <= self.limit and (
                group.timer is None or timer is None or group.timer == timer
            )
            if mark and not fits:  # start a new group with this segment's output
                moved = self._new_group(seg.base_offset)
                for pos, header in group.output.batches(mark):
                    moved.output.append(group.output.read(pos, header.size), header)
                group.output.truncate_to(mark)
                group = moved
            group.originals.append(seg)
            group.end = seg_end
            group.changed = group.changed or changed
            group.all_clean = group.all_clean and clean_before
            if timer is not None:
                group.timer = timer
        if group is not None and not group.output.size and len(self.groups) > 1:
            # Everything in the last group went: its range joins the previous output.
            prev = self.groups[-2]
            prev.originals += group.originals
            prev.end = group.end
            prev.changed = True
            group.output.delete()
            self.groups.pop()

    def _new_group(self, base: int) -> _Group:
        group = _Group(self.directory, base, self.interval)
        self.groups.append(group)
        return group

    def _clean_segment(self, seg: LogSegment, out: LogSegment, drop_tombstones: bool) -> tuple[bool, int]:
        """Append ``seg``'s surviving batches to ``out``; returns (anything removed, tombstones kept)."""
        offset_map = self.offset_map
        result = self.result
        changed = False
        tombstones_kept = 0
        for header, batch in _iter_batches(seg, self.abort):
            if not crc_ok(batch, 0, header):
                raise InvalidBatch(f"{seg.log_path}: batch at offset {header.base_offset} fails its CRC")
            if header.is_control and header.record_count > 0 and header.producer_id >= 0:
                if not self.txn_kept.pop(header.producer_id, False):  # its transaction left no data
                    if drop_tombstones:
                        if not read_marker(batch).commit:
                            self.dropped_aborts.add((header.producer_id, header.base_offset))
                        result.markers_dropped += 1
                        changed = True
                        continue
                    tombstones_kept += 1  # its countdown runs like a tombstone's
                out.append(batch, header)
                continue
            if header.is_control or header.record_count <= 0:
                out.append(batch, header)
                continue
            if self._aborted(header):
                result.records_read += header.record_count
                self.txn_kept.setdefault(header.producer_id, False)
                changed = True
                continue
            data = _records_payload(header, batch, self.max_decompressed)
            records = _scan_records(data, header.record_count)
            base = header.base_offset
            kept = []
            for rec in records:
                _, _, off_delta, _, key, is_null = rec
                if key is not None and base + off_delta < offset_map.get(key, -1):
                    continue  # a newer record of this key follows
                if is_null and key is not None:
                    if drop_tombstones:
                        result.tombstones_dropped += 1
                        continue
                    tombstones_kept += 1
                kept.append(rec)
            result.records_read += len(records)
            result.records_kept += len(kept)
            if header.is_transactional:
                self.txn_kept[header.producer_id] = self.txn_kept.get(header.producer_id, False) or bool(kept)
            if len(kept) == len(records):
                out.append(batch, header)  # byte for byte: keeps the producer's own encoding
                continue
            changed = True
            if kept:
                rebuilt = _rebuild_batch(header, data, kept)
                out.append(rebuilt, parse_header(rebuilt))
        return changed, tombstones_kept

    # -- phase 3: make the outputs durable and commit the swap on disk
    def write_swaps(self) -> list[_Group]:
        swaps: list[_Group] = []
        for group in self.groups:
            out = group.output
            if not group.needs_swap:
                out.delete()
                continue
            out.seal()
            out.txn_index.reset(txn for seg in group.originals for txn in seg.txn_index.entries
                                if (txn.producer_id, txn.last_offset) not in self.dropped_aborts)
            out.set_last_modified(group.timer if group.timer is not None else self.plan.now_ms)
            out.flush()
            swaps.append(group)
        if not swaps:
            return swaps
        for group in swaps:
            group.output.change_suffix(".swap")
        fsync_dir(self.directory)
        _write_json_atomically(self.directory / CLEANER_SWAP_FILE,
                               {"groups": [[g.base, g.end] for g in swaps]})
        return swaps

    def discard(self) -> None:
        """Drop every output (whatever its suffix by now), then a marker this pass may have written:
        the originals were not touched yet, so they stay the log."""
        for group in self.groups:
            group.output.delete()
        (self.directory / CLEANER_SWAP_FILE).unlink(missing_ok=True)


def _rebuild_batch(header: BatchHeader, data: bytes,
                   kept: list[tuple[int, int, int, int, bytes | None, bool]]) -> bytes:
    """The batch with only the ``kept`` records: same base offset, last offset delta, base
    timestamp, producer fields and attributes; record bytes spliced as they were (their offset
    and timestamp deltas stay valid); max timestamp recomputed; re-compressed with the same codec."""
    body = b"".join(data[start:end] for start, end, *_ in kept)
    payload = compress(header.codec, body) if header.codec != NONE else body
    if header.attributes & ATTR_LOG_APPEND_TIME:
        max_ts = header.max_timestamp
    else:
        max_ts = header.base_timestamp + max(ts_delta for _, _, _, ts_delta, _, _ in kept)
    return assemble_batch(header._replace(max_timestamp=max_ts, record_count=len(kept)), payload)


# ---------------------------------------------------------------------------------- entry points


def _run_pass(plog: PartitionLog, plan: _Plan, map_capacity: int) -> tuple[_Pass, list[_Group], int]:
    """Phases 1-3 (thread-safe against the event loop); the on-disk swap is committed on return."""
    if (plog.directory / CLEANER_SWAP_FILE).exists():
        raise RuntimeError(
            f"{plog.directory}: an earlier cleaner swap did not complete; it is finished when the log reopens"
        )
    work = _Pass(plog, plan, map_capacity)
    try:
        with plog.cleaning():
            end = work.build_map()
            work.clean(end)
            swaps = work.write_swaps()
    except LogClosed:
        work.discard()
        raise CleanerAborted from None
    except BaseException:
        work.discard()
        raise
    return work, swaps, end


def _commit(plog: PartitionLog, plan: _Plan, work: _Pass, swaps: list[_Group], end: int, started: float) -> CleanResult:
    """Swap the cleaned segments in (event-loop thread) and advance the checkpoint."""
    result = work.result
    before = plan.segments[: sum(1 for e in plan.ends if e <= end)]
    result.segments_before = len(before)
    result.bytes_before = sum(s.size for s in before)
    committed = True
    for group in swaps:
        if not plog.replace_segments(group.originals, group.output):
            group.output.delete()
            committed = False
    if swaps:
        # Every listed swap is done or rolled back; an exception above leaves the marker for recovery.
        try:
            (plog.directory / CLEANER_SWAP_FILE).unlink(missing_ok=True)
            fsync_dir(plog.directory)
        except FileNotFoundError:
            raise CleanerAborted from None  # the log was deleted meanwhile
    if not committed and plog.clean_aborted:
        raise CleanerAborted  # closed or deleted before the swap: everything was rolled back
    result.segments_after = len(work.groups)
    result.bytes_after = sum(g.output.size if g.needs_swap else g.originals[0].size for g in work.groups)
    result.committed = committed
    if committed:
        # Kept-as-is groups hold their original; swapped ones their output (same base offset).
        tombstones = [g.base for g in work.groups if g.timer is not None]
        write_checkpoint(plog.directory, CleanerCheckpoint(end, tombstones))
        result.end_offset = end
    result.seconds = time.perf_counter() - started
    return result


def clean_partition(
    plog: PartitionLog, now_ms: int, *, force: bool = False, map_capacity: int = DEFAULT_MAP_CAPACITY,
    uncleanable_from: int | None = None,
) -> CleanResult | None:
    """Run one cleaner pass over ``plog`` synchronously, if due (see ``plan_cleaning``)."""
    started = time.perf_counter()
    plan = plan_cleaning(plog, now_ms, force=force, uncleanable_from=uncleanable_from)
    if plan is None:
        return None
    work, swaps, end = _run_pass(plog, plan, map_capacity)
    return _commit(plog, plan, work, swaps, end, started)


async def clean_partition_async(
    plog: PartitionLog, now_ms: int, *, force: bool = False, map_capacity: int = DEFAULT_MAP_CAPACITY,
    before_pass: Callable[[], None] | None = None, uncleanable_from: int | None = None,
) -> CleanResult | None:
    """``clean_partition`` for the event loop: the map and rewrite run in a worker thread while
    the log keeps serving appends and reads; the swap happens back on the loop. ``before_pass``
    is called (on the loop) once a pass is decided, before anything is rewritten."""
    started = time.perf_counter()
    plan = plan_cleaning(plog, now_ms, force=force, uncleanable_from=uncleanable_from)
    if plan is None:
        return None
    if before_pass is not None:
        before_pass()
    work, swaps, end = await asyncio.to_thread(_run_pass, plog, plan, map_capacity)
    return _commit(plog, plan, work, swaps, end, started)
