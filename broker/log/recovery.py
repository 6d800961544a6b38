"""Opening a partition directory after a clean or unclean shutdown.

Segments that may hold data written after the last completed flush (the recovery point),
and always the last segment, are validated batch by batch and truncated at the first
bad or partial batch -- the torn tail a crash leaves. Older segments were fsynced, so
only their index files get a cheap sanity check.

A compaction interrupted by a crash is settled first (see cleaner.py for the protocol):
once the cleaner's swap marker is durable, every ``<base>.*.swap`` it lists replaces the
segments in its offset range; without the marker, ``.swap`` and ``.cleaned`` files are
discarded and the original segments, never touched before the marker, stay.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from .fd_cache import DescriptorCache
from .leader_epochs import EpochEntry, LeaderEpochCache
from .segment import LogSegment

log = logging.getLogger(__name__)

__all__ = [
    "CLEANER_SWAP_FILE",
    "Recovered",
    "LOG_START_OFFSET_FILE",
    "RECOVERY_POINT_FILE",
    "finish_swaps",
    "fsync_dir",
    "read_offset_file",
    "read_swap_marker",
    "recover_leader_epochs",
    "recover_segments",
    "sync_filesystem",
    "write_offset_file",
]

LOG_START_OFFSET_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"  # log end offset at the last completed flush
CLEANER_SWAP_FILE = "cleaner-swap"  # the cleaner's commit point: [[base, end offset], ...] of its .swap files
_LEFTOVER_SUFFIXES = (".cleaned", ".swap", ".tmp", ".deleted")
_SEGMENT_EXTS = ("log", "index", "timeindex", "txnindex", "log.deleted", "index.deleted", "timeindex.deleted",
                 "txnindex.deleted")


def read_offset_file(path: Path) -> int | None:
    try:  # os-level: read for every partition at start
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 64)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return int(data.strip())
    except ValueError:
        return None


def write_offset_file(path: Path, value: int, *, durable: bool = True) -> None:
    """Atomically replace ``path`` with ``value`` (tmp + fsync + rename + fsync dir). Without ``durable`` the file
    is rewritten in place and the caller syncs the filesystem afterwards: a crash meanwhile leaves it empty or a
    prefix of the number, read as no or a smaller recovery point (more of the log validated, never less)."""
    if not durable:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, f"{value}\n".encode())
        finally:
            os.close(fd)
        return
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{value}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _syncfs() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


_SYNCFS = _syncfs()


def sync_filesystem(directory: Path) -> None:
    """Write back everything written to the filesystem holding ``directory`` (syncfs(2), else sync(2)): one call
    instead of an fsync per file when every partition closes at shutdown."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        if _SYNCFS is not None and _SYNCFS(fd) == 0:
            return
        if _SYNCFS is not None:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs of {directory}: {os.strerror(err)}")
        os.sync()
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_swap_marker(path: Path) -> list[tuple[int, int]]:
    """The ``(base, end offset)`` groups of a cleaner swap marker; [] if absent or unreadable."""
    try:
        groups = json.loads(path.read_text())["groups"]
        return [(int(base), int(end)) for base, end in groups]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def finish_swaps(directory: Path) -> int:
    """Complete the segment swaps of a cleaner pass whose marker is durable; returns how many.

    For each listed group whose ``<base>.log.swap`` exists, every segment file whose base lies in
    ``[base, end)`` (originals, or originals already renamed ``.deleted``) is removed and the
    ``.swap`` files take the final names (a missing index is rebuilt by the normal open path).
    Runs before leftovers are deleted; the marker is removed last.
    """
    marker = directory / CLEANER_SWAP_FILE
    if not marker.exists():
        return 0
    done = 0
    for base, end in read_swap_marker(marker):
        stem = f"{base:020d}"
        if not (directory / f"{stem}.log.swap").exists():
            continue  # already renamed into place (or rolled back before the crash)
        for path in list(directory.iterdir()):
            name_stem, _, ext = path.name.partition(".")
            if ext in _SEGMENT_EXTS and len(name_stem) == 20 and name_stem.isdigit():
                if base <= int(name_stem) < end:
                    path.unlink(missing_ok=True)
        for ext in (".index", ".timeindex", ".txnindex", ".log"):  # the log last, as LogSegment.change_suffix
            src = directory / f"{stem}{ext}.swap"
            if src.exists():
                os.replace(src, directory / f"{stem}{ext}")
        done += 1
    fsync_dir(directory)
    marker.unlink(missing_ok=True)
    fsync_dir(directory)
    return done


