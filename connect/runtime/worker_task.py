"""The lifecycle every task shares (Kafka's WorkerTask): start, run ``execute``, pause,
resume, stop, and report each state change. Subclasses implement ``execute``."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from headwater.kernel_limits import limit_error, limit_fix
from headwater.logs import enter_context

from ..api import ConnectException, Converter, HeaderConverter, MetricSample, SinkTask, SourceTask
from ..status import State, TargetState, TaskId, format_trace
from .errors import ErrorHandler, TaskStopping
from .timings import Durations
from .transform_chain import TransformationChain

__all__ = ["RecordTask", "StatusListener", "TaskPipeline", "WorkerTask", "call"]

log = logging.getLogger(__name__)


async def call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call plugin code that may be sync or async; sync code runs in a worker thread
    so a slow ``poll`` or ``put`` never blocks the event loop."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    result = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(result):
        return await result
    return result


StatusListener = Callable[[TaskId, State, str | None], None]


class WorkerTask:
    def __init__(self, task_id: TaskId, target_state: TargetState, on_status: StatusListener) -> None:
        self.id = task_id
        self.on_status = on_status
        self.state = State.UNASSIGNED
        self.target_state = target_state
        self._resumed = asyncio.Event()
        if target_state == TargetState.STARTED:
            self._resumed.set()
        self.stopping = False
        self.runner: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    def report(self, state: State, trace: str | None = None) -> None:
        self.state = state
        self.on_status(self.id, state, trace)

    def start(self) -> asyncio.Task[None]:
        self.runner = asyncio.create_task(self.run(), name=f"task-{self.id}")
        return self.runner

    async def run(self) -> None:
        enter_context(self.id.connector, f"task-{self.id.task}")  # this asyncio task's log lines, and its children's
        try:
            await self.initialize()
            if self.target_state != TargetState.PAUSED:
                self.report(State.RUNNING)  # a task created paused reports PAUSED from wait_if_paused
            await self.execute()
        except (asyncio.CancelledError, TaskStopping):
            pass  # stopped mid-operation: what was not delivered is not committed either
        except Exception as exc:
            exc = self.explained(exc)
            self.failure = exc
            log.error("%s task %s failed; it will not run again until restarted", type(self).__name__, self.id,
                      exc_info=exc)
            self.report(State.FAILED, format_trace(exc))
        finally:
            try:
                await self.close()
            except Exception:
                log.exception("closing task %s failed", self.id)
        if self.state != State.FAILED:
            self.report(State.UNASSIGNED)

    def explained(self, exc: Exception) -> Exception:
        """``exc``, or when a kernel limit is behind it (too many open files) and the plugin did not already
        explain it, a ConnectException naming the limit and what to raise, caused by ``exc`` (so the trace
        keeps both)."""
        limit = limit_error(exc)
        fix = limit_fix(limit) if limit is not None else None
        if fix is None or isinstance(exc, ConnectException):
            return exc
        assert limit is not None
        explained = ConnectException(
            f"Task {self.id.connector}-{self.id.task} ran out of a kernel resource: {limit.strerror or limit}. To fix: "
            f"{fix}, then restart the task (POST /connectors/{self.id.connector}/tasks/{self.id.task}/restart).")
        explained.__cause__ = exc
        return explained

    async def initialize(self) -> None:
        """Create clients and start the plugin task."""

    async def execute(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        """Stop the plugin task and release clients (always called)."""

    def transition_to(self, target: TargetState) -> None:
        """Ask for a new target state. The task's own loop reports PAUSED once it has really stopped
        moving records, and RUNNING once it moves them again (``wait_if_paused``), as Kafka reports
        them from the task's thread."""
        self.target_state = target
        if target == TargetState.PAUSED:
            self._resumed.clear()
        elif target == TargetState.STARTED:
            self._resumed.set()

    async def wait_if_paused(self) -> None:
        """Between iterations: while the target is PAUSED, quiesce (``before_pause``), report PAUSED,
        and wait, calling ``while_paused`` every ``PAUSED_TICK`` s; then resume and report RUNNING."""
        if self._resumed.is_set():
            return
        self.on_pause()
        await self.before_pause()
        if self.state != State.PAUSED:
            self.report(State.PAUSED)
        while not self._resumed.is_set():
            try:
                await asyncio.wait_for(self._resumed.wait(), self.PAUSED_TICK)
            except TimeoutError:
                await self.while_paused()
        if self.stopping:
            return
        self.on_resume()
        self.report(State.RUNNING)

    PAUSED_TICK = 1.0

    def on_pause(self) -> None:
        """Hook: pausing (sinks pause their consumer's partitions)."""

    async def before_pause(self) -> None:
        """Hook: finish what is in flight before PAUSED is reported."""

    async def while_paused(self) -> None:
        """Hook: called about every second while paused (sinks keep their group membership)."""

    def on_resume(self) -> None:
        """Hook: resumed."""

    async def stop(self, timeout: float) -> None:
        """Ask the task to stop, wait up to ``timeout`` s, then cancel it."""
        self.stopping = True
        self._resumed.set()
        self.signal_stop()
        if self.runner is None:
            return
        done, _ = await asyncio.wait({self.runner}, timeout=timeout)
        if not done:
            log.warning("task %s did not stop within %.1fs; cancelling it", self.id, timeout)
            self.runner.cancel()
            await asyncio.gather(self.runner, return_exceptions=True)

    def signal_stop(self) -> None:
        """Hook: wake the task's loop so it notices ``stopping``."""


