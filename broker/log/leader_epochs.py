"""A partition's leader epochs: at which offset each leader epoch began (Kafka's LeaderEpochFileCache).

Every v2 batch carries the epoch of the leader that appended it (``partitionLeaderEpoch``, bytes 12-15 of the
batch, outside the CRC). The cache keeps ``(epoch, start offset)`` of each epoch present in the log, in
increasing order of both, so a replica that returns can ask the leader where its last epoch ended
(OffsetForLeaderEpoch) and truncate what the new leader never had; consumers use it to spot a truncated log.

Persisted in Kafka's ``leader-epoch-checkpoint`` text file (a version line ``0``, a count line, then one
``epoch startOffset`` line per entry). A new epoch is written at once without an fsync (one per leadership
change, on the append path); the log's flush makes it durable before the recovery point moves (``sync``), and
recovery rebuilds the entries of the segments it scans from their batch headers, so a lost write is repaired.
Truncations are written durably at once: the cache must never claim epochs the log has lost.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
    "batch_leader_epoch",
    "stamp_leader_epoch",
]

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1  # Kafka's OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH (and a batch's "no epoch")
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0
_EPOCH_FIELD = slice(12, 16)  # partitionLeaderEpoch in a v2 batch: after baseOffset (8) and batchLength (4)


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def stamp_leader_epoch(batch: bytearray, epoch: int) -> None:
    """Write ``epoch`` into the batch's partitionLeaderEpoch field (outside the CRC: no re-checksum)."""
    batch[_EPOCH_FIELD] = epoch.to_bytes(4, "big", signed=True)


def batch_leader_epoch(batch: bytes | bytearray | memoryview, pos: int = 0) -> int:
    return int.from_bytes(batch[pos + 12 : pos + 16], "big", signed=True)


def _assign(entries: list[EpochEntry], entry: EpochEntry) -> list[EpochEntry] | None:
    """Kafka's assign on ``entries`` (changed in place): None when ``entry`` changes nothing (the latest epoch
    again, at or after its start), else the entries dropped from the end to keep both columns increasing."""
    if entries and entries[-1].epoch == entry.epoch and entry.start_offset >= entries[-1].start_offset:
        return None
    removed: list[EpochEntry] = []
    while entries and (entries[-1].epoch >= entry.epoch or entries[-1].start_offset >= entry.start_offset):
        removed.append(entries.pop())
    entries.append(entry)
    return removed[::-1]


