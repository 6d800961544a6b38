"""The durable log of one partition: a directory of segments, append/read/flush/retention.

Threading: appends, reads and retention run on the event-loop thread; ``flush`` may run on
a worker thread. ``_lock`` only guards the segment list and flush bookkeeping and is held
for microseconds (never across an fsync), so the append path never waits on a flush; it
is not taken by ``append`` at all unless the segment rolls. ``_flush_lock`` serialises
flushes (and ``close``). A segment deleted while a flush may be fsyncing it is unlinked at
once but its descriptors are closed by that flush when it finishes.

Compaction (cleaner.py) reads closed segments inside a ``cleaning()`` session, possibly on a
worker thread: segments removed meanwhile (retention, DeleteRecords) also keep their
descriptors until the session ends, and ``close``/``delete`` ask the session to stop and wait
for it. The cleaned segments are swapped in by ``replace_segments`` on the event-loop thread.

Segment files open on demand through the broker's DescriptorCache (fd_cache.py) when one is given: the
flush and the cleaner pin the segments they use; removed segments they may still read are held open.
"""

from __future__ import annotations

import random
import shutil
import struct
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from headwater.kafka.records import HEADER_SIZE, BatchHeader, decode_batch_records, iter_batches, set_base_offset

from ..config.broker_config import TopicConfig
from .errors import LogClosed, OffsetOutOfRange
from .fd_cache import DescriptorCache
from .leader_epochs import LeaderEpochCache
from .recovery import (
    LOG_START_OFFSET_FILE,
    RECOVERY_POINT_FILE,
    fsync_dir,
    read_offset_file,
    recover_leader_epochs,
    recover_segments,
    write_offset_file,
)
from .segment import MAX_RELATIVE_OFFSET, LogSegment
from .txn_index import AbortedTxn, collect_aborted

__all__ = ["LOG_START_OFFSET_FILE", "RECOVERY_POINT_FILE", "OffsetOutOfRange", "PartitionLog"]