def _segment_bases(directory: Path) -> list[int]:
    finish_swaps(directory)
    bases: list[int] = []
    stems: set[str] = set()
    indexes: list[tuple[str, str]] = []
    for name in os.listdir(directory):  # one scan: this runs for every partition at start
        if name.endswith(_LEFTOVER_SUFFIXES):
            (directory / name).unlink(missing_ok=True)  # an uncommitted cleaner pass, or an interrupted flush/delete
            continue
        stem, _, ext = name.partition(".")
        if ext == "log" and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
            stems.add(stem)
        elif ext in ("index", "timeindex", "txnindex"):
            indexes.append((stem, name))
    for stem, name in indexes:  # orphan indexes of a segment that is gone
        if stem not in stems:
            (directory / name).unlink(missing_ok=True)
    return sorted(bases)


class Recovered(NamedTuple):
    segments: list[LogSegment]  # at least one: the active segment, last
    log_start_offset: int
    log_end_offset: int
    recovery_point: int | None  # the file's, once repaired (None: none yet)
    scanned_from: int  # base offset of the first segment whose batches were scanned (validated)


def recover_segments(directory: Path, index_interval_bytes: int,
                     fd_cache: DescriptorCache | None = None) -> Recovered:
    """Open every segment in ``directory``, repairing as needed (through ``fd_cache``, when given)."""
    bases = _segment_bases(directory)
    start = read_offset_file(directory / LOG_START_OFFSET_FILE) or 0
    recovery_point = read_offset_file(directory / RECOVERY_POINT_FILE)
    segments: list[LogSegment] = []
    scanned_from: int | None = None
    for i, base in enumerate(bases):
        seg = LogSegment.open(directory, base, index_interval_bytes, cache=fd_cache)
        segments.append(seg)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        if next_base is None or recovery_point is None or next_base > recovery_point:
            if scanned_from is None:
                scanned_from = base
            cut = seg.recover()
            if cut:
                log.warning("%s: truncated %d bytes of torn or corrupt data at the end of segment %020d.log",
                            directory, cut, base)
            if cut and next_base is not None:
                # A torn segment that is not the last: later offsets cannot follow it (as Kafka).
                for later in bases[i + 1 :]:
                    LogSegment.open(directory, later, index_interval_bytes).delete()
                break
        elif not seg.indexes_ok():
            seg.rebuild_indexes()

    if not segments:
        segments.append(LogSegment.create(directory, start, index_interval_bytes, cache=fd_cache))
        scanned_from = start
    log_end = segments[-1].next_offset
    assert log_end is not None  # the last segment was scanned (or is new)
    if start > log_end:
        # The persisted start lies beyond what survived a crash: start over, empty, at it.
        for seg in segments:
            seg.delete()
        segments = [LogSegment.create(directory, start, index_interval_bytes, cache=fd_cache)]
        log_end = scanned_from = start
    if recovery_point is not None and recovery_point > log_end:
        # Data past the old recovery point was lost; segments written from here on must not
        # be mistaken for flushed ones at the next open.
        write_offset_file(directory / RECOVERY_POINT_FILE, log_end)
        recovery_point = log_end
    assert scanned_from is not None  # the last segment is always scanned
    return Recovered(segments, max(start, segments[0].base_offset), log_end, recovery_point, scanned_from)


def recover_leader_epochs(cache: LeaderEpochCache, segments: list[LogSegment], scanned_from: int,
                          log_start: int) -> None:
    """Load the leader-epoch cache of a log just recovered: its checkpoint, with the entries from
    ``scanned_from`` on replaced by those of the batches recovery scanned (a crash may have lost a new epoch's
    write, or the tail it began in). A missing or unreadable checkpoint is rebuilt from every batch header
    and written, once the log has batches, so that the next open does not read them again."""
    entries = LeaderEpochCache.read_checkpoint(cache.path)
    found: list[EpochEntry] = []
    for seg in segments:
        if seg.base_offset >= scanned_from:
            found.extend(EpochEntry(*e) for e in seg.epoch_starts)
        elif entries is None:  # not scanned by recovery: its headers alone
            found.extend(EpochEntry(h.partition_leader_epoch, h.base_offset) for _, h in seg.batches()
                         if h.partition_leader_epoch >= 0)
    if entries is None:
        cache.replace_from(0, found, write=any(seg.size for seg in segments))
    else:
        cache.load(entries)
        cache.replace_from(scanned_from, found)
    cache.truncate_from_start(log_start)
