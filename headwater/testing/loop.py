"""A background thread running its own asyncio loop, so synchronous tests can drive async servers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")


class LoopThread:
    """One event loop in one daemon thread. ``run`` waits for a coroutine from any other thread;
    ``close`` cancels what is left, shuts the loop's executor and joins the thread. The loop has an
    executor of its own so that what plugin code leaves running in it (a sync ``poll`` that never
    returns) is found and reported at ``close`` instead of hanging the process."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix=f"{name}-executor")
        self.loop.set_default_executor(self.executor)
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop; the caller gets a future to wait on."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` on the loop and wait for its result (TimeoutError after ``timeout`` s)."""
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"{self.name}: no result within {timeout}s") from None

    def close(self, timeout: float = 10.0) -> list[str]:
        """Cancel the loop's remaining tasks, stop it and join its thread; returns the names of
        threads that would not end (empty when everything stopped)."""
        if self.loop.is_closed():
            return []
        if self._thread.is_alive():
            try:
                self.run(self._cancel_remaining(), timeout)
            except TimeoutError:
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        leftover = [self._thread.name] if self._thread.is_alive() else []
        workers = list(getattr(self.executor, "_threads", ()))  # to report the ones that hang
        self.executor.shutdown(wait=False, cancel_futures=True)
        for thread in workers:
            thread.join(max(0.1, timeout / 4))
        leftover += [t.name for t in workers if t.is_alive()]
        if not self._thread.is_alive():
            self.loop.close()
        return leftover

    async def _cancel_remaining(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.loop.shutdown_asyncgens()
