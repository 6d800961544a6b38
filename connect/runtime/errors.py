"""Error handling for records: retries, tolerance, error log and the dead letter queue.

Kafka's RetryWithToleranceOperator. Every stage of the record path (conversion,
transforms, the producer's send) goes through ``ErrorHandler.execute``: a retriable
failure is retried with Kafka Connect's backoff until ``errors.retry.timeout``, then
``errors.tolerance`` decides between skipping the record (logged, reported to the
dead letter queue) and failing the task. The record loops go through ``ErrorHandler.attempt``,
which calls the operation inline and hands only a failure to ``execute``, so the path pays
nothing beyond the call until something fails.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import random
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum, StrEnum
from functools import partial
from typing import Any, Final, Literal, Protocol, TypeVar

from ..api import ConnectException, RetriableException

__all__ = ["SKIP", "ErrorHandler", "ErrorReporter", "RawRecord", "Stage", "TaskStopping", "ToleranceExceeded",
           "backoff_delay", "is_retriable"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Skip(Enum):
    SKIP = "skip"


#: What ``ErrorHandler.attempt`` returns for a record errors.tolerance=all skips.
SKIP: Final = _Skip.SKIP


class Stage(StrEnum):
    TASK_POLL = "TASK_POLL"
    TASK_PUT = "TASK_PUT"
    TRANSFORMATION = "TRANSFORMATION"
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


class ToleranceExceeded(ConnectException):
    """A record failed and errors.tolerance=none: the task must fail."""


class TaskStopping(ConnectException):
    """The task was asked to stop while an operation was being retried: the record is neither
    delivered nor skipped, and its offset is not committed (the next owner retries it)."""


#: Kafka's RetryWithToleranceOperator.RETRIES_DELAY_MIN_MS: the first retry waits this long.
RETRIES_DELAY_MIN_MS = 300


def is_retriable(exc: BaseException) -> bool:
    """Connect's RetriableException, or a Kafka client error that says it is retriable."""
    return isinstance(exc, RetriableException) or getattr(exc, "retriable", False) is True


def backoff_delay(attempt: int, max_delay_ms: int, remaining_ms: float) -> float:
    """Kafka Connect's backoff before retry ``attempt`` (1 = the first), in ms: 300 ms doubled each
    time; past ``errors.retry.delay.max.ms`` a random delay below that cap (jitter, so tasks that
    failed together do not retry together); never past the deadline."""
    delay: float = RETRIES_DELAY_MIN_MS << min(attempt - 1, 32)
    if delay > max_delay_ms:
        delay = random.random() * max_delay_ms
    return max(0.0, min(delay, remaining_ms))


