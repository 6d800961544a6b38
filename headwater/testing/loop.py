"""A background thread running its own asyncio loop, so synchronous tests can drive async servers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
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
        """Cancel the loop's remaining tasks, stop it and join its thread. Returns what was left behind:
        asyncio tasks still pending (cancelled now) and threads that would not end; empty when the
        servers on the loop had stopped everything they started."""
        if self.loop.is_closed():
            return []
        leftover: list[str] = []
        if self._thread.is_alive():
            try:
                leftover += self.run(self._cancel_remaining(), timeout)
            except TimeoutError:
                leftover.append("asyncio tasks that would not cancel")
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout)
        self.executor.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout / 2
        for thread in threading.enumerate():  # the executor's threads, some maybe stuck in plugin code
            if thread.name.startswith(f"{self.name}-executor"):
                thread.join(max(0.0, deadline - time.monotonic()))
        leftover += [f"thread {t.name}" for t in threading.enumerate()
                     if t.name == self.name or t.name.startswith(f"{self.name}-executor")]
        if not self._thread.is_alive():
            self.loop.close()
        return leftover

    async def _cancel_remaining(self) -> list[str]:
        current = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not current]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.loop.shutdown_asyncgens()
        return [f"asyncio task {t.get_name()}: {t.get_coro()!r}" for t in tasks]
