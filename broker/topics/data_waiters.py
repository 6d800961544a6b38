"""Fetches parked until the next append (Kafka's fetch purgatory).

A parked fetch waits on a ``DataWait``: a future, filed under each partition it reads and woken by the next
``notify`` naming one of them (an append, a transaction marker, an offset commit; shutdown names all) or by
its own timer. When the server's answers carry the fetch themselves (answers.py's
``Parked``) they set ``complete``: the wake then runs the fetch to its answer at once, inside the step that
notified (Kafka's ``tryComplete`` from the append), instead of scheduling a Task step and a done callback.
A ``DataWait`` awaited by an ordinary Task (``complete`` unset) is woken like any future.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

__all__ = ["DataWait", "DataWaiters", "Key"]


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


Key = tuple[str, int]  # (topic, partition)


class DataWaiters:
    """The fetches waiting for data, each under the partitions it reads (Kafka's purgatory watch keys): an
    append wakes only the fetches reading its partitions, so a produce costs the same with one parked consumer
    as with a thousand parked on other topics."""

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[Key, set[DataWait]] = {}

    def __len__(self) -> int:
        return len(set().union(*self._by_key.values())) if self._by_key else 0

    def notify(self, keys: Iterable[Key] | None = None) -> None:
        """Wake the fetches waiting on any of ``keys`` (every fetch when None: shutdown). A fetch woken here
        that waits again joins the next notify, not this one."""
        by_key = self._by_key
        if not by_key:  # the common case under load: every fetch already has data
            return
        if keys is None:
            woken = set().union(*by_key.values())
        else:
            woken = set()
            for key in keys:
                waiting = by_key.get(key)
                if waiting:
                    woken |= waiting
        for wait in woken:
            wake(wait)  # its wait() removes it from every key once it resumes

    async def wait(self, timeout: float, keys: Iterable[Key]) -> None:
        """Until ``notify`` names one of ``keys`` (or all) or ``timeout`` seconds: one future and one timer, no Task."""
        loop = asyncio.get_running_loop()
        wait = DataWait(loop=loop)
        watched = list(keys)
        by_key = self._by_key
        for key in watched:
            waiting = by_key.get(key)
            if waiting is None:
                by_key[key] = {wait}
            else:
                waiting.add(wait)
        wait.timer = loop.call_later(timeout, wake, wait)
        try:
            await wait
        finally:
            wait.timer.cancel()
            for key in watched:
                waiting = by_key.get(key)
                if waiting is not None:
                    waiting.discard(wait)
                    if not waiting:
                        del by_key[key]
