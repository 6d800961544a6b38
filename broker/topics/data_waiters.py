"""Fetches parked until the next append (Kafka's fetch purgatory).

A parked fetch waits on a ``DataWait``: a future, woken by the next ``notify`` (an append, a transaction
marker, shutdown) or by its own timer. When the server's answers carry the fetch themselves (answers.py's
``Parked``) they set ``complete``: the wake then runs the fetch to its answer at once, inside the step that
notified (Kafka's ``tryComplete`` from the append), instead of scheduling a Task step and a done callback.
A ``DataWait`` awaited by an ordinary Task (``complete`` unset) is woken like any future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["DataWait", "DataWaiters"]


class DataWait(asyncio.Future[None]):
    """One parked fetch's wait; ``complete`` (set by whoever carries the fetch on) runs it on at once when woken."""

    complete: Callable[[], None] | None = None
    timer: asyncio.TimerHandle | None = None


def wake(wait: DataWait) -> None:
    """End ``wait`` (once): its fetch reads again now, in this step when it is carried on synchronously."""
    if wait.done():
        return
    wait.set_result(None)
    if wait.complete is not None:
        wait.complete()


class DataWaiters:
    """The fetches waiting for data, woken together by ``notify``."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: set[DataWait] = set()

    def __len__(self) -> int:
        return len(self._waiting)

    def notify(self) -> None:
        """Wake every waiting fetch. A fetch woken here that waits again joins the next notify, not this one."""
        if not self._waiting:  # the common case under load: every fetch already has data
            return
        waiting, self._waiting = self._waiting, set()
        for wait in waiting:
            wake(wait)

    async def wait(self, timeout: float) -> None:
        """Until the next ``notify`` or ``timeout`` seconds: one future and one timer, no Task."""
        loop = asyncio.get_running_loop()
        wait = DataWait(loop=loop)
        self._waiting.add(wait)
        wait.timer = loop.call_later(timeout, wake, wait)
        try:
            await wait
        finally:
            wait.timer.cancel()
            self._waiting.discard(wait)
