"""The aborted-transaction index of one segment: Kafka's ``<base>.txnindex``.

One 34-byte entry per transaction aborted by a marker in the segment: version (0), producer id, first
offset, last offset (the marker's) and the last stable offset once it was aborted, appended in marker
order. A read_committed Fetch lists the entries overlapping the range it returns (Kafka's
TransactionIndex.collectAbortedTxns), so it never decodes records. The file is written on abort, fsynced
with its segment, and rebuilt from the log's markers when the segment is recovered (broker/topics/
producer_state.py replays them).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

__all__ = ["AbortedTxn", "TransactionIndex", "collect_aborted"]

_ENTRY = struct.Struct(">hqqqq")


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Entries in memory, mirrored to a file created at the first abort (most segments have none)."""

    def __init__(self, path: Path, *, truncate: bool) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._dirty = False
        if truncate:
            path.unlink(missing_ok=True)
            return
        try:
            fd = os.open(path, os.O_RDONLY)  # os-level, no exists() first: every partition opens one at start
        except FileNotFoundError:
            return
        try:
            data = b"".join(iter(lambda: os.read(fd, 1 << 16), b""))
        finally:
            os.close(fd)
        if data:
            usable = len(data) - len(data) % _ENTRY.size  # a torn last entry is dropped
            for pos in range(0, usable, _ENTRY.size):
                version, *fields = _ENTRY.unpack_from(data, pos)
                if version != 0:
                    break
                self.entries.append(AbortedTxn(*fields))

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} is not after "
                             f"the last one ({self.entries[-1].last_offset})")
        self.entries.append(txn)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(0, *txn))
        finally:
            os.close(fd)
        self._dirty = True

    def truncate_from(self, offset: int) -> None:
        """Drop the entries of markers at or after ``offset`` (they are replayed from the log)."""
        kept = [e for e in self.entries if e.last_offset < offset]
        if len(kept) != len(self.entries):
            self.reset(kept)

    def reset(self, entries: Iterable[AbortedTxn]) -> None:
        self.entries = list(entries)
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(_ENTRY.pack(0, *e) for e in self.entries))
        os.replace(tmp, self.path)
        self._dirty = True

    def flush(self) -> None:
        if self._dirty and self.entries:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def rename(self, path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, path)
        self.path = path

    def unlink(self) -> None:
        self.path.unlink(missing_ok=True)


def collect_aborted(indexes: Iterable[TransactionIndex], fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, from the index of the segment
    holding ``fetch_offset`` on; stops at the first entry whose last stable offset reaches the bound (no
    later segment can hold a transaction that began before it), as Kafka's collectAbortedTransactions."""
    found: list[AbortedTxn] = []
    for index in indexes:
        for entry in index.entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found
    return found