T = TypeVar("T", SourceTask, SinkTask)


@dataclass
class TaskPipeline(Generic[T]):
    """What source and sink tasks both carry: the plugin task and its config, the record path
    (converters, transforms, error handling) and the Kafka side."""

    task: T
    config: dict[str, str]
    converters: tuple[Converter, Converter, HeaderConverter]  # key, value, header
    chain: TransformationChain
    errors: ErrorHandler
    bootstrap: str
    producer_overrides: dict[str, str]
    flush_interval_ms: int
    topics: set[str]  # the connector's active topics, shared by its tasks
    admin_overrides: dict[str, str] = field(default_factory=dict)  # the admin client's (topic creation)


class RecordTask(WorkerTask, Generic[T]):
    """A WorkerTask that moves records: unpacks its pipeline into attributes."""

    def __init__(self, task_id: TaskId, pipeline: TaskPipeline[T], *, target_state: TargetState,
                 on_status: StatusListener) -> None:
        super().__init__(task_id, target_state, on_status)
        self.task: T = pipeline.task
        self.task_config = pipeline.config
        self.key_converter, self.value_converter, self.header_converter = pipeline.converters
        self.chain = pipeline.chain
        self.errors = pipeline.errors
        self.errors.stopping = lambda: self.stopping
        self.bootstrap = pipeline.bootstrap
        self.producer_overrides = pipeline.producer_overrides
        self.admin_overrides = pipeline.admin_overrides
        self.flush_interval = pipeline.flush_interval_ms / 1000
        self.topics = pipeline.topics
        self.commit_requested = False
        self._next_commit = 0.0  # monotonic time of the next periodic commit (schedule_commit)
        self._trace: str | None = None
        self.commit_times = Durations()  # offset-commit-avg/max-time-ms
        self.dlq_records = 0  # deadletterqueue-produce-requests

    async def execute(self) -> None:
        """Kafka's WorkerTask loop: one iteration at a time; offsets committed every
        ``offset.flush.interval.ms`` and whenever the task asked for it."""
        self.schedule_commit()
        while not self.stopping:
            await self.wait_if_paused()
            if self.stopping:
                break
            await self.iteration()
            if self.commit_due():
                self.commit_requested = False
                await self.timed_commit()
                self.refresh_trace()
                self.schedule_commit()

    def schedule_commit(self) -> None:
        """The next periodic commit is ``offset.flush.interval.ms`` from now."""
        self._next_commit = time.monotonic() + self.flush_interval

    def commit_due(self) -> bool:
        """Whether to commit after this iteration: the task asked for it, or the interval is up."""
        return self.commit_requested or time.monotonic() >= self._next_commit

    def refresh_trace(self) -> None:
        """Show what the plugin task wants in its RUNNING status (``running_trace``), when it changed."""
        running_trace = getattr(self.task, "running_trace", None)
        if running_trace is None or self.state != State.RUNNING:
            return
        try:
            trace = running_trace()
        except Exception as exc:
            log.warning("task %s: running_trace() failed", self.id, exc_info=exc)
            return
        if trace != self._trace:
            self._trace = trace
            self.report(State.RUNNING, trace)

    async def before_pause(self) -> None:
        await self.timed_commit()  # what was delivered before the pause is committed, not held

    async def timed_commit(self) -> None:
        """``commit_offsets``, timed when it wrote offsets (a commit with nothing to write is not one)."""
        started = time.monotonic()
        try:
            wrote = await self.commit_offsets()
        except Exception:
            self.commit_times.failures += 1
            raise
        if wrote:
            elapsed_ms = (time.monotonic() - started) * 1000
            self.commit_times.add(elapsed_ms)
            log.debug("task %s committed offsets in %.1f ms", self.id, elapsed_ms)

    def runtime_metrics(self) -> dict[str, Any]:
        """What the runtime measures of this task, under Kafka's task metric names (the ``runtime`` part of
        ``GET /connectors/{name}/tasks/{id}/metrics``, and the worker's ``/metrics``)."""
        return {"offset-commit-avg-time-ms": round(self.commit_times.avg_ms(), 3),
                "offset-commit-max-time-ms": round(self.commit_times.max_ms(), 3),
                "offset-commit-completion-total": self.commit_times.total,
                "offset-commit-failure-total": self.commit_times.failures,
                "deadletterqueue-produce-requests": self.dlq_records}

    def metrics(self) -> dict[str, Any]:
        """The plugin task's own figures (``SourceTask.metrics``/``SinkTask.metrics``); a task
        whose hook fails answers with the error instead of failing the request."""
        try:
            return dict(self.task.metrics())
        except Exception as exc:
            log.warning("task %s: metrics() failed", self.id, exc_info=exc)
            return {"error": f"{type(exc).__name__}: {exc}"}

    def exported_metrics(self) -> list[MetricSample]:
        """The plugin task's samples under names of its own (``exported_metrics``); none if the hook fails."""
        try:
            return list(self.task.exported_metrics())
        except Exception as exc:
            log.warning("task %s: exported_metrics() failed", self.id, exc_info=exc)
            return []

    async def iteration(self) -> None:
        """Move one poll's (or one fetch's) worth of records."""
        raise NotImplementedError

    async def commit_offsets(self) -> bool:
        """Commit what is safe to commit; whether any offset was written."""
        raise NotImplementedError
