"""One log segment: ``<base>.log`` (record batches as received) plus its two indexes and its aborted-
transaction index (``<base>.txnindex``, txn_index.py).

The segment never parses records on the append path: the caller hands over the batch
and its already-parsed header, the segment writes the bytes with one ``os.write`` and
updates the sparse indexes from header fields. Reads are ``os.pread`` on the same fd.

Given the broker's DescriptorCache (fd_cache.py), a segment's three descriptors may be closed while it is
idle: every method that needs them reopens them first (an already-open segment pays one comparison). A thread
other than the event loop's (a flush, the cleaner) never opens them in the cache: it pins them if they are open,
else uses descriptors of its own for the moment (``flush``, ``reading``).
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from crc32c import crc32c

from headwater.kafka.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header

from .fd_cache import DescriptorCache
from .index import OffsetIndex, TimeIndex
from .txn_index import TransactionIndex

__all__ = ["LogSegment", "segment_name"]

MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries store offsets relative to the base as int32
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_CRC_START = 21  # attributes onward are covered by the CRC (see records.py)
_SCAN_CHUNK = 1 << 20
_FIND_CHUNK = 8 << 10
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, (attributes), lastOffsetDelta, (baseTimestamp),
# maxTimestamp
_SCAN_FIELDS = struct.Struct(">qiibI2xi8xq")


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A ``.log`` file of whole batches with a sparse offset index and a time index."""

    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int = 4096, *, create: bool,
        suffix: str = "", cache: DescriptorCache | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        # ``suffix`` names the files of a segment being rewritten by the cleaner (``.cleaned``, ``.swap``).
        self.log_path = self.directory / (segment_name(base_offset, ".log") + suffix)
        self.index_path = self.directory / (segment_name(base_offset, ".index") + suffix)
        self.timeindex_path = self.directory / (segment_name(base_offset, ".timeindex") + suffix)
        # O_APPEND: every write lands at the end, and stays correct after ftruncate.
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | (os.O_TRUNC if create else 0)
        self._fd = os.open(self.log_path, flags, 0o644)
        try:
            self.offset_index = OffsetIndex(self.index_path, truncate=create)
            self.time_index = TimeIndex(self.timeindex_path, truncate=create)
        except BaseException:
            os.close(self._fd)
            if hasattr(self, "offset_index"):
                self.offset_index.close()
            raise
        # Descriptor cache bookkeeping (fd_cache.py); without a cache the files stay open until close().
        self._cache = cache
        self._retired = False  # closed for good: no reopening
        self.used = True
        self.pins = 0
        self.offset_index.reopen = self.time_index.reopen = self._reopen
        # aborted transactions whose markers are in this segment (read_committed Fetch)
        self.txn_index = TransactionIndex(self.directory / (segment_name(base_offset, ".txnindex") + suffix),
                                          truncate=create)
        self.indexes_missing = not create and not (self.offset_index.existed and self.time_index.existed)
        self._size = os.fstat(self._fd).st_size
        self._since_index = 0  # bytes appended since the last offset-index entry
        self.largest_timestamp = -1
        self.offset_of_largest_timestamp = base_offset  # last offset of the first batch reaching it
        # Wall-clock ms the segment.ms age counts from (first append); None until known.
        self.rolling_base_ms: int | None = None
        # Offset after the last batch; only known once the segment was scanned or appended to.
        self.next_offset: int | None = base_offset if self._size == 0 else None
        # (leader epoch, base offset) where the batches' epoch changes, from the last scan (recovery rebuilds the
        # log's leader-epoch cache from them); batches without an epoch (-1) are left out.
        self.epoch_starts: list[tuple[int, int]] = []
        if not create and self._size:
            last = self.time_index.last_entry()
            if last is not None:
                self.largest_timestamp, rel = last
                self.offset_of_largest_timestamp = base_offset + rel
            first = parse_header(os.pread(self._fd, HEADER_SIZE, 0)) if self._size >= HEADER_SIZE else None
            if first is not None and first.max_timestamp >= 0:
                self.rolling_base_ms = first.max_timestamp
        if cache is not None:
            cache.open(self, opened=3)

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, index_interval_bytes: int = 4096, suffix: str = "",
        cache: DescriptorCache | None = None,
    ) -> LogSegment:
        """A new, empty segment (existing files of that name are truncated)."""
        return cls(directory, base_offset, index_interval_bytes, create=True, suffix=suffix, cache=cache)

    @classmethod
    def open(cls, directory: Path, base_offset: int, index_interval_bytes: int = 4096,
             cache: DescriptorCache | None = None) -> LogSegment:
        """An existing segment; indexes are loaded lazily -- call ``recover`` or check ``indexes_ok``."""
        return cls(directory, base_offset, index_interval_bytes, create=False, cache=cache)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self._size})"

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        """Closed for good (``close``); a segment the descriptor cache closed reopens on use."""
        return self._retired or (self._fd < 0 and self._cache is None)

    @property
    def files_open(self) -> bool:
        return self._fd >= 0

    # ------------------------------------------------------------------ descriptors (fd_cache.py)
    def _reopen(self) -> int:
        """Reopen the files the descriptor cache closed; the log's descriptor."""
        if self._cache is None or self._retired:
            raise OSError(errno.EBADF, f"{self.log_path} is closed")
        self._cache.open(self)
        return self._fd

    def _open_files(self) -> int:
        fd = os.open(self.log_path, os.O_RDWR | os.O_APPEND)
        try:
            self.offset_index.open_fd()
            self.time_index.open_fd()
        except BaseException:
            os.close(fd)
            self.offset_index.close()
            raise
        self._fd = fd
        return 3

    def _close_files(self) -> int:
        n = 0
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            n += 1
        for index in (self.offset_index, self.time_index):
            if index._fd >= 0:
                index.close()
                n += 1
        return n

    def attach(self, cache: DescriptorCache | None) -> None:
        """Hand an open segment made without a cache (the cleaner's output) to ``cache``."""
        if cache is not None and self._cache is None and self._fd >= 0:
            self._cache = cache
            cache.open(self, opened=self._open_count())

    def _open_count(self) -> int:
        return (self._fd >= 0) + (self.offset_index._fd >= 0) + (self.time_index._fd >= 0)

    def hold(self) -> None:
        """Keep the files open until ``close`` (a removed segment a flush or the cleaner may still read; the
        event loop's thread, before the files may be unlinked)."""
        if self._cache is not None and not self._retired:
            self._cache.pin(self)

    @contextmanager
    def reading(self) -> Iterator[Callable[[int, int], bytes]]:
        """``read`` for a thread other than the event loop's, for the block: on the segment's descriptor, pinned
        open, or on one of its own when the cache had closed it (so the cache stays within its bound)."""
        cache = self._cache
        if cache is None or self._retired:
            yield self.read
            return
        if cache.pin_if_open(self):
            try:
                yield self.read
            finally:
                cache.unpin(self)
            return
        fd = os.open(self.log_path, os.O_RDONLY)

        def read(position: int, max_bytes: int) -> bytes:
            n = min(max_bytes, self._size - position)
            return os.pread(fd, n, position) if n > 0 else b""

        try:
            yield read
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ append path
    def append(self, batch: bytearray | bytes, header: BatchHeader, base_offset: int | None = None) -> int:
        """Write one batch at the end and index it; returns its file position.

        ``base_offset`` (default ``header.base_offset``) must already be in the batch's first 8 bytes:
        the segment stores the bytes as given and uses the header fields only for its indexes.
        """
        if base_offset is None:
            base_offset = header.base_offset
        fd = self._fd
        if fd < 0:
            fd = self._reopen()
        self.used = True
        pos = self._size
        n = len(batch)
        try:
            written = os.write(fd, batch)
            while written < n:  # short writes are rare (signals, quotas) but must not tear the batch
                written += os.write(fd, memoryview(batch)[written:])
        except BaseException:
            os.ftruncate(fd, pos)  # leave no partial batch behind
            raise
        self._size = pos + n
        last_offset = base_offset + header.last_offset_delta
        self.next_offset = last_offset + 1
        if header.max_timestamp > self.largest_timestamp:
            self.largest_timestamp = header.max_timestamp
            self.offset_of_largest_timestamp = last_offset
        # Kafka's rule: index the batch when more than index.interval.bytes were appended since the
        # last entry; the time index gets the max timestamp so far at the same points (plus at seal()).
        if self._since_index > self.index_interval_bytes:
            self.offset_index.append(base_offset - self.base_offset, pos)
            if self.largest_timestamp > self.time_index._last_ts:
                self.time_index.append(
                    self.largest_timestamp, self.offset_of_largest_timestamp - self.base_offset
                )
            self._since_index = 0
        self._since_index += n
        return pos

    def seal(self) -> None:
        """Record the final largest timestamp in the time index (on roll and close)."""
        if not self.closed and self.largest_timestamp > self.time_index.last_timestamp:
            if self._fd < 0:
                self._reopen()
            self.time_index.append(
                self.largest_timestamp, self.offset_of_largest_timestamp - self.base_offset
            )

    # ------------------------------------------------------------------ reads and lookups
    def read(self, position: int, max_bytes: int) -> bytes:
        n = min(max_bytes, self._size - position)
        if n <= 0:
            return b""
        fd = self._fd
        if fd < 0:
            fd = self._reopen()
        self.used = True
        return os.pread(fd, n, position)

    def _pread(self, n: int, position: int) -> bytes:
        fd = self._fd
        if fd < 0:
            fd = self._reopen()
        return os.pread(fd, n, position)

    def batches(self, position: int = 0, end: int | None = None,
                chunk: int = _SCAN_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
        """``(position, header)`` of each complete batch from ``position`` (headers only, no CRC),
        reading ``chunk`` bytes at a time."""
        end = self._size if end is None else end
        buf = b""
        buf_pos = position
        while position + HEADER_SIZE <= end:
            off = position - buf_pos
            if off + HEADER_SIZE > len(buf):
                # reopened if need be at each chunk: the caller may use other segments between batches
                buf = self._pread(min(chunk, end - position), position)
                buf_pos, off = position, 0
                if len(buf) < HEADER_SIZE:
                    return
            header = parse_header(buf, off)
            if header.batch_length < _MIN_BATCH_LENGTH or position + header.size > end:
                return
            yield position, header
            position += header.size

    def batch_boundary(self, start: int, limit: int) -> int:
        """The end of the last whole batch ending at or before ``limit``, walking batch lengths from
        ``start`` (a batch start); ``start`` itself when the batch there ends after ``limit``."""
        pos = start
        fd = self._fd if self._fd >= 0 else self._reopen()
        while pos + LOG_OVERHEAD <= limit:
            length = int.from_bytes(os.pread(fd, 4, pos + 8), "big", signed=True)
            end = pos + LOG_OVERHEAD + length
            if length < _MIN_BATCH_LENGTH or end > limit:
                break
            pos = end
        return pos

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (the one containing it), or None."""
        start = self.offset_index.lookup(offset - self.base_offset) if offset > self.base_offset else 0
        # The index points within index.interval.bytes of the batch: small reads, not 1 MiB ones.
        for pos, header in self.batches(start, chunk=_FIND_CHUNK):
            if header.base_offset + header.last_offset_delta >= offset:
                return pos, header
        return None

    def timestamp_position(self, timestamp: int) -> int:
        """A position at or before the first batch whose max timestamp is >= ``timestamp``."""
        rel = self.time_index.lookup(timestamp)
        return 0 if rel is None else self.offset_index.lookup(rel)

    def retention_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when no record carried one (as Kafka)."""
        if self.largest_timestamp >= 0:
            return self.largest_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    # ------------------------------------------------------------------ recovery
    def indexes_ok(self) -> bool:
        """Cheap consistency check of a closed segment's index files (sizes and last entries)."""
        if self.indexes_missing or not (self.offset_index.well_formed() and self.time_index.well_formed()):
            return False
        last = self.offset_index.last_entry()
        if last is not None:
            rel, pos = last
            if rel <= 0 or pos <= 0 or pos + HEADER_SIZE > self._size:
                return False
            header = parse_header(self._pread(HEADER_SIZE, pos))
            if header.base_offset != self.base_offset + rel or header.magic != 2:
                return False
        if self._size and self.time_index.last_entry() is None and self.rolling_base_ms is not None:
            return False  # batches carry timestamps but the time index is empty
        last_ts = self.time_index.last_entry()
        return last_ts is None or last_ts[1] >= 0

    def recover(self) -> int:
        """Validate every batch (size, magic, offsets, CRC), truncate at the first bad or partial one,
        rebuild both indexes. Returns the number of bytes truncated."""
        return self._scan(validate=True)

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from the batch headers (no CRC check, no truncation)."""
        self._scan(validate=False)

    def truncate_to(self, position: int) -> None:
        """Drop everything from ``position`` (a batch boundary) on, and rebuild the indexes."""
        if position < self._size:
            os.ftruncate(self._fd if self._fd >= 0 else self._reopen(), position)
            self._size = position
        self._scan(validate=False)

    def truncate_to_offset(self, offset: int) -> int | None:
        """Drop the batches holding offsets >= ``offset`` (the whole batch holding ``offset``, should it begin
        before it), with their offset/time index entries and aborted-transaction entries, as Kafka's
        LogSegment.truncateTo; the base offset of the first batch dropped, or None when none was. Reads only
        the batches from the last offset-index entry kept to the cut (the largest timestamp)."""
        found = self.find_batch(offset)
        if found is None:
            return None
        pos, first_cut = found
        cut_base = first_cut.base_offset
        offsets = [e for e in self.offset_index.entries() if e[1] < pos]
        times = [e for e in self.time_index.entries() if self.base_offset + e[1] < cut_base]
        os.ftruncate(self._fd if self._fd >= 0 else self._reopen(), pos)
        self._size = pos
        self.offset_index.reset(offsets)
        self.time_index.reset(times)
        self.txn_index.truncate_from(cut_base)
        # The kept time-index entries account for every batch up to the last offset-index entry (both are
        # made by the same appends); the batches after it are read.
        indexed = offsets[-1][1] if offsets else 0
        largest, off_largest = (times[-1][0], self.base_offset + times[-1][1]) if times else (-1, self.base_offset)
        for _, header in self.batches(indexed, pos):
            if header.max_timestamp > largest:
                largest, off_largest = header.max_timestamp, header.base_offset + header.last_offset_delta
        self.largest_timestamp, self.offset_of_largest_timestamp = largest, off_largest
        self._since_index = pos - indexed
        self.next_offset = cut_base
        self.epoch_starts = [e for e in self.epoch_starts if e[1] < cut_base]
        if not pos:
            self.rolling_base_ms = None
        return cut_base

    def _scan(self, validate: bool) -> int:
        # Runs over every batch of the active segment at each open: kept to a few field reads
        # per batch (one small struct, no BatchHeader objects) so recovery stays I/O- and CRC-bound.
        fd = self._fd if self._fd >= 0 else self._reopen()
        size = os.fstat(fd).st_size
        base = self.base_offset
        interval = self.index_interval_bytes
        unpack = _SCAN_FIELDS.unpack_from
        offsets: list[tuple[int, int]] = []
        times: list[tuple[int, int]] = []
        since = 0
        largest, off_largest, last_time = -1, base, -1
        expected = base
        first_ts: int | None = None
        epoch_starts: list[tuple[int, int]] = []
        last_epoch = -1
        buf = b""
        view = memoryview(buf)
        buf_pos = pos = 0
        while pos + HEADER_SIZE <= size:
            off = pos - buf_pos
            if off + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(_SCAN_CHUNK, size - pos), pos)
                view = memoryview(buf)
                buf_pos, off = pos, 0
            batch_base, length, epoch, magic, crc, delta, max_ts = unpack(buf, off)
            batch_size = length + LOG_OVERHEAD
            end = pos + batch_size
            last = batch_base + delta
            if length < _MIN_BATCH_LENGTH or end > size or delta < 0 or batch_base < expected:
                break
            if last - base > MAX_RELATIVE_OFFSET:
                break
            if validate:
                if magic != 2:
                    break
                if off + batch_size <= len(buf):
                    if crc32c(view[off + _CRC_START : off + batch_size]) != crc:
                        break
                elif not self._crc_from_disk(pos, batch_size, crc):
                    break
            if first_ts is None:
                first_ts = max_ts
            if epoch != last_epoch and epoch >= 0:
                epoch_starts.append((epoch, batch_base))
                last_epoch = epoch
            if max_ts > largest:
                largest, off_largest = max_ts, last
            if since > interval:  # same rule as append()
                offsets.append((batch_base - base, pos))
                if largest > last_time:
                    times.append((largest, off_largest - base))
                    last_time = largest
                since = 0
            since += batch_size
            expected = last + 1
            pos = end
        view.release()
        if largest > last_time:
            times.append((largest, off_largest - base))  # what seal() would have written
        truncated = size - pos if validate else 0
        if truncated:
            os.ftruncate(fd, pos)
        self._size = size - truncated
        self._since_index = since
        self.offset_index.reset(offsets)
        self.time_index.reset(times)
        self.txn_index.truncate_from(expected)  # aborts whose markers were cut off
        self.indexes_missing = False
        self.largest_timestamp, self.offset_of_largest_timestamp = largest, off_largest
        self.next_offset = expected
        self.rolling_base_ms = first_ts if first_ts is not None and first_ts >= 0 else None
        self.epoch_starts = epoch_starts
        return truncated

    def _crc_from_disk(self, pos: int, batch_size: int, expected_crc: int) -> bool:
        """CRC of a batch that is not in the scan buffer, read in chunks (a corrupt length can be huge)."""
        crc, p, end = 0, pos + _CRC_START, pos + batch_size
        while p < end:
            chunk = self._pread(min(_SCAN_CHUNK, end - p), p)
            if not chunk:
                return False
            crc = crc32c(chunk, crc)
            p += len(chunk)
        return crc == expected_crc

    # ------------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        """fsync the log and both indexes (reopening them if the descriptor cache closed them: an fsync of any
        descriptor of a file writes back its dirty pages). Any thread."""
        if not self.closed:
            cache = self._cache
            if cache is None or cache.pin_if_open(self):
                try:
                    os.fsync(self._fd)
                    self.offset_index.flush()
                    self.time_index.flush()
                finally:
                    if cache is not None:
                        cache.unpin(self)
            else:  # closed by the cache: descriptors of its own, so the cache stays within its bound
                for path in (self.log_path, self.index_path, self.timeindex_path):
                    try:
                        fd = os.open(path, os.O_RDONLY)
                    except FileNotFoundError:
                        continue  # removed meanwhile (retention, DeleteRecords): nothing to make durable
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
        self.txn_index.flush()

    def close(self) -> None:
        """Close the files for good (any thread)."""
        self._retired = True
        if self._cache is not None:
            self._cache.closed(self)
        else:
            self._close_files()

    def change_suffix(self, suffix: str) -> None:
        """Rename the three files to ``<base>.log<suffix>`` etc. (indexes first, the log last, so a
        ``.log`` under a name means its indexes were moved before it); descriptors stay valid."""
        self.offset_index.rename(self.directory / (segment_name(self.base_offset, ".index") + suffix))
        self.time_index.rename(self.directory / (segment_name(self.base_offset, ".timeindex") + suffix))
        self.txn_index.rename(self.directory / (segment_name(self.base_offset, ".txnindex") + suffix))
        log_path = self.directory / (segment_name(self.base_offset, ".log") + suffix)
        os.replace(self.log_path, log_path)
        self.log_path = log_path
        self.index_path = self.offset_index.path
        self.timeindex_path = self.time_index.path

    def last_modified_ms(self) -> int:
        """The log file's mtime (the cleaner sets it to the time its tombstones' countdown began)."""
        return os.stat(self.log_path).st_mtime_ns // 1_000_000

    def set_last_modified(self, ms: int) -> None:
        os.utime(self.log_path, ns=(ms * 1_000_000, ms * 1_000_000))

    def unlink(self) -> None:
        """Remove the files (open descriptors keep working until close, as POSIX allows)."""
        self.log_path.unlink(missing_ok=True)
        self.offset_index.unlink()
        self.time_index.unlink()
        self.txn_index.unlink()

    def delete(self) -> None:
        self.close()
        self.unlink()
