"""The open-files limit at start: the soft ``RLIMIT_NOFILE`` raised to the hard one, as servers do.

Shells and service managers often give 1024 soft with a much larger hard limit; the broker's segment files and
sockets then run out long before the disk does. The figures are logged, since they bound what the broker serves
(log/fd_cache.py derives ``log.open.files.max`` from them).
"""

from __future__ import annotations

import logging
import resource
from pathlib import Path

__all__ = ["raise_open_files_limit"]

log = logging.getLogger("headwater.broker")

_NR_OPEN = Path("/proc/sys/fs/nr_open")  # Linux refuses a limit above it, even an "unlimited" hard one


def _ceiling(hard: int) -> int:
    try:
        nr_open = int(_NR_OPEN.read_text())
    except (OSError, ValueError):
        nr_open = 1 << 20
    return nr_open if hard == resource.RLIM_INFINITY else min(hard, nr_open)


def raise_open_files_limit() -> tuple[int, int]:
    """Raise the soft open-files limit to the hard limit; ``(before, after)`` soft limits, both logged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _ceiling(hard)
    after = soft
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            after = target
        except (ValueError, OSError) as exc:
            log.warning("open-files limit (RLIMIT_NOFILE) %d could not be raised to %d: %s", soft, target, exc)
    hard_text = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    if after != soft:
        log.info("open-files limit (RLIMIT_NOFILE) raised from %d to %d (hard limit %s)", soft, after, hard_text)
    else:
        log.info("open-files limit (RLIMIT_NOFILE) %s (hard limit %s): already at the hard limit", soft, hard_text)
    return soft, after
