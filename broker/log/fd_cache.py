"""The broker's one bounded cache of open segment files (``log.open.files.max``).

A segment holds three descriptors while open (its ``.log``, ``.index`` and ``.timeindex``). Kafka keeps every
segment open; with tens of thousands of partitions that outruns the open-files limit, so here segments open on
demand and the cache closes the least recently used ones once more descriptors are open than its capacity.
The active segment of a partition being written is used at every append and so stays open; an idle one closes
and reopens transparently at its next read or write (the in-memory indexes stay loaded).

Recency is tracked the CLOCK way (a ``used`` flag the segment sets at each access, swept from the oldest):
one attribute store on the append and fetch paths, no lock and no syscall there.

Threads: opening, closing and eviction run under the cache's lock. Only the owner thread (the event loop's,
which created the cache) opens and evicts, because it uses descriptors without the lock; another thread (a flush,
the cleaner) pins a segment that is open for as long as it uses it, so the owner never closes it under that
thread, and uses descriptors of its own for one that is not (segment.py), so the bound holds.
"""

from __future__ import annotations

import errno
import logging
import resource
import threading
from collections import OrderedDict
from typing import Protocol

__all__ = ["DescriptorCache", "FileHandle", "default_capacity"]

log = logging.getLogger(__name__)

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)
MIN_CAPACITY = 48  # 16 segments: below this a handful of partitions would reopen at every request


class FileHandle(Protocol):
    """What the cache needs of a segment."""

    used: bool  # set at each access, cleared by the eviction sweep
    pins: int  # > 0: another thread is using the descriptors (never evicted)

    def _open_files(self) -> int:
        """Open the descriptors; how many."""

    def _close_files(self) -> int:
        """Close the descriptors; how many were open."""


def default_capacity(reserve_min: int = 256) -> int:
    """Descriptors for segments under the current soft ``RLIMIT_NOFILE``: the limit less a quarter (at least
    ``reserve_min``) left to sockets, the listeners, state files and whatever shares the process."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    return max(MIN_CAPACITY, soft - max(reserve_min, soft // 4))


class DescriptorCache:
    """At most ``capacity`` segment descriptors open at once (pinned ones may go over it for a while)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 3:
            raise ValueError(f"log.open.files.max must allow at least one segment (3 files), got {capacity}")
        self.capacity = capacity
        self._handles: OrderedDict[FileHandle, None] = OrderedDict()  # open ones, oldest first
        self._fds = 0
        self._lock = threading.Lock()
        self._owner = threading.get_ident()
        self.opens = 0  # segments opened through the cache (first opens and reopens)
        self.evictions = 0

    def own_from_this_thread(self) -> None:
        """Make the calling thread the owner (the event loop's, when the broker starts serving)."""
        with self._lock:
            self._owner = threading.get_ident()

    @property
    def open_files(self) -> int:
        return self._fds

    def open(self, handle: FileHandle, opened: int | None = None) -> None:
        """Open ``handle`` unless it is (``opened``: it just opened that many descriptors itself), then make
        room by closing idle ones; on EMFILE/ENFILE the owner closes idle ones and tries once more."""
        with self._lock:
            if opened is None:
                if handle in self._handles:
                    handle.used = True
                    return
                try:
                    opened = handle._open_files()
                except OSError as exc:
                    if exc.errno not in _OUT_OF_DESCRIPTORS or not self._owns():
                        raise
                    freed = self._evict_locked(None, self._fds // 2)
                    log.warning("out of descriptors (%s) with %d segment files open: closed %d idle ones and "
                                "retrying", exc.strerror, self._fds + freed, freed)
                    opened = handle._open_files()
            self._fds += opened
            self._handles[handle] = None
            handle.used = True
            self.opens += 1
            if self._fds > self.capacity and self._owns():
                self._evict_locked(handle, self._fds - self.capacity)

    def closed(self, handle: FileHandle) -> None:
        """``handle`` is closing for good: forget it and close its descriptors."""
        with self._lock:
            n = handle._close_files()
            if handle in self._handles:
                del self._handles[handle]
                self._fds -= n

    def pin(self, handle: FileHandle) -> None:
        """Keep ``handle`` open (opening it) until ``unpin``: the owner thread's."""
        with self._lock:
            handle.pins += 1
        try:
            self.open(handle)
        except BaseException:
            self.unpin(handle)
            raise

    def pin_if_open(self, handle: FileHandle) -> bool:
        """Pin ``handle`` if its files are open (any thread); whether it did (then ``unpin`` after use)."""
        with self._lock:
            if handle in self._handles:
                handle.pins += 1
                return True
            return False

    def unpin(self, handle: FileHandle) -> None:
        with self._lock:
            handle.pins -= 1

    def _owns(self) -> bool:
        return threading.get_ident() == self._owner

    def _evict_locked(self, keep: FileHandle | None, want: int) -> int:
        """Close idle handles, oldest first, until ``want`` descriptors are freed (second chance for those used
        since the last sweep; pinned ones and ``keep`` stay); how many were freed."""
        handles = self._handles
        freed = 0
        sweeps = 2 * len(handles)
        while freed < want and sweeps > 0 and handles:
            sweeps -= 1
            handle, _ = handles.popitem(last=False)
            if handle is keep or handle.pins or handle.used:
                if handle is not keep:
                    handle.used = False
                handles[handle] = None
                continue
            n = handle._close_files()
            self._fds -= n
            freed += n
            self.evictions += 1
        return freed
