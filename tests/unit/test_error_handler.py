"""ErrorHandler.execute: Kafka Connect's retry with tolerance (RetryWithToleranceOperator)."""

from __future__ import annotations

import asyncio
import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest

from headwater.connect.api import DataException, RetriableException
from headwater.connect.runtime.errors import (
    ErrorHandler,
    Stage,
    TaskStopping,
    ToleranceExceeded,
    backoff_delay,
    is_retriable,
)


def handler(timeout_ms: int, delay_max_ms: int = 1, tolerance: str = "none") -> ErrorHandler:
    config = SimpleNamespace(errors_tolerance=tolerance, errors_retry_timeout=timeout_ms,
                             errors_retry_delay_max_ms=delay_max_ms, errors_log_enable=True,
                             errors_log_include_messages=False)
    return ErrorHandler("c", 0, config)


class Flaky:
    """Raises ``exc`` the first ``times`` calls, then returns ``value``."""

    def __init__(self, times: int, exc: type[Exception] = RetriableException, value: Any = "ok") -> None:
        self.times, self.exc, self.value, self.calls = times, exc, value, 0

    def __call__(self) -> Any:
        self.calls += 1
        if self.calls <= self.times:
            raise self.exc(f"failure {self.calls}")
        return self.value


def test_backoff_doubles_from_300_ms_then_jitters_below_the_cap_and_stops_at_the_deadline() -> None:
    assert [backoff_delay(a, 60_000, 1e9) for a in range(1, 6)] == [300, 600, 1200, 2400, 4800]
    capped = [backoff_delay(4, 1000, 1e9) for _ in range(200)]  # 2400 > 1000: a random delay below the cap
    assert all(0 <= d < 1000 for d in capped) and len(set(capped)) > 100
    assert backoff_delay(1, 60_000, 120.0) == 120.0  # never past the deadline
    assert backoff_delay(80, 60_000, 1e9) < 60_000  # no overflow on long retry runs


def test_retriable_failures_are_retried_until_the_operation_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    errors, op = handler(-1), Flaky(4)
    assert asyncio.run(errors.execute(Stage.TRANSFORMATION, "T", op)) == (True, "ok")
    assert op.calls == 5 and errors.retries == 4 and errors.failures == 0
    assert "succeeded after 4 retries" in caplog.text
    assert [r.message.count("(attempt ") for r in caplog.records if "retriable failure" in r.message] == [1] * 4


def test_a_first_failure_handed_in_counts_as_the_first_attempt() -> None:
    errors, op = handler(10_000), Flaky(1)
    first = RetriableException("inline")
    assert asyncio.run(errors.execute(Stage.VALUE_CONVERTER, "C", op, failed=first)) == (True, "ok")
    assert op.calls == 2 and errors.retries == 2


def test_timeout_zero_never_retries() -> None:
    errors, op = handler(0), Flaky(1)
    with pytest.raises(ToleranceExceeded, match="1 attempt, no retry"):
        asyncio.run(errors.execute(Stage.TRANSFORMATION, "T", op))
    assert op.calls == 1


def test_retries_stop_at_the_timeout_and_tolerance_decides() -> None:
    errors, op = handler(600, delay_max_ms=100, tolerance="all"), Flaky(10**9)
    reported: list[Any] = []

    async def report(ctx: Any) -> None:
        reported.append(ctx)

    errors.reporters.append(report)
    started = time.monotonic()
    assert asyncio.run(errors.execute(Stage.TRANSFORMATION, "T", op)) == (False, None)
    took = time.monotonic() - started
    assert 0.55 <= took < 2.0, took
    assert op.calls >= 3 and errors.skipped == 1
    assert reported[0].attempts == op.calls  # the error context carries the retry count


def test_non_retriable_failures_are_not_retried() -> None:
    errors, op = handler(-1, tolerance="all"), Flaky(1, DataException)
    assert asyncio.run(errors.execute(Stage.VALUE_CONVERTER, "C", op)) == (False, None)
    assert op.calls == 1 and errors.skipped == 1


def test_kafka_client_errors_that_say_retriable_are_retriable() -> None:
    from aiokafka.errors import KafkaTimeoutError, NotLeaderForPartitionError, RecordTooLargeError

    assert is_retriable(NotLeaderForPartitionError()) and is_retriable(RetriableException("x"))
    assert not is_retriable(RecordTooLargeError()) and not is_retriable(KafkaTimeoutError())


def test_a_stop_ends_the_retries_without_skipping_the_record() -> None:
    errors, op = handler(-1, delay_max_ms=5000), Flaky(10**9)
    stop_at = time.monotonic() + 0.5
    errors.stopping = lambda: time.monotonic() > stop_at
    started = time.monotonic()
    with pytest.raises(TaskStopping):
        asyncio.run(errors.execute(Stage.TRANSFORMATION, "T", op))
    assert time.monotonic() - started < 2.0  # the long backoff is cut short
    assert errors.skipped == 0 and errors.failures == 0
