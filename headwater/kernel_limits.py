"""The kernel limits a process can run out of, and what to raise when it does.

A failure that comes from a limit (too many open files, inotify instances or watches) names the
limit, its current figure and the setting to raise, instead of a bare ``OSError``.
"""

from __future__ import annotations

import errno
import resource
from pathlib import Path

__all__ = ["inotify_setting", "limit_error", "limit_fix", "nofile_limit"]

# Errors that mean a limit ran out rather than something wrong with one file or socket.
_LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})


def nofile_limit() -> str:
    """This process's RLIMIT_NOFILE as ``soft (hard H)``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return f"{_figure(soft)} (hard {_figure(hard)})"


def inotify_setting(name: str) -> str:
    """A figure of /proc/sys/fs/inotify (``max_user_watches``, ``max_user_instances``), or ``unknown``."""
    try:
        return Path(f"/proc/sys/fs/inotify/{name}").read_text().strip()
    except OSError:
        return "unknown"


def limit_fix(exc: OSError) -> str | None:
    """What ran out and what to raise, when ``exc`` is the open-file limit of the process or of the system."""
    if exc.errno == errno.EMFILE:
        return (f"the process has as many files and sockets open as its limit allows (ulimit -n / RLIMIT_NOFILE, "
                f"now {nofile_limit()}): raise it (ulimit -n in the shell that starts it, LimitNOFILE= in a systemd "
                f"unit, --ulimit nofile= for a container) or run fewer tasks on this worker")
    if exc.errno == errno.ENFILE:
        return ("the system's table of open files is full (fs.file-max, now "
                f"{_proc_sys('fs/file-max')}): raise it (sysctl -w fs.file-max=...) or close files elsewhere")
    return None


def limit_error(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` (itself, or its cause or context) that a limit explains, if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _LIMIT_ERRNOS:
            return current
        current = current.__cause__ or current.__context__
    return None


def _figure(value: int) -> str:
    return "unlimited" if value == resource.RLIM_INFINITY else str(value)


def _proc_sys(name: str) -> str:
    try:
        return Path(f"/proc/sys/{name}").read_text().split()[0]
    except (OSError, IndexError):
        return "unknown"
