"""Error handling for records: retries, tolerance, error log and the dead letter queue.

Kafka's RetryWithToleranceOperator, shaped for a hot path that pays nothing until
something fails: the task loop calls ``recover`` only from its ``except`` branch.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..api import RetriableException

__all__ = ["ErrorHandler", "ErrorReporter", "RawRecord", "Stage", "ToleranceExceeded"]

log = logging.getLogger(__name__)


class Stage(StrEnum):
    TASK_POLL = "TASK_POLL"
    TASK_PUT = "TASK_PUT"
    TRANSFORMATION = "TRANSFORMATION"
    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


class ToleranceExceeded(Exception):
    """A record failed and errors.tolerance=none: the task must fail."""


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
    record: Any
    connector: str
    task_id: int


class ErrorHandler:
    def __init__(self, connector: str, task_id: int, config: Any, reporters: list[ErrorReporter] | None = None) -> None:
        self.connector = connector
        self.task_id = task_id
        self.tolerate_all = config.errors_tolerance == "all"
        self.retry_timeout_ms = config.errors_retry_timeout
        self.retry_delay_max_ms = config.errors_retry_delay_max_ms
        self.log_enabled = config.errors_log_enable
        self.log_messages = config.errors_log_include_messages
        self.reporters = list(reporters or [])
        self.failures = 0
        self.skipped = 0

    async def recover(self, stage: Stage, executing: Any, exc: BaseException, retry: Callable[[], Any] | None = None,
                      raw: RawRecord | None = None, record: Any = None) -> tuple[bool, Any]:
        """Handle a failure; returns (True, result) if a retry succeeded, (False, None) if the
        record is to be skipped. Raises ToleranceExceeded when the task must fail."""
        if isinstance(exc, RetriableException) and retry is not None and self.retry_timeout_ms != 0:
            deadline = None if self.retry_timeout_ms < 0 else time.monotonic() + self.retry_timeout_ms / 1000
            delay = 0.3
            while deadline is None or time.monotonic() < deadline:
                wait = min(delay, self.retry_delay_max_ms / 1000)
                if deadline is not None:
                    wait = min(wait, max(deadline - time.monotonic(), 0))
                await asyncio.sleep(wait * (0.8 + random.random() * 0.4))
                delay *= 2
                try:
                    return True, retry()
                except RetriableException as again:
                    exc = again
                except Exception as other:
                    exc = other
                    break
        self.failures += 1
        name = (executing if isinstance(executing, str)
                else type(executing).__module__ + "." + type(executing).__qualname__)
        ctx = ErrorContext(stage, name, exc, raw, record, self.connector, self.task_id)
        if self.log_enabled:
            self._log(ctx)
        for report in self.reporters:
            try:
                await report(ctx)
            except Exception:
                log.exception("error reporter failed for %s task %d", self.connector, self.task_id)
        if not self.tolerate_all:
            raise ToleranceExceeded(f"Tolerance exceeded in error handler (stage {stage.value}, class {name})") from exc
        self.skipped += 1
        return False, None

    def _log(self, ctx: ErrorContext) -> None:
        detail = ""
        if self.log_messages:
            if ctx.raw is not None:
                r = ctx.raw
                detail = (f", where consumed record is {{topic='{r.topic}', partition={r.partition}, "
                          f"offset={r.offset}, timestamp={r.timestamp}, key={r.key!r}, value={r.value!r}}}")
            elif ctx.record is not None:
                detail = f", where source record is {ctx.record!r}"
        log.error("Error encountered in task %s-%d. Executing stage '%s' with class '%s'%s.", ctx.connector,
                  ctx.task_id, ctx.stage.value, ctx.executing_class, detail, exc_info=ctx.exception)


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