class LeaderEpochCache:
    """``(epoch, start offset)`` entries of one partition log, persisted in ``<dir>/leader-epoch-checkpoint``.

    ``log_end_offset`` gives the log's end, the end of the latest epoch. Event-loop thread, except ``sync``
    (the log's flush, any thread), which only fsyncs the file.
    """

    def __init__(self, directory: Path, log_end_offset: Callable[[], int],
                 entries: Iterable[EpochEntry] = ()) -> None:
        self.path = Path(directory) / LEADER_EPOCH_CHECKPOINT_FILE
        self._log_end_offset = log_end_offset
        self._entries: list[EpochEntry] = list(entries)
        self._epochs: list[int] = [e.epoch for e in self._entries]  # bisect key
        # The latest epoch as a plain int (-1: none), read by every append.
        self.latest = self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH
        self._unsynced = False  # written since the last fsync

    # ------------------------------------------------------------------ file
    @staticmethod
    def read_checkpoint(path: Path) -> list[EpochEntry] | None:
        """The entries of a checkpoint file; None when it is missing or not Kafka's format (then the caller
        rebuilds the cache from the log's batches)."""
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("%s unreadable (%s): leader epochs rebuilt from the log", path, exc)
            return None
        lines = text.splitlines()
        try:
            if int(lines[0]) != _VERSION:
                raise ValueError(f"version {lines[0]!r}, expected {_VERSION}")
            count = int(lines[1])
            if len(lines) - 2 != count:
                raise ValueError(f"{len(lines) - 2} entries, the count line says {count}")
            entries = []
            for line in lines[2:]:
                epoch, start = line.split()
                entries.append(EpochEntry(int(epoch), int(start)))
        except (ValueError, IndexError) as exc:
            log.warning("%s is not a leader-epoch checkpoint (%s): leader epochs rebuilt from the log", path, exc)
            return None
        if any(b.epoch <= a.epoch or b.start_offset < a.start_offset for a, b in pairwise(entries)):
            log.warning("%s holds entries out of order: leader epochs rebuilt from the log", path)
            return None
        return entries

    def _write(self, *, durable: bool) -> None:
        body = f"{_VERSION}\n{len(self._entries)}\n" + "".join(f"{e} {s}\n" for e, s in self._entries)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, body.encode())
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        if durable:
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        self._unsynced = not durable

    def sync(self) -> None:
        """Make the last write durable (the log's flush, before it moves the recovery point)."""
        if self._unsynced:
            self._unsynced = False
            try:
                fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return  # the partition is being deleted
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _set(self, entries: list[EpochEntry], *, durable: bool) -> None:
        self._entries = entries
        self._epochs = [e.epoch for e in entries]
        self.latest = entries[-1].epoch if entries else UNDEFINED_EPOCH
        self._write(durable=durable)

    # ------------------------------------------------------------------ queries
    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` as Kafka's LeaderEpochFileCache.endOffsetFor: the largest epoch <= ``epoch``
        and the start offset of the first epoch after it, or the log end offset for the latest epoch; an
        epoch below every entry gets itself and the first entry's start; an unknown (-1) or too large epoch
        ``(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)``."""
        entries = self._entries
        if epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == epoch:
            return epoch, self._log_end_offset()
        higher = bisect_right(self._epochs, epoch)  # first entry with a larger epoch
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    # ------------------------------------------------------------------ updates
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` begins at ``start_offset``. As Kafka: the latest epoch again (at or after its
        start) changes nothing; otherwise entries that would no longer increase in both epoch and offset
        (epoch >= ``epoch`` or start >= ``start_offset``) are dropped from the end first."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch entry ({epoch}, {start_offset}): epoch and start offset must be >= 0")
        entries = list(self._entries)
        removed = _assign(entries, EpochEntry(epoch, start_offset))
        if removed is None:
            return
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            log.warning("%s: new epoch entry (%d, %d) replaced conflicting entries %s", self.path.parent, epoch,
                        start_offset, [tuple(e) for e in removed])
        self._set(entries, durable=False)

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries starting at or after ``end_offset`` (the log was truncated there)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        keep = bisect_left([e.start_offset for e in self._entries], end_offset)
        self._set(self._entries[:keep], durable=True)

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: entries wholly before it go, and the epoch holding it
        starts there (an entry starting exactly there stays as it is), as Kafka's truncateFromStart."""
        entries = self._entries
        first_kept = bisect_right([e.start_offset for e in entries], start_offset)
        if first_kept == 0:
            return
        holding = entries[first_kept - 1]
        if first_kept == 1 and holding.start_offset == start_offset:
            return
        self._set([EpochEntry(holding.epoch, start_offset), *entries[first_kept:]], durable=True)

    def load(self, entries: list[EpochEntry]) -> None:
        """Take the entries read from the checkpoint (no write)."""
        self._entries = list(entries)
        self._epochs = [e.epoch for e in entries]
        self.latest = entries[-1].epoch if entries else UNDEFINED_EPOCH

    def replace_from(self, offset: int, entries: list[EpochEntry], *, write: bool = False) -> None:
        """Recovery: the entries from ``offset`` on become those assigned from ``entries`` (the epochs of
        the batches recovery read, in offset order); the file is written when that changes anything, or
        given ``write``."""
        kept = [e for e in self._entries if e.start_offset < offset]
        for entry in entries:
            _assign(kept, entry)
        if write or kept != self._entries:
            self._set(kept, durable=True)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path.parent.name}, {[tuple(e) for e in self._entries]})"