_MAX_SEGMENT_BYTES = 2**31 - 1  # index positions are int32
_EPOCH = struct.Struct(">i")  # a batch's partitionLeaderEpoch, bytes 12-15


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    """Segments ``<base:020d>.log/.index/.timeindex`` in one directory, offsets assigned on append."""

    def __init__(
        self,
        directory: Path,
        config: TopicConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        log_end_offset: int,
        clock: Callable[[], int],
        fd_cache: DescriptorCache | None = None,
    ) -> None:
        self.directory = directory
        self._fd_cache = fd_cache
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._active = segments[-1]
        self._log_start_offset = log_start_offset
        self._log_end_offset = log_end_offset
        self._clock = clock
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._unflushed_segments: list[LogSegment] = []  # rolled since the last flush
        self._pending_close: list[LogSegment] = []
        self._doomed: list[tuple[float, LogSegment]] = []  # (monotonic due time, segment renamed .deleted)
        self._flushing = False
        self._cleaning = False  # a cleaner session may be reading closed segments (any thread)
        self._clean_lock = threading.Lock()  # held for a whole cleaner session
        self._clean_abort = False  # set by close()/delete(): the cleaner stops at its next check
        self._dir_dirty = False
        # Two single-writer counters instead of one shared one: no lock on the append path.
        self._appended_records = 0  # written by the appending thread only
        self._flushed_records = 0  # written by the flushing thread only
        self._flushed_end = -1  # log end offset covered by the last completed flush
        self._last_flush_ms = clock()
        self._closed = False
        self._roll_jitter_ms = 0  # the active segment's share of segment.jitter.ms
        # Where each leader epoch begins (leader_epochs.py); open() loads it, every append keeps it current.
        self.leader_epochs = LeaderEpochCache(directory, lambda: self._log_end_offset)
        self.update_config(config)

    # ------------------------------------------------------------------ open / recovery
    @classmethod
    def open(
        cls, directory: Path, config: TopicConfig, *, clock: Callable[[], int] | None = None,
        fd_cache: DescriptorCache | None = None,
    ) -> PartitionLog:
        """Open (creating if missing) and recover the log in ``directory`` (see recovery.py); with
        ``fd_cache`` its segment files open on demand within the cache's bound."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        clock = clock or _now_ms
        segments, start, log_end, recovery_point, scanned_from = recover_segments(
            directory, config.index_interval_bytes, fd_cache)
        log = cls(directory, config, segments, start, log_end, clock, fd_cache)
        try:
            recover_leader_epochs(log.leader_epochs, segments, scanned_from, start)
        except BaseException:
            for seg in segments:
                seg.close()
            raise
        if recovery_point == log_end:
            log._flushed_end = log_end  # all durable already: flushes and the close skip it until it grows
        active = segments[-1]
        now = clock()
        if active.size and (active.rolling_base_ms is None or active.rolling_base_ms > now):
            active.rolling_base_ms = now
        return log

    # ------------------------------------------------------------------ properties
    def update_config(self, config: TopicConfig) -> None:
        self.config = config
        self._segment_bytes = min(config.segment_bytes, _MAX_SEGMENT_BYTES)
        self._segment_ms = config.max_segment_ms
        # segment.index.bytes bounds each index (8-byte offset entries, 12-byte time entries), as in Kafka
        self._max_offset_entries = config.segment_index_bytes // 8
        self._max_time_entries = config.segment_index_bytes // 12
        # An index entry needs a batch, a batch at least a header: below this size no index can be full.
        self._index_full_floor = min(self._max_offset_entries, self._max_time_entries) * HEADER_SIZE
        self._active.index_interval_bytes = config.index_interval_bytes
        if config.segment_jitter_ms and not self._roll_jitter_ms:
            self._roll_jitter_ms = self._random_jitter()

    def _random_jitter(self) -> int:
        """Kafka's LogConfig.randomSegmentJitter, drawn once per segment: segments of many partitions
        created together then do not all roll at the same moment."""
        jitter = self.config.segment_jitter_ms
        return random.randrange(min(jitter, self.config.segment_ms)) if jitter > 0 else 0

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def unflushed_messages(self) -> int:
        return self._appended_records - self._flushed_records

    @property
    def last_flush_ms(self) -> int:
        """Clock time of the last completed flush (or of open), for flush.ms scheduling."""
        return self._last_flush_ms

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._active

    # ------------------------------------------------------------------ append
    def append(self, batch: bytearray, header: BatchHeader, leader_epoch: int | None = None) -> int:
        """Append one validated v2 batch, assigning offsets from the log end; returns its base offset.

        ``batch`` is modified in place (its baseOffset field, and given ``leader_epoch`` -- a leader's append --
        its partitionLeaderEpoch). A new epoch is recorded in ``leader_epochs``. Header-only work: no record
        parsing.
        """
        return self._append(self._log_end_offset, batch, header, leader_epoch)

    def append_as_follower(self, batch: bytearray, header: BatchHeader) -> int:
        """Append one of the leader's batches with its offsets and partition leader epoch as they are (Kafka's
        UnifiedLog.appendAsFollower); returns its base offset. The batch may begin past the log end -- the leader's
        cleaner removed the batches between (a compacted log's offset gaps) -- but never before it (ValueError:
        the logs diverged). The log then ends after the batch's last offset."""
        if header.base_offset < self._log_end_offset:
            raise ValueError(f"batch at offset {header.base_offset} begins before the log end {self._log_end_offset}")
        return self._append(header.base_offset, batch, header, None)

    def _append(self, base: int, batch: bytearray, header: BatchHeader, leader_epoch: int | None) -> int:
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        seg = self._active
        now = self._clock()
        size = seg.size
        if not size:
            seg.rolling_base_ms = now  # segment.ms counts from the first append
            if base + header.last_offset_delta - seg.base_offset > MAX_RELATIVE_OFFSET:  # a follower's huge gap
                seg = self._roll(now, base)
        elif (
            size + len(batch) > self._segment_bytes
            or now - (seg.rolling_base_ms or now) > self._segment_ms - self._roll_jitter_ms
            or base + header.last_offset_delta - seg.base_offset > MAX_RELATIVE_OFFSET
            or (size >= self._index_full_floor and self._index_full(seg))
        ):
            seg = self._roll(now, base)
        if type(batch) is not bytearray:
            batch = bytearray(batch)
        set_base_offset(batch, 0, base)  # outside the CRC: no re-checksum needed
        if leader_epoch is None:
            leader_epoch = header.partition_leader_epoch
        else:
            _EPOCH.pack_into(batch, 12, leader_epoch)  # stamp_leader_epoch, inline: outside the CRC too
        seg.append(batch, header, base)
        if leader_epoch != self.leader_epochs.latest and leader_epoch >= 0:
            self.leader_epochs.assign(leader_epoch, base)
        self._log_end_offset = base + header.last_offset_delta + 1
        self._appended_records += header.record_count
        return base

    def _index_full(self, seg: LogSegment) -> bool:
        """Kafka rolls a segment whose offset or time index is full (segment.index.bytes)."""
        return len(seg.offset_index) >= self._max_offset_entries or len(seg.time_index) >= self._max_time_entries

    def _roll(self, now: int, base: int) -> LogSegment:
        """A new active segment starting at ``base``: the log end, or past it where a follower's batch begins
        after a gap (Kafka rolls at the batch's first offset, so its offsets fit the new segment's index)."""
        old = self._active
        old.seal()
        new = LogSegment.create(self.directory, base, self.config.index_interval_bytes, cache=self._fd_cache)
        new.rolling_base_ms = now
        self._roll_jitter_ms = self._random_jitter()
        with self._lock:
            self._unflushed_segments.append(old)
            self._segments.append(new)
            self._bases.append(new.base_offset)
            self._active = new
            self._dir_dirty = True
        return new

    # ------------------------------------------------------------------ flush
    def flush(self) -> None:
        """fsync every segment written since the last flush, then persist the recovery point.

        Safe to call from a worker thread while the event loop keeps appending.
        """
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                log_end, appended = self._log_end_offset, self._appended_records
                if log_end == self._flushed_end and not self._unflushed_segments and not self._dir_dirty:
                    return  # nothing new: spare idle partitions the fsyncs
                targets = [*self._unflushed_segments, self._active]
                self._unflushed_segments = []
                dir_dirty, self._dir_dirty = self._dir_dirty, False
                self._flushing = True
            try:
                for seg in targets:
                    seg.flush()
                self.leader_epochs.sync()  # epochs of the data below log_end, before the recovery point passes it
                if dir_dirty:
                    fsync_dir(self.directory)
                # Everything below log_end was written before the fsyncs began, so it is durable now.
                write_offset_file(self.directory / RECOVERY_POINT_FILE, log_end)
            except BaseException:
                with self._lock:
                    self._unflushed_segments[:0] = [s for s in targets[:-1] if s in self._segments]
                    self._dir_dirty = self._dir_dirty or dir_dirty
                raise
            finally:
                with self._lock:
                    self._flushing = False
                    doomed = self._take_pending_close()
                for seg in doomed:
                    seg.close()
            self._flushed_records = appended
            self._flushed_end = log_end
            self._last_flush_ms = self._clock()

    # ------------------------------------------------------------------ read
    def _check_offset(self, offset: int) -> None:
        if offset < self._log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, self._log_end_offset)

    def read(self, offset: int, max_bytes: int, min_one: bool = True, max_offset: int | None = None) -> bytes:
        """Whole batches from the one containing ``offset``, up to ``max_bytes`` (at least one batch
        if ``min_one``) and, given ``max_offset`` (a batch's base offset: the last stable offset), only
        batches before it. Empty at the log end; OffsetOutOfRange outside [log start, log end]."""
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        self._check_offset(offset)
        if offset == self._log_end_offset:
            return b""
        if max_offset is not None and max_offset < self._log_end_offset:
            if offset >= max_offset:
                return b""
            # Kafka's read to maxOffset: the bytes from the batch holding ``offset`` to the one starting at
            # ``max_offset`` become the byte budget (whole batches either way, so the cut is exact).
            span = self._span(offset, max_offset)
            if span <= 0:
                return b""
            max_bytes = min(max_bytes, span)
        segments = self._segments
        i = bisect_right(self._bases, offset) - 1
        parts: list[bytes] = []
        remaining = max_bytes
        pos = -1
        while i < len(segments):
            seg = segments[i]
            if pos < 0:  # first segment: locate the batch; later segments start at 0
                found = seg.find_batch(offset)
                if found is None:  # offset falls in a gap at the segment's end (compaction)
                    i += 1
                    continue
                pos, first = found
                if first.size > remaining:
                    return seg.read(pos, first.size) if min_one and not parts else b""
            limit = pos + remaining
            if limit < seg.size:
                # Find the last whole batch before the limit first (walking batch lengths from the
                # last indexed batch start), then read exactly that much: one read, no slice copy.
                limit = seg.batch_boundary(max(seg.offset_index.floor_position(limit), pos), limit)
            data = seg.read(pos, limit - pos)  # a segment holds only whole batches
            cut = len(data)
            if cut:
                parts.append(data)
                remaining -= cut
            if pos + cut < seg.size or remaining <= 0:
                break  # the next batch did not fit
            i, pos = i + 1, 0
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def _span(self, offset: int, end_offset: int) -> int:
        """Bytes from the batch holding ``offset`` to the batch holding ``end_offset`` (excluded)."""
        segments = self._segments
        i, j = bisect_right(self._bases, offset) - 1, bisect_right(self._bases, end_offset) - 1

        def position(seg: LogSegment, at: int) -> int:
            found = seg.find_batch(at)
            return found[0] if found is not None else seg.size

        return sum(s.size for s in segments[i:j]) + position(segments[j], end_offset) - position(segments[i], offset)

    def batches_from(self, offset: int, read_bytes: int = 1 << 20) -> Iterator[tuple[bytes, int, BatchHeader]]:
        """``(data, position, header)`` of every batch from the one containing ``offset`` to the log
        end, read ``read_bytes`` at a time (the first batch may start before ``offset``)."""
        while offset < self._log_end_offset:
            data = self.read(offset, read_bytes)
            if not data:
                return
            next_offset = offset
            for pos, header in iter_batches(data):
                yield data, pos, header
                next_offset = header.last_offset + 1
            if next_offset <= offset:
                return
            offset = next_offset

    # ------------------------------------------------------------------ truncation (replication)
    def truncate_to(self, offset: int) -> None:
        """Drop every record at and after ``offset``, as Kafka's UnifiedLog.truncateTo (a follower whose log
        diverged from its new leader's): later segments go, the one holding ``offset`` is cut with its
        indexes and aborted-transaction entries, the recovery point and the leader-epoch cache follow. The
        log then ends at ``offset`` (at the start of the batch holding it, should that batch begin before);
        below the log start it is emptied and starts at ``offset``. Nothing happens at or past the log end.
        The caller rebuilds the partition's producer state (producer_state.rebuild_after_truncation).

        Event-loop thread. Waits for a flush in progress, and stops a compaction pass of this log (it is
        tried again next round)."""
        if offset < 0:
            raise ValueError(f"truncation offset {offset} is negative")
        if self._closed:
            raise LogClosed(f"log {self.directory} is closed")
        if offset >= self._log_end_offset:
            return
        self._clean_abort = True  # a cleaner pass of this log stops at its next check
        try:
            with self._clean_lock, self._flush_lock:
                self._truncate(offset)
        finally:
            self._clean_abort = False

    def _truncate(self, offset: int) -> None:
        # The recovery point and the epochs first, durably: a crash midway must not leave a recovery point
        # beyond the new end (the segments written next would be taken as flushed) nor epochs past it.
        recovery_point = read_offset_file(self.directory / RECOVERY_POINT_FILE)
        if recovery_point is None or recovery_point > offset:
            write_offset_file(self.directory / RECOVERY_POINT_FILE, offset)
        self.leader_epochs.truncate_from_end(offset)
        with self._lock:
            segments = self._segments
            if offset < segments[0].base_offset:  # Kafka's truncateFullyAndStartAt: the epochs go too
                doomed, kept = list(segments), []
            else:
                i = bisect_right(self._bases, offset) - 1
                doomed, kept = segments[i + 1 :], segments[: i + 1]
        new_end = offset
        if kept:
            cut = kept[-1].truncate_to_offset(offset)
            if cut is not None:
                new_end = min(offset, cut)
            kept[-1].next_offset = new_end
        else:
            self.leader_epochs.truncate_from_end(0)
            kept = [LogSegment.create(self.directory, offset, self.config.index_interval_bytes, cache=self._fd_cache)]
        with self._lock:
            self._segments[:] = kept
            self._bases[:] = [s.base_offset for s in kept]
            self._active = kept[-1]
            self._unflushed_segments = [s for s in self._unflushed_segments if s in kept[:-1]]
            self._log_end_offset = new_end
            self._flushed_end = min(self._flushed_end, new_end)
            self._dir_dirty = True
            defer = self._flushing or self._cleaning
            if defer:
                self._pending_close.extend(doomed)
        if doomed:
            self._retire(doomed, defer)
        self._roll_jitter_ms = self._random_jitter()
        self._active.index_interval_bytes = self.config.index_interval_bytes
        if new_end < offset:  # the batch holding ``offset`` began before it
            write_offset_file(self.directory / RECOVERY_POINT_FILE, new_end)
            self.leader_epochs.truncate_from_end(new_end)
        if self._log_start_offset > new_end:
            self._set_log_start(new_end)  # Kafka: logStartOffset = min(target, logStartOffset)

    # ------------------------------------------------------------------ transactions
    def record_aborted(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its marker."""
        self._segments[bisect_right(self._bases, txn.last_offset) - 1].txn_index.append(txn)

    def truncate_txn_indexes(self, offset: int) -> None:
        """Drop the aborted-index entries of markers at or after ``offset`` (before replaying them)."""
        for seg in self._segments[max(bisect_right(self._bases, offset) - 1, 0):]:
            seg.txn_index.truncate_from(offset)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (read_committed Fetch)."""
        first = max(bisect_right(self._bases, fetch_offset) - 1, 0)
        return collect_aborted((s.txn_index for s in self._segments[first:]), fetch_offset, upper_bound)

    # ------------------------------------------------------------------ timestamps
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the earliest record (at or after the log start) whose
        timestamp is >= ``timestamp``; None if there is none (ListOffsets semantics)."""
        start = self._log_start_offset
        for seg in list(self._segments):
            if seg.largest_timestamp < timestamp:
                continue
            for pos, header in seg.batches(seg.timestamp_position(timestamp)):
                if header.max_timestamp < timestamp or header.base_offset + header.last_offset_delta < start:
                    continue
                _, records = decode_batch_records(seg.read(pos, header.size))
                for record in records:
                    if record.timestamp >= timestamp and record.offset >= start:
                        return record.offset, record.timestamp
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """``(timestamp, offset)`` of the first record carrying the largest timestamp (ListOffsets -3)."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.largest_timestamp >= 0 and (
                best is None or seg.largest_timestamp > best.largest_timestamp
            ):
                best = seg
        if best is None:
            return None
        ts, offset = best.largest_timestamp, best.offset_of_largest_timestamp
        found = best.find_batch(offset)
        if found is not None:
            pos, header = found
            _, records = decode_batch_records(best.read(pos, header.size))
            for record in records:
                if record.timestamp == ts:
                    return ts, record.offset
        return ts, offset

    # ------------------------------------------------------------------ deletion
    def delete_records_before(self, offset: int) -> None:
        """DeleteRecords: move the log start to ``offset`` and drop segments wholly below it."""
        if offset < 0 or offset > self._log_end_offset:
            raise ValueError(f"offset {offset} is outside [0, log end offset {self._log_end_offset}]")
        if offset <= self._log_start_offset:
            return
        self._set_log_start(offset)
        # Segment i is wholly below the start when the next one begins at or before it.
        self._remove_oldest(max(bisect_right(self._bases, offset) - 1, 0))

    def apply_retention(self, now_ms: int) -> int:
        """Delete the oldest closed segments past retention.ms / beyond retention.bytes.

        Only for cleanup.policy containing ``delete``; the active segment is never deleted.
        Returns the number of segments deleted.
        """
        if not self.config.delete:
            return 0
        closed = self._segments[:-1]
        n = 0
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            while n < len(closed) and now_ms - closed[n].retention_timestamp() > retention_ms:
                n += 1
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes - sum(s.size for s in closed[:n])
            while n < len(closed) and excess - closed[n].size >= 0:
                excess -= closed[n].size
                n += 1
        if n:
            new_start = self._segments[n].base_offset
            if new_start > self._log_start_offset:
                self._set_log_start(new_start)
            self._remove_oldest(n)
        return n

    def _set_log_start(self, offset: int) -> None:
        # Persist before deleting files: a crash in between leaves segments that open() skips.
        write_offset_file(self.directory / LOG_START_OFFSET_FILE, offset)
        self._log_start_offset = offset
        self.leader_epochs.truncate_from_start(offset)

    def _remove_oldest(self, n: int) -> None:
        if n <= 0:
            return
        with self._lock:
            doomed = self._segments[:n]
            del self._segments[:n]
            del self._bases[:n]
            self._unflushed_segments = [s for s in self._unflushed_segments if s not in doomed]
            defer = self._flushing or self._cleaning
            if defer:
                self._pending_close.extend(doomed)
            self._dir_dirty = True
        self._retire(doomed, defer)

    def _retire(self, segments: list[LogSegment], defer_close: bool) -> None:
        """Remove segments taken out of the log: at once, or (``file.delete.delay.ms``) renamed to
        ``.deleted`` and unlinked by ``delete_due`` once the delay has passed, as Kafka does, so a reader
        that still holds them finishes. A restart removes leftover ``.deleted`` files (recovery.py)."""
        delay = self.config.file_delete_delay_ms
        for seg in segments:
            if defer_close:
                seg.hold()  # open (before any unlink) until the flush or cleaner reading it is done
            if delay > 0:
                if not seg.log_path.name.endswith(".deleted"):  # the cleaner's swap renamed them already
                    seg.change_suffix(".deleted")
                self._doomed.append((time.monotonic() + delay / 1000, seg))
            else:
                seg.unlink()
            if not defer_close:
                seg.close()

    def delete_due(self, now: float | None = None) -> int:
        """Unlink the ``.deleted`` segments whose delay has passed; how many."""
        now = time.monotonic() if now is None else now
        due = [seg for at, seg in self._doomed if at <= now]
        if due:
            self._doomed = [(at, seg) for at, seg in self._doomed if at > now]
            for seg in due:
                seg.unlink()
        return len(due)

    def _take_pending_close(self) -> list[LogSegment]:
        """Segments whose descriptors may be closed now (no flush or cleaner reading them); under _lock."""
        if self._flushing or self._cleaning:
            return []
        doomed, self._pending_close = self._pending_close, []
        return doomed

    # ------------------------------------------------------------------ compaction support
    @contextmanager
    def cleaning(self) -> Iterator[None]:
        """A cleaner session: while it lasts, removed segments keep their descriptors open and
        close()/delete() wait for it. Raises LogClosed, or RuntimeError if a session is running."""
        if not self._clean_lock.acquire(blocking=False):
            raise RuntimeError(f"log {self.directory} is already being cleaned")
        try:
            with self._lock:
                if self._closed or self._clean_abort:
                    raise LogClosed(f"log {self.directory} is closed")
                self._cleaning = True
            try:
                yield
            finally:
                with self._lock:
                    self._cleaning = False
                    doomed = self._take_pending_close()
                for seg in doomed:
                    seg.close()
        finally:
            self._clean_lock.release()

    @property
    def clean_aborted(self) -> bool:
        """True once close()/delete() asked a running cleaner session to stop."""
        return self._clean_abort

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> bool:
        """Swap the cleaned segment ``new`` in for ``old``, a run of consecutive closed segments.

        ``new`` must cover ``old``'s offsets, start at ``old[0].base_offset``, be fsynced, and have
        its files named ``.swap`` under a durable swap marker (see cleaner.py), so that a crash at
        any point here is finished by recovery. The originals are renamed ``.deleted``, ``new``
        takes the final names, the directory is fsynced, then the originals are unlinked (their
        descriptors are closed once no flush or cleaner session may be reading them). Event-loop
        thread only. Returns False, changing nothing, if ``old`` is no longer such a run (retention
        deleted some of it meanwhile) or the log is closed.
        """
        with self._lock:
            if self._closed or not old or new.base_offset != old[0].base_offset:
                return False
            i = next((n for n, seg in enumerate(self._segments) if seg is old[0]), -1)
            k = len(old)
            if i < 0 or i + k >= len(self._segments) or any(
                a is not b for a, b in zip(self._segments[i : i + k], old, strict=True)
            ):
                return False
        for seg in old:
            seg.change_suffix(".deleted")
        new.change_suffix("")
        new.attach(self._fd_cache)
        fsync_dir(self.directory)
        with self._lock:
            self._segments[i : i + k] = [new]
            self._bases[i : i + k] = [new.base_offset]
            self._unflushed_segments = [s for s in self._unflushed_segments if s not in old]
            defer = self._flushing or self._cleaning
            if defer:
                self._pending_close.extend(old)
        self._retire(old, defer)
        return True

    # ------------------------------------------------------------------ lifecycle
    def _stop_cleaner(self) -> None:
        """Ask a running cleaner session to stop and wait until it has (it checks between batches)."""
        self._clean_abort = True
        with self._clean_lock:
            pass

    def close(self, *, sync: bool = True) -> None:
        """Flush and close every file. Further use raises LogClosed. Without ``sync`` nothing is fsynced: the
        caller syncs the filesystem, then calls ``write_recovery_point`` (a whole broker's logs closing at once)."""
        if self._closed:
            return
        self._stop_cleaner()
        self._active.seal()
        if not sync:
            with self._flush_lock, self._lock:
                self._closed = True
                for seg in self._segments:
                    seg.close()
            self.leader_epochs.sync(durable=False)  # made durable by the caller's sync of the filesystem
            self.delete_due(float("inf"))
            return
        self.flush()
        self.leader_epochs.sync()  # noted since the last write, even when the flush had nothing to do
        with self._flush_lock, self._lock:
            self._closed = True
            self._active.flush()  # the sealing time-index entry, even if flush() had nothing to do
            for seg in self._segments:
                seg.close()
        self.delete_due(float("inf"))  # nothing reads a closed log: no need to wait out the delay

    def write_recovery_point(self) -> None:
        """After ``close(sync=False)`` and a sync of the filesystem: everything is durable up to the log end (the
        file itself made durable by the caller's next sync)."""
        if self._log_end_offset != self._flushed_end:
            write_offset_file(self.directory / RECOVERY_POINT_FILE, self._log_end_offset, durable=False)
            self._flushed_end = self._log_end_offset

    def delete(self) -> None:
        """Close and remove the partition directory."""
        if not self._closed:
            self._stop_cleaner()
            with self._flush_lock, self._lock:
                self._closed = True
                for seg in self._segments:
                    seg.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.directory}, start={self._log_start_offset}, end={self._log_end_offset}, "
            f"segments={len(self._segments)})"
        )