@dataclass
class RawRecord:
    """The consumed record as Kafka stored it (what the DLQ receives)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


ErrorReporter = Callable[["ErrorContext"], Awaitable[None]]


@dataclass
class ErrorContext:
    stage: Stage
    executing_class: str
    exception: BaseException
    raw: RawRecord | None
    record: object
    connector: str
    task_id: int
    attempts: int = 1


class ErrorConfig(Protocol):
    """The errors.* settings of a connector (``ConnectorConfig``)."""

    @property
    def errors_tolerance(self) -> str: ...
    @property
    def errors_retry_timeout(self) -> int: ...
    @property
    def errors_retry_delay_max_ms(self) -> int: ...
    @property
    def errors_log_enable(self) -> bool: ...
    @property
    def errors_log_include_messages(self) -> bool: ...


class ErrorHandler:
    def __init__(self, connector: str, task_id: int, config: ErrorConfig,
                 reporters: list[ErrorReporter] | None = None) -> None:
        self.connector = connector
        self.task_id = task_id
        self.tolerate_all = config.errors_tolerance == "all"
        self.retry_timeout_ms = config.errors_retry_timeout
        self.retry_delay_max_ms = config.errors_retry_delay_max_ms
        self.log_enabled = config.errors_log_enable
        self.log_messages = config.errors_log_include_messages
        self.reporters = list(reporters or [])
        self.stopping: Callable[[], bool] = lambda: False  # set by the task that owns this handler
        self.failures = 0
        self.retries = 0
        self.skipped = 0

    async def attempt(self, stage: Stage, executing: object, operation: Callable[..., T], *args: Any,
                      record: object = None, raw: Callable[[], RawRecord] | None = None) -> T | Literal[_Skip.SKIP]:
        """``operation(*args)`` for one record at one stage, with retries and errors.tolerance: its
        result, or ``SKIP`` when errors.tolerance=all skips the record. ``raw`` makes the consumed
        record for the dead letter queue, only when something failed."""
        try:
            return operation(*args)
        except Exception as exc:
            ok, result = await self.execute(stage, executing, partial(operation, *args), failed=exc,
                                            raw=raw() if raw is not None else None, record=record)
            return result if ok else SKIP

    async def execute(self, stage: Stage, executing: object, operation: Callable[[], Any] | None, *,
                      failed: BaseException | None = None, raw: RawRecord | None = None,
                      record: object = None) -> tuple[bool, Any]:
        """Run ``operation`` (sync, or returning an awaitable) for one record at one stage.

        ``failed``: the operation already ran once and raised this (the hot loops try it inline
        first). A retriable failure is retried (``operation`` None: never, e.g. a send the client
        already retried) with Kafka Connect's backoff until ``errors.retry.timeout`` (-1 forever,
        0 never). Returns ``(True, result)``, or ``(False, None)`` when the record is to be skipped
        (errors.tolerance=all). Raises ToleranceExceeded when the task must fail, TaskStopping when
        the task was asked to stop while retrying.
        """
        start = time.monotonic()
        deadline = math.inf if self.retry_timeout_ms < 0 else start + self.retry_timeout_ms / 1000
        attempt = 0
        exc = failed
        while True:
            if exc is None:
                assert operation is not None
                try:
                    result = operation()
                    if inspect.isawaitable(result):
                        result = await result
                except Exception as error:
                    exc = error
                else:
                    if attempt:
                        log.info("Task %s-%d: stage '%s' with class '%s' succeeded after %d retries (%.1f s)",
                                 self.connector, self.task_id, stage.value, _class_name(executing), attempt,
                                 time.monotonic() - start)
                    return True, result
            attempt += 1
            now = time.monotonic()
            if operation is None or not is_retriable(exc) or now >= deadline:
                break
            if self.stopping():
                raise TaskStopping(f"stopped while retrying stage {stage.value}") from exc
            delay = backoff_delay(attempt, self.retry_delay_max_ms, (deadline - now) * 1000) / 1000
            self.retries += 1
            log.warning("Task %s-%d: retriable failure in stage '%s' with class '%s' (attempt %d), retrying in "
                        "%.0f ms: %s", self.connector, self.task_id, stage.value, _class_name(executing), attempt,
                        delay * 1000, exc)
            await self._sleep(delay)
            exc = None
        await self._failed(stage, executing, exc, attempt, raw, record)
        return False, None

    async def recover(self, stage: Stage, executing: object, exc: BaseException, raw: RawRecord | None = None,
                      record: object = None) -> tuple[bool, Any]:
        """Tolerance only, for a failure there is no operation to retry."""
        return await self.execute(stage, executing, None, failed=exc, raw=raw, record=record)

    async def _sleep(self, delay: float) -> None:
        """Sleep, in slices, so that a stop does not wait out a long backoff."""
        end = time.monotonic() + delay
        while (left := end - time.monotonic()) > 0:
            if self.stopping():
                return
            await asyncio.sleep(min(left, 0.25))

    async def _failed(self, stage: Stage, executing: object, exc: BaseException, attempts: int,
                      raw: RawRecord | None, record: object) -> None:
        ctx = self._count(stage, executing, exc, attempts, raw, record)
        for report in self.reporters:
            try:
                await report(ctx)
            except Exception:
                log.exception("error reporter failed for %s task %d", self.connector, self.task_id)
        self._tolerate(ctx)

    def tolerate(self, stage: Stage, executing: object, exc: BaseException, record: object = None) -> None:
        """A record a source task could not make (nothing to retry, no consumed record for a dead letter
        queue): logged and counted; raises ToleranceExceeded unless errors.tolerance=all."""
        self._tolerate(self._count(stage, executing, exc, 1, None, record))

    def _count(self, stage: Stage, executing: object, exc: BaseException, attempts: int, raw: RawRecord | None,
               record: object) -> ErrorContext:
        self.failures += 1
        ctx = ErrorContext(stage, _class_name(executing), exc, raw, record, self.connector, self.task_id, attempts)
        if self.log_enabled:
            self._log(ctx)
        return ctx

    def _tolerate(self, ctx: ErrorContext) -> None:
        if not self.tolerate_all:
            raise ToleranceExceeded(f"Tolerance exceeded in error handler (stage {ctx.stage.value}, class "
                                    f"{ctx.executing_class}, {_attempts(ctx.attempts)})") from ctx.exception
        self.skipped += 1

    def _log(self, ctx: ErrorContext) -> None:
        detail = ""
        if self.log_messages:
            if ctx.raw is not None:
                r = ctx.raw
                detail = (f", where consumed record is {{topic='{r.topic}', partition={r.partition}, "
                          f"offset={r.offset}, timestamp={r.timestamp}, key={r.key!r}, value={r.value!r}}}")
            elif ctx.record is not None:
                detail = f", where source record is {ctx.record!r}"
        log.error("Error encountered in task %s-%d. Executing stage '%s' with class '%s'%s (%s).", ctx.connector,
                  ctx.task_id, ctx.stage.value, ctx.executing_class, detail, _attempts(ctx.attempts),
                  exc_info=ctx.exception)


def _class_name(executing: object) -> str:
    return executing if isinstance(executing, str) else type(executing).__module__ + "." + type(executing).__qualname__


def _attempts(attempts: int) -> str:
    return "1 attempt, no retry" if attempts == 1 else f"{attempts} attempts, {attempts - 1} retries"


def dlq_reporter(send: Callable[[str, bytes | None, bytes | None, list[tuple[str, bytes]], int | None], Awaitable[Any]],
                 topic: str, context_headers: bool) -> ErrorReporter:
    """Send the original consumed record to ``topic`` (Kafka's DeadLetterQueueReporter)."""

    async def report(ctx: ErrorContext) -> None:
        raw = ctx.raw
        if raw is None:
            return  # only consumed records go to a DLQ
        headers = [(k, v) for k, v in raw.headers if v is not None]
        if context_headers:
            cause = ctx.exception  # the Connect error itself (e.g. DataException), as Kafka reports it
            headers += [(k, v.encode()) for k, v in (
                ("__connect.errors.topic", raw.topic),
                ("__connect.errors.partition", str(raw.partition)),
                ("__connect.errors.offset", str(raw.offset)),
                ("__connect.errors.connector.name", ctx.connector),
                ("__connect.errors.task.id", str(ctx.task_id)),
                ("__connect.errors.stage", ctx.stage.value),
                ("__connect.errors.class.name", ctx.executing_class),
                ("__connect.errors.exception.class.name", f"{type(cause).__module__}.{type(cause).__qualname__}"),
                ("__connect.errors.exception.message", str(cause)),
                ("__connect.errors.exception.stacktrace", "".join(traceback.format_exception(cause))),
            )]
        await send(topic, raw.key, raw.value, headers, raw.timestamp)

    return report
