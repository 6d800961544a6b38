"""One connection's answers, written in request order without a writer task.

A request whose handler finishes without waiting (almost every Produce, a Fetch that finds data) is answered
in the reader's own step: no Task, no queue hand-off. A handler that waits (a long-polling Fetch, a flush)
carries on in a Task, and its answer is written from the Task's done callback once every earlier answer is;
a Fetch parked until the next append (a ``DataWait``) is carried on by a ``Parked`` instead, which the append's
notify runs to its answer and writes at once, in the producer's own step (Kafka's purgatory ``tryComplete``).
The reader writes the answers of all the requests it found in one read together (``flush``: one send), so
a client that pipelines small requests gets its answers in as few system calls as they arrived.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from ..topics.data_waiters import DataWait

__all__ = ["Answers", "Parked", "Ready", "start_eagerly"]

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


class Parked(asyncio.Future[Answer]):
    """A handler waiting on a ``DataWait`` (a long-polling Fetch), carried on without a Task: the wait's wake
    (an append's notify, its timer, shutdown) runs the handler on in the waking step, and once it has its
    answer the connection's answers are told at once (``on_done``), so the answer is written in that same
    step. Should the handler then wait on anything else, a Task carries it on from there."""

    on_done: Callable[[], None] | None = None  # the connection's answers, told synchronously
    _coro: Coroutine[Any, Any, Answer] | None = None
    _wait: DataWait | None = None
    _task: asyncio.Task[Answer] | None = None
    _peer = ""

    def park(self, coro: Coroutine[Any, Any, Answer], wait: DataWait, peer: str) -> None:
        self._coro, self._peer = coro, peer
        self._hold(wait)

    def _hold(self, wait: DataWait) -> None:
        self._wait = wait
        wait.complete = self._step

    def _step(self) -> None:
        """The wait has ended: run the handler on until it answers or waits again."""
        coro = self._coro
        if coro is None or self.done():
            return
        self._wait = None
        try:
            yielded = coro.send(None)
        except StopIteration as stop:
            self._coro = None
            self.set_result(stop.value)
        except Exception as exc:
            self._coro = None
            log.error(_FAILED, self._peer, exc_info=exc)
            self.set_exception(exc)
        else:
            if isinstance(yielded, DataWait):
                self._hold(yielded)
            else:  # any other wait: a Task carries the handler on, this future follows it
                self._coro = None
                self._task = task = asyncio.get_running_loop().create_task(_Resumed(coro, yielded))
                task.add_done_callback(self._follow)
            return
        self._tell()

    def _follow(self, task: asyncio.Task[Answer]) -> None:
        if self.done():
            return
        if task.cancelled():
            super().cancel()
        elif (error := task.exception()) is not None:
            log.error(_FAILED, self._peer, exc_info=error)
            self.set_exception(error)
        else:
            self.set_result(task.result())
        self._tell()

    def _tell(self) -> None:
        if self.on_done is not None:
            try:
                self.on_done()
            except Exception:  # inside the notifying step (e.g. another connection's Produce): never raise there
                log.exception("writing the answer to %s failed", self._peer)

    def cancel(self, msg: Any = None) -> bool:
        """The handler is cancelled where it waits (its ``finally`` blocks run: the wait leaves the waiters)."""
        if self.done():
            return False
        if self._task is not None:
            return self._task.cancel(msg)
        coro, self._coro = self._coro, None
        if self._wait is not None:
            self._wait.complete = None
            self._wait = None
        if coro is not None:  # cancelled where it waits, as a Task's handler would be
            try:
                coro.throw(asyncio.CancelledError(msg))
            except (asyncio.CancelledError, StopIteration):
                pass
            except Exception:
                log.exception("request from %s failed while cancelled", self._peer)
            else:  # it caught the cancellation and waited again: closed there
                coro.close()
        return super().cancel(msg)


Pending = Ready | asyncio.Task[Answer] | Parked


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
    if isinstance(yielded, DataWait):
        parked = Parked()
        parked.park(coro, yielded, peer)
        return parked
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
        if isinstance(pending, Parked):
            pending.on_done = self._parked_done
        elif not isinstance(pending, Ready):
            pending.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future[Answer]) -> None:
        if self._queue and self._queue[0] is task:
            self.flush()

    def _parked_done(self) -> None:
        """A parked fetch has its answer: written now if every earlier answer is (in the notifying step)."""
        if self._queue and self._queue[0].done() and not self.failed:
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
                if not isinstance(pending, Ready | Parked):  # theirs were logged when raised
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
            if isinstance(pending, Parked):
                pending.on_done = None
                pending.cancel()
            elif not isinstance(pending, Ready):
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
