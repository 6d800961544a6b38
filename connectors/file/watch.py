"""A watchdog observer that wakes an asyncio waiter when something in a folder changes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer

__all__ = ["FolderWatch"]


class FolderWatch:
    """``await watch.wait(timeout)`` returns early when the folder sees any event."""

    def __init__(self, folder: Path, recursive: bool = False) -> None:
        self.folder = folder
        self.recursive = recursive
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._observer: Any = None

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        watch = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if watch._loop is not None and not watch._loop.is_closed():
                    watch._loop.call_soon_threadsafe(watch._event.set)  # type: ignore[union-attr]

        self.folder.mkdir(parents=True, exist_ok=True)
        self._observer = Observer()
        self._observer.schedule(_Handler(), str(self.folder), recursive=self.recursive)
        self._observer.daemon = True
        self._observer.start()

    async def wait(self, timeout: float) -> None:
        assert self._event is not None
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
        self._event.clear()

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
