"""Kafka's ``replication-offset-checkpoint``: the high watermark of every partition this broker holds, kept in
the log directory so a restarted broker does not show consumers records it never knew were committed.

The layout is Kafka's OffsetCheckpointFile: a version line (0), a count line, then ``<topic> <partition>
<offset>`` per partition. It is replaced atomically (a temporary file, fsync, rename).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..log.recovery import fsync_dir

__all__ = ["HIGH_WATERMARK_FILE", "read_checkpoint", "write_checkpoint"]

log = logging.getLogger(__name__)

HIGH_WATERMARK_FILE = "replication-offset-checkpoint"
_VERSION = 0


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The offsets in ``path`` ({} when it is missing). A damaged file is logged and read as empty: the high
    watermarks then start at the log start and come back from the leaders, as Kafka treats a lost file."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return {}
    try:
        if int(lines[0]) != _VERSION:
            raise ValueError(f"version {lines[0]!r}, expected {_VERSION}")
        count = int(lines[1])
        offsets = {}
        for line in lines[2 : 2 + count]:
            topic, partition, offset = line.split(" ")
            offsets[(topic, int(partition))] = int(offset)
        if len(offsets) != count:
            raise ValueError(f"{len(offsets)} entries, the header says {count}")
        return offsets
    except (ValueError, IndexError) as exc:
        log.error("%s is damaged and was ignored (high watermarks start from the leaders): %s", path, exc)
        return {}


def write_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Replace ``path`` with ``offsets``, durably."""
    text = "".join([f"{_VERSION}\n{len(offsets)}\n", *(f"{t} {p} {o}\n" for (t, p), o in sorted(offsets.items()))])
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(text.encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
