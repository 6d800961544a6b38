"""Opening a partition directory after a clean or unclean shutdown.

Segments that may hold data written after the last completed flush (the recovery point),
and always the last segment, are validated batch by batch and truncated at the first
bad or partial batch -- the torn tail a crash leaves. Older segments were fsynced, so
only their index files get a cheap sanity check.
"""

from __future__ import annotations

import os
from pathlib import Path

from .segment import LogSegment

__all__ = [
    "LOG_START_OFFSET_FILE",
    "RECOVERY_POINT_FILE",
    "fsync_dir",
    "read_offset_file",
    "recover_segments",
    "write_offset_file",
]

LOG_START_OFFSET_FILE = "log-start-offset"
RECOVERY_POINT_FILE = "recovery-point"  # log end offset at the last completed flush
_LEFTOVER_SUFFIXES = (".cleaned", ".swap", ".tmp", ".deleted")


def read_offset_file(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def write_offset_file(path: Path, value: int) -> None:
    """Atomically replace ``path`` with ``value`` (tmp + fsync + rename + fsync dir)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, f"{value}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _segment_bases(directory: Path) -> list[int]:
    bases: list[int] = []
    stems: set[str] = set()
    for path in list(directory.iterdir()):
        name = path.name
        if name.endswith(_LEFTOVER_SUFFIXES):
            path.unlink(missing_ok=True)  # an interrupted cleaner/flush/delete: the originals remain
            continue
        stem, _, ext = name.partition(".")
        if ext == "log" and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
            stems.add(stem)
    for path in list(directory.glob("*index")):  # orphan indexes of a segment that is gone
        stem, _, ext = path.name.partition(".")
        if ext in ("index", "timeindex") and stem not in stems:
            path.unlink(missing_ok=True)
    return sorted(bases)


def recover_segments(directory: Path, index_interval_bytes: int) -> tuple[list[LogSegment], int, int]:
    """Open every segment in ``directory``, repairing as needed.

    Returns ``(segments, log_start_offset, log_end_offset)``; there is always at least one
    segment (the active one, last).
    """
    bases = _segment_bases(directory)
    start = read_offset_file(directory / LOG_START_OFFSET_FILE) or 0
    recovery_point = read_offset_file(directory / RECOVERY_POINT_FILE)
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        seg = LogSegment.open(directory, base, index_interval_bytes)
        segments.append(seg)
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        if next_base is None or recovery_point is None or next_base > recovery_point:
            if seg.recover() and next_base is not None:
                # A torn segment that is not the last: later offsets cannot follow it (as Kafka).
                for later in bases[i + 1 :]:
                    LogSegment.open(directory, later, index_interval_bytes).delete()
                break
        elif not seg.indexes_ok():
            seg.rebuild_indexes()

    if not segments:
        segments.append(LogSegment.create(directory, start, index_interval_bytes))
    log_end = segments[-1].next_offset
    assert log_end is not None  # the last segment was scanned (or is new)
    if start > log_end:
        # The persisted start lies beyond what survived a crash: start over, empty, at it.
        for seg in segments:
            seg.delete()
        segments = [LogSegment.create(directory, start, index_interval_bytes)]
        log_end = start
    if recovery_point is not None and recovery_point > log_end:
        # Data past the old recovery point was lost; segments written from here on must not
        # be mistaken for flushed ones at the next open.
        write_offset_file(directory / RECOVERY_POINT_FILE, log_end)
    return segments, max(start, segments[0].base_offset), log_end
