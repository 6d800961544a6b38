"""The process's one file-watching service: watches shared per folder, events to the waiters of the file they name,
one reader thread that ends with the last watch, and polling (with one WARNING naming the limit) when the kernel
refuses. The refusal is injected at the kernel boundary (``inotify_add_watch``/``inotify_init``): the real limits
are machine-wide and cannot be lowered for one test."""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import time
from pathlib import Path

import pytest

from headwater.connectors.file import watch
from headwater.connectors.file.watch import FolderWatch, WatchService

pytestmark = pytest.mark.skipif(watch._LIBC is None, reason="inotify is Linux only")


@pytest.fixture
def service(monkeypatch: pytest.MonkeyPatch) -> WatchService:
    """A service of the test's own (the process-wide one may serve other tests' tasks)."""
    fresh = WatchService()
    monkeypatch.setattr(watch, "_service", fresh)
    return fresh


async def woken_within(w: FolderWatch, timeout: float) -> float:
    started = time.monotonic()
    await w.wait(timeout)
    return time.monotonic() - started


def test_waiters_share_a_folder_watch_and_are_woken_for_their_own_file(service: WatchService,
                                                                       tmp_path: Path) -> None:
    async def main() -> None:
        a, b, folder_wide = FolderWatch(tmp_path, "a.txt"), FolderWatch(tmp_path, "b.txt"), FolderWatch(tmp_path)
        other = FolderWatch(tmp_path / "other", "a.txt")
        for w in (a, b, folder_wide, other):
            w.start()
        assert service.watch_count == 2 and service.running  # one watch per folder, one reader for all
        assert service._thread is not None and service._thread.name == "headwater-file-watch"
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, (tmp_path / "a.txt").write_text, "line\n")
        assert await woken_within(a, 10) < 5
        assert await woken_within(folder_wide, 10) < 5
        # b.txt and the other folder's a.txt did not change: their waits run out
        assert await woken_within(b, 0.5) >= 0.5
        assert await woken_within(other, 0.5) >= 0.5
        a.stop()
        assert service.watch_count == 2  # b and the folder-wide waiter still hold the folder
        loop.call_later(0.2, (tmp_path / "b.txt").write_text, "line\n")
        assert await woken_within(b, 10) < 5
        for w in (b, folder_wide, other):
            w.stop()
        assert service.watch_count == 0 and not service.running

    asyncio.run(main())


def test_the_reader_thread_ends_with_the_last_watch(service: WatchService, tmp_path: Path) -> None:
    before = threading.active_count()
    readers: list[threading.Thread] = []

    async def main() -> None:
        watches = [FolderWatch(tmp_path / f"d{i}", "f") for i in range(50)]
        for w in watches:
            w.start()
        assert service.watch_count == 50
        assert threading.active_count() <= before + 1  # one thread for fifty folders
        assert service._thread is not None
        readers.append(service._thread)
        for w in watches:
            w.stop()
        assert not service.running

    asyncio.run(main())
    readers[0].join(10)
    assert not readers[0].is_alive()


@pytest.mark.parametrize(("refused", "limit"), [("inotify_add_watch", "fs.inotify.max_user_watches"),
                                                  ("inotify_init", "fs.inotify.max_user_instances")])
def test_a_refused_watch_polls_warns_once_and_watches_again_once_allowed(
        service: WatchService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        refused: str, limit: str) -> None:
    code = errno.ENOSPC if refused == "inotify_add_watch" else errno.EMFILE
    real = getattr(watch, refused)

    def refuse(*args: object) -> int:
        raise OSError(code, "refused")

    monkeypatch.setattr(watch, refused, refuse)
    monkeypatch.setattr(watch, "RETRY_SECONDS", 0.0)  # ask the kernel again at every wait
    caplog.set_level(logging.INFO, logger=watch.__name__)

    async def main() -> None:
        w = FolderWatch(tmp_path, "f.txt")
        w.start()
        assert not w.watching and not service.running
        await w.wait(0.05)  # asks again, is refused again: no second warning
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1, warnings
        assert limit in warnings[0].getMessage() and str(tmp_path) in warnings[0].getMessage()
        monkeypatch.setattr(watch, refused, real)  # the limit was raised
        await w.wait(0.05)
        assert w.watching and service.running
        asyncio.get_running_loop().call_later(0.2, (tmp_path / "f.txt").write_text, "x\n")
        assert await woken_within(w, 10) < 5
        w.stop()

    asyncio.run(main())
    assert any("again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)


def test_a_removed_folder_leaves_its_waiters_polling_then_watched_again(
        service: WatchService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "gone"
    monkeypatch.setattr(watch, "RETRY_SECONDS", 0.0)

    async def main() -> None:
        w = FolderWatch(folder, "f.txt")
        w.start()
        assert w.watching
        folder.rmdir()
        assert await woken_within(w, 10) < 5  # the folder's own events wake it
        deadline = time.monotonic() + 10
        while w.watching and time.monotonic() < deadline:  # IN_IGNORED may come in a later read
            await w.wait(0.1)
        assert not w.watching and service.watch_count == 0
        folder.mkdir()
        await w.wait(0.05)  # watches again at once
        assert w.watching
        w.stop()

    asyncio.run(main())
