"""One connection's answers, written in request order without a writer task.

A request whose handler finishes without waiting (almost every Produce, a Fetch that finds data) is answered
in the reader's own step: no Task, no queue hand-off. A handler that waits (a long-polling Fetch, a flush)
carries on in a Task, and its answer is written from the Task's done callback once every earlier answer is.
The reader writes the answers of all the requests it found in one read together (``flush``: one send), so
a client that pipelines small requests gets its answers in as few system calls as they arrived.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Coroutine, Generator
from typing import Any

__all__ = ["Answers", "Ready", "start_eagerly"]

log = logging.getLogger(__name__)

Answer = bytes | bytearray | None
_FAILED = "request from %s failed; closing the connection"


class Ready:
    """A request answered at once: its answer (None: no answer, e.g. acks=0), or the error its handler raised."""

    __slots__ = ("answer", "error")

    def __init__(self, answer: Answer, error: BaseException | None = None) -> None:
        self.answer, self.error = answer, error

    def done(self) -> bool:
        return True


Pending = Ready | asyncio.Task[Answer]


class _Resumed(Coroutine[Any, Any, Answer]):
    """A handler's coroutine that has already run up to its first wait, as the Task carrying it on sees it: the
    Task's first step gets the future the handler waits on; every later step, and any exception the Task throws
    (its cancellation, even before its first step), goes to the handler as if the Task had started it."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Answer], yielded: Any) -> None:
        self._coro: Coroutine[Any, Any, Answer] | None = coro
        self._first = yielded

    def send(self, value: Any) -> Any:
        if self._coro is not None and self._first is not _STARTED:
            first, self._first = self._first, _STARTED
            return first
        return self._handler().send(value)

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        self._first = _STARTED
        if val is None and tb is None:
            return self._handler().throw(typ)
        return self._handler().throw(typ, val, tb)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()

    def __await__(self) -> Generator[Any, None, Answer]:
        raise TypeError("a resumed handler is run by its Task only")

    def _handler(self) -> Coroutine[Any, Any, Answer]:
        assert self._coro is not None
        return self._coro


_STARTED = object()  # a _Resumed whose Task has taken its first step


def start_eagerly(coro: Coroutine[Any, Any, Answer], peer: str) -> Pending:
    """Run ``coro`` until it finishes or first waits: Ready in the first case, a Task carrying it on in the
    second (Python 3.12's eager tasks, by hand). A handler that fails is logged here; its Ready carries the
    error, and the connection closes once the answers before it are written."""
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return Ready(stop.value)
    except Exception as exc:
        log.error(_FAILED, peer, exc_info=exc)
        return Ready(None, exc)
    return asyncio.get_running_loop().create_task(_Resumed(coro, yielded))


class Answers:
    """The answers of one connection's requests, in request order; each is written once it and every earlier
    one are ready. A handler's error is logged and closes the connection (its later answers are dropped)."""

    __slots__ = ("_empty", "_loop", "_queue", "_space", "failed", "limit", "peer", "writer")

    def __init__(self, writer: asyncio.StreamWriter, peer: str, limit: int) -> None:
        self.writer, self.peer, self.limit = writer, peer, limit
        self._queue: deque[Pending] = deque()
        self._loop = asyncio.get_running_loop()
        self._empty: asyncio.Future[None] | None = None  # set once every queued answer is written
        self._space: asyncio.Future[None] | None = None  # set once fewer than ``limit`` are queued
        self.failed = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, pending: Pending) -> None:
        """Queue the answer of the request just read (after those of the requests read before it); it is
        written by the next ``flush``, or when its Task ends if it is still under way then."""
        self._queue.append(pending)
        if not isinstance(pending, Ready):
            pending.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Answer]) -> None:
        if self._queue and self._queue[0] is task:
            self.flush()

    def flush(self) -> None:
        """Write every answer that is ready and has no unanswered request before it, in one send."""
        queue = self._queue
        out: list[bytes | bytearray] = []
        while queue and queue[0].done() and not self.failed:
            pending = queue.popleft()
            if isinstance(pending, Ready):
                answer, error = pending.answer, pending.error
            elif pending.cancelled():
                answer, error = None, None
            else:
                answer, error = None, pending.exception()
                if error is None:
                    answer = pending.result()
            if error is not None:
                if not isinstance(pending, Ready):  # a Ready's error was logged when it was raised
                    log.error(_FAILED, self.peer, exc_info=error)
                self.failed = True
                break
            if answer is not None:
                out.append(answer)
        if out:  # the answers before a failed request are still sent
            if len(out) == 1:
                self.writer.write(out[0])
            else:
                self.writer.writelines(out)
        if self.failed:
            self.writer.close()
            self._drop()
        self._wake()

    def _drop(self) -> None:
        """After a failure: the answers still queued are never written."""
        while self._queue:
            pending = self._queue.popleft()
            if not isinstance(pending, Ready):
                pending.remove_done_callback(self._task_done)
                pending.cancel()

    def _wake(self) -> None:
        if self._space is not None and len(self._queue) < self.limit:
            if not self._space.done():
                self._space.set_result(None)
            self._space = None
        if self._empty is not None and not self._queue:
            if not self._empty.done():
                self._empty.set_result(None)
            self._empty = None

    async def room(self) -> None:
        """Until fewer than ``limit`` answers are queued (reading pauses beyond that)."""
        self.flush()
        while len(self._queue) >= self.limit and not self.failed:
            if self._space is None:
                self._space = self._loop.create_future()
            await self._space

    async def written(self) -> None:
        """Until every answer queued so far has been handed to the transport (or the connection failed)."""
        self.flush()
        while self._queue and not self.failed:
            if self._empty is None:
                self._empty = self._loop.create_future()
            await self._empty

    def cancel(self) -> None:
        """Shutting down: handlers still waiting are cancelled; their answers are not written."""
        for pending in self._queue:
            if not isinstance(pending, Ready):
                pending.cancel()
