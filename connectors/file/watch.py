"""One file-watching service per process, waking the asyncio waiters of the tasks that watch a folder or a file.

Every file task used to start its own watchdog Observer: one inotify instance and three threads each, so a
worker with a couple of hundred file tasks ran out of ``fs.inotify.max_user_instances`` (128 by default) and ran
hundreds of threads. Here one inotify instance and one reader thread serve the whole process: a watch is added
per folder (the kernel gives one descriptor per inode, so two tasks watching one folder share it, counted here)
and removed with its last waiter; the reader thread hands each event to the waiters of the file it names (and
to those of the whole folder) with ``call_soon_threadsafe`` into their own event loops. The thread starts with
the first watch and ends with the last.

When the kernel refuses (``fs.inotify.max_user_watches`` reached: ENOSPC; ``max_user_instances`` or the
open-file limit: EMFILE) the task is not failed: its ``wait`` simply runs out its timeout, which makes it poll,
and it says so once in a WARNING naming the limit and what to raise. It tries to watch again every
``RETRY_SECONDS``, so raising the limit brings events back without a restart.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import select
import struct
import sys
import threading
import time
from pathlib import Path

from headwater.kernel_limits import inotify_setting, nofile_limit

__all__ = ["FolderWatch", "WatchService", "service"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 60.0  # how often a polling watch asks the kernel again

# <sys/inotify.h>
IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE = 0x2, 0x4, 0x8
IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR = 0x400, 0x800, 0x4000, 0x8000, 0x01000000
WATCH_MASK = (IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
              | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len (the name follows, NUL-padded)
_READ_SIZE = 64 * 1024


# -- the kernel boundary (replaceable in tests: the inotify limits are machine-wide) ----------------------------

def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    names = ("inotify_init1", "inotify_add_watch", "inotify_rm_watch")
    return libc if all(hasattr(libc, name) for name in names) else None


_LIBC = _libc()


def _check(result: int) -> int:
    if result == -1:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def inotify_init() -> int:
    """A new inotify instance (non-blocking, close-on-exec); OSError(EMFILE) at ``max_user_instances``."""
    if _LIBC is None:
        raise OSError(errno.ENOSYS, "inotify is not available on this platform")
    return _check(_LIBC.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))


def inotify_add_watch(fd: int, path: bytes, mask: int) -> int:
    """A watch descriptor for ``path`` (the same one again for the same inode); OSError(ENOSPC) at
    ``max_user_watches``."""
    assert _LIBC is not None
    return _check(_LIBC.inotify_add_watch(fd, path, mask))


def inotify_rm_watch(fd: int, wd: int) -> None:
    assert _LIBC is not None
    _LIBC.inotify_rm_watch(fd, wd)  # EINVAL: already gone with its folder


# -- the service ----------------------------------------------------------------------------------------------------

class WatchService:
    """The process's inotify instance, its reader thread and its watches (one per watched folder inode)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._wake_w: int | None = None  # written to stop the reader thread
        self._thread: threading.Thread | None = None
        self._watches: dict[int, set[FolderWatch]] = {}  # wd -> its waiters

    @property
    def watch_count(self) -> int:
        with self._lock:
            return len(self._watches)

    @property
    def running(self) -> bool:
        with self._lock:
            return self._thread is not None

    def add(self, waiter: FolderWatch) -> int:
        """Watch ``waiter.folder`` for ``waiter``; its watch descriptor. OSError when the kernel refuses."""
        with self._lock:
            if self._fd is None:
                self._start()
            assert self._fd is not None
            try:
                wd = inotify_add_watch(self._fd, os.fsencode(waiter.folder), WATCH_MASK)
            except OSError:
                if not self._watches:
                    self._stop()
                raise
            self._watches.setdefault(wd, set()).add(waiter)
            return wd

    def remove(self, waiter: FolderWatch, wd: int) -> None:
        with self._lock:
            waiters = self._watches.get(wd)
            if waiters is None:
                return  # gone with its folder
            waiters.discard(waiter)
            if waiters:
                return
            del self._watches[wd]
            if self._fd is not None:
                inotify_rm_watch(self._fd, wd)
            if not self._watches:
                self._stop()

    def _start(self) -> None:
        fd = inotify_init()
        wake_r, self._wake_w = os.pipe()
        self._fd = fd
        self._thread = threading.Thread(target=self._read, args=(fd, wake_r), name="headwater-file-watch",
                                        daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        """Ask the reader thread to end; it closes the instance (and with it the watches) itself."""
        if self._wake_w is not None:
            os.write(self._wake_w, b"x")
            os.close(self._wake_w)
        self._fd = self._wake_w = self._thread = None

    def _read(self, fd: int, wake_r: int) -> None:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        try:
            while True:
                ready = {f for f, _ in poller.poll()}
                if wake_r in ready:
                    return
                try:
                    data = os.read(fd, _READ_SIZE)
                except BlockingIOError:
                    continue
                self._dispatch(data)
        except Exception:
            log.exception("the file-watching thread failed; file tasks notice changes by polling until the next "
                          "watch starts it again")
            with self._lock:
                if self._fd == fd:
                    for wd, waiters in self._watches.items():
                        for waiter in waiters:
                            waiter.lost(wd)  # they poll, and watch again (on a new instance) at their next wait
                    self._watches.clear()
                    self._fd = self._thread = None
                    if self._wake_w is not None:
                        os.close(self._wake_w)
                        self._wake_w = None
        finally:
            os.close(fd)
            os.close(wake_r)

    def _dispatch(self, data: bytes) -> None:
        wake: set[FolderWatch] = set()
        with self._lock:
            offset = 0
            while offset + _EVENT.size <= len(data):
                wd, mask, _, size = _EVENT.unpack_from(data, offset)
                name = data[offset + _EVENT.size: offset + _EVENT.size + size].rstrip(b"\0")
                offset += _EVENT.size + size
                if mask & IN_Q_OVERFLOW:  # events were lost: everyone looks
                    for every in self._watches.values():
                        wake |= every
                    continue
                waiters = self._watches.get(wd)
                if not waiters:
                    continue
                if mask & IN_IGNORED:  # the folder went away (deleted, unmounted): its waiters poll
                    del self._watches[wd]
                    for waiter in waiters:
                        waiter.lost(wd)
                    wake |= waiters
                    continue
                wake.update(w for w in waiters if w.name is None or not name or w.name == name)
        for waiter in wake:
            waiter.notify()


_service = WatchService()


def service() -> WatchService:
    """The process's file-watching service."""
    return _service


# -- what a task holds ---------------------------------------------------------------------------------------

class FolderWatch:
    """``await watch.wait(timeout)`` returns early when the folder (or, given ``name``, that file in it) changes.

    Watching is an optimisation: when the kernel refuses a watch, ``wait`` lasts its full timeout and the task
    polls at that pace.
    """

    def __init__(self, folder: Path, name: str | None = None) -> None:
        self.folder = folder
        self.name = os.fsencode(name) if name is not None else None
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wd: int | None = None
        self._notified = False  # an event is on its way to the loop (so a burst schedules one wake-up)
        self._retry_at = 0.0  # when to ask the kernel again, while polling
        self._warned = False
        self._service = _service

    @property
    def watching(self) -> bool:
        """Whether the kernel tells this watch of changes (False: polling)."""
        return self._wd is not None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._arm()

    def _arm(self) -> None:
        try:
            self._wd = self._service.add(self)
        except OSError as exc:
            self._retry_at = time.monotonic() + RETRY_SECONDS
            self._refused(exc)
            return
        if self._warned:
            log.info("watching %s for changes again (no longer polling)", self.folder)
            self._warned = False

    def _refused(self, exc: OSError) -> None:
        if self._warned:
            return
        self._warned = True
        what = self._watched()
        if exc.errno == errno.ENOSPC:
            log.warning("the kernel refused to watch %s: the inotify watches of this user are all in use "
                        "(fs.inotify.max_user_watches = %s). Polling %s instead; to be told of changes at once, raise "
                        "it (sysctl -w fs.inotify.max_user_watches=<more>, and in /etc/sysctl.d/ to keep it)",
                        self.folder, inotify_setting("max_user_watches"), what)
        elif exc.errno == errno.EMFILE:
            log.warning("the kernel refused an inotify instance to watch %s: this user's instances are all in use "
                        "(fs.inotify.max_user_instances = %s), or the process's open-file limit is reached (ulimit -n "
                        "%s). Polling %s instead; to be told of changes at once, raise fs.inotify.max_user_instances "
                        "(sysctl -w fs.inotify.max_user_instances=<more>) or ulimit -n",
                        self.folder, inotify_setting("max_user_instances"), nofile_limit(), what)
        elif exc.errno in (errno.ENOMEM, errno.ENFILE):
            log.warning("the kernel refused to watch %s (%s: kernel memory or the system's open files, fs.file-max). "
                        "Polling %s instead", self.folder, exc.strerror, what)
        else:
            log.warning("cannot watch %s for changes (%s); polling %s instead", self.folder, exc.strerror or exc, what)

    def _watched(self) -> str:
        return f"{self.folder / os.fsdecode(self.name)}" if self.name is not None else f"{self.folder}"

    def notify(self) -> None:
        """Wake the waiter (from the reader thread): one scheduled wake-up per burst of events."""
        if self._notified or self._loop is None:
            return
        self._notified = True
        try:
            self._loop.call_soon_threadsafe(self._set)
        except RuntimeError:
            pass  # the task's loop has closed

    def _set(self) -> None:
        if self._event is not None:
            self._event.set()

    def lost(self, wd: int) -> None:
        """The kernel dropped the watch (the folder was removed): poll, and watch again at the next wait."""
        if self._wd == wd:
            self._wd = None
            self._retry_at = 0.0

    async def wait(self, timeout: float) -> None:
        assert self._event is not None
        if self._wd is None and time.monotonic() >= self._retry_at:
            self._arm()
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
        # Cleared before the caller looks again, so a change after this point wakes the next wait.
        self._event.clear()
        self._notified = False

    def wake(self) -> None:
        """End the current wait (from the task's loop, or from the thread a sync ``stop`` runs in)."""
        if self._loop is None:
            return
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self._set()
            return
        try:
            self._loop.call_soon_threadsafe(self._set)
        except RuntimeError:
            pass  # the task's loop has closed

    def stop(self) -> None:
        if self._wd is not None:
            wd, self._wd = self._wd, None
            self._service.remove(self, wd)
