"""A segment's sparse offset index and time index.

Both are small files of fixed-size big-endian entries, mirrored in memory as ``array``s
so a lookup is one ``bisect`` (Python cannot bisect a big-endian mmap without decoding
it anyway). Entries are written to the file as they are made -- one small ``os.write``
per entry, which leaves the page cache consistent with the log after a process crash;
``flush`` makes them durable. Closed segments load their entries lazily, on first lookup,
so opening a partition with many segments only touches the index tails. The descriptor is the segment's to
open and close (fd_cache.py): a method that needs it while it is closed asks the segment to reopen.
"""

from __future__ import annotations

import errno
import os
import struct
import sys
from array import array
from bisect import bisect_right
from collections.abc import Callable
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, file position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_LITTLE = sys.byteorder == "little"


class _IndexFile:
    entry: struct.Struct

    def __init__(self, path: Path, *, truncate: bool = False) -> None:
        self.path = path
        flags = os.O_RDWR | os.O_APPEND
        if truncate:
            self.existed = os.path.exists(path)
            self._fd = os.open(path, flags | os.O_CREAT | os.O_TRUNC, 0o644)
        else:  # one open when the file is there (every partition at start)
            try:
                self._fd = os.open(path, flags)
                self.existed = True
            except FileNotFoundError:
                self._fd = os.open(path, flags | os.O_CREAT, 0o644)
                self.existed = False
        self._loaded = truncate  # a fresh index is empty: nothing to load
        self.reopen: Callable[[], object] | None = None  # the segment's, which reopens its files
        self._clear()

    # -- implemented by subclasses
    def _clear(self) -> None:
        raise NotImplementedError

    def _set(self, entries: list[tuple[int, int]]) -> None:
        raise NotImplementedError

    def _load(self, data: bytes) -> None:
        raise NotImplementedError

    # --
    def _fileno(self) -> int:
        """The descriptor, reopened through the segment when the descriptor cache closed it."""
        if self._fd < 0:
            if self.reopen is None:
                raise OSError(errno.EBADF, f"{self.path} is closed")
            self.reopen()
        return self._fd

    def open_fd(self) -> None:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            fd = self._fileno()
            size = os.fstat(fd).st_size
            size -= size % self.entry.size
            self._load(os.pread(fd, size, 0) if size else b"")
            self._loaded = True

    @property
    def file_size(self) -> int:
        return os.fstat(self._fileno()).st_size

    def well_formed(self) -> bool:
        return self.file_size % self.entry.size == 0

    def last_entry(self) -> tuple[int, int] | None:
        """The last entry on disk, read with one pread (no full load)."""
        n = self.file_size // self.entry.size
        if n == 0:
            return None
        return self.entry.unpack(os.pread(self._fileno(), self.entry.size, (n - 1) * self.entry.size))

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole index (rebuild after recovery or truncation); a file already holding exactly these
        entries is left alone (every start rebuilds each active segment's indexes: an ftruncate each was most
        of the start-up time with 20,000 partitions)."""
        fd = self._fileno()
        pack = self.entry.pack
        data = b"".join(pack(a, b) for a, b in entries)
        size = os.fstat(fd).st_size
        if size != len(data) or (size and os.pread(fd, size, 0) != data):
            os.ftruncate(fd, 0)
            if data:
                os.write(fd, data)
        self._set(entries)
        self._loaded = True

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def unlink(self) -> None:
        self.path.unlink(missing_ok=True)

    def rename(self, path: Path) -> None:
        """Move the file to ``path`` (replacing it); the open descriptor stays valid."""
        os.replace(self.path, path)
        self.path = path


class OffsetIndex(_IndexFile):
    """(relative offset of a batch's first record, byte position of that batch)."""

    entry = _OFFSET_ENTRY

    def _clear(self) -> None:
        self._rels = array("i")
        self._positions = array("i")

    def _set(self, entries: list[tuple[int, int]]) -> None:
        self._rels = array("i", [e[0] for e in entries])
        self._positions = array("i", [e[1] for e in entries])

    def _load(self, data: bytes) -> None:
        flat = array("i")
        flat.frombytes(data)
        if _LITTLE:
            flat.byteswap()
        self._rels = flat[0::2]
        self._positions = flat[1::2]

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._rels)

    def append(self, rel_offset: int, position: int) -> None:
        # Only the active segment appends, and its index is always loaded (fresh or rebuilt); the segment
        # opened its files for the append.
        os.write(self._fd, _OFFSET_ENTRY.pack(rel_offset, position))
        self._rels.append(rel_offset)
        self._positions.append(position)

    def lookup(self, rel_offset: int) -> int:
        """Position of the last indexed batch starting at or before ``rel_offset`` (0 if none)."""
        self._ensure_loaded()
        i = bisect_right(self._rels, rel_offset)
        return self._positions[i - 1] if i else 0

    def entries(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        return list(zip(self._rels, self._positions, strict=True))

    def floor_position(self, position: int) -> int:
        """The largest indexed batch position <= ``position`` (0 if none)."""
        self._ensure_loaded()
        i = bisect_right(self._positions, position)
        return self._positions[i - 1] if i else 0


class TimeIndex(_IndexFile):
    """(max timestamp so far, relative offset where it was first reached); timestamps increase."""

    entry = _TIME_ENTRY

    def _clear(self) -> None:
        self._timestamps = array("q")
        self._rels = array("i")
        self._last_ts = -1

    def _set(self, entries: list[tuple[int, int]]) -> None:
        self._timestamps = array("q", [e[0] for e in entries])
        self._rels = array("i", [e[1] for e in entries])
        self._last_ts = entries[-1][0] if entries else -1

    def _load(self, data: bytes) -> None:
        self._set(list(_TIME_ENTRY.iter_unpack(data)))

    def __len__(self) -> int:
        self._ensure_loaded()
        return len(self._rels)

    @property
    def last_timestamp(self) -> int:
        self._ensure_loaded()
        return self._last_ts

    def append(self, timestamp: int, rel_offset: int) -> None:
        os.write(self._fd, _TIME_ENTRY.pack(timestamp, rel_offset))
        self._timestamps.append(timestamp)
        self._rels.append(rel_offset)
        self._last_ts = timestamp

    def lookup(self, timestamp: int) -> int | None:
        """Relative offset of the last entry with timestamp <= ``timestamp`` (None if none)."""
        self._ensure_loaded()
        i = bisect_right(self._timestamps, timestamp)
        return self._rels[i - 1] if i else None

    def entries(self) -> list[tuple[int, int]]:
        self._ensure_loaded()
        return list(zip(self._timestamps, self._rels, strict=True))
