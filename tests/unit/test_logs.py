"""One log format: the connector and task in Kafka's MDC style, or JSON lines with them as fields."""

from __future__ import annotations

import asyncio
import io
import json
import logging

import pytest

from headwater.logs import enter_context, log_context, setup


@pytest.fixture(autouse=True)
def root_logger():
    """Each test sets up the root logger its way; pytest's own handlers come back afterwards."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


@pytest.fixture
def captured():
    setup("INFO", "text")
    stream = io.StringIO()
    logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
    return stream


def test_text_lines_carry_the_connector_and_task(captured: io.StringIO) -> None:
    log = logging.getLogger("headwater.test")

    async def task() -> None:
        enter_context("orders-cdc", "task-0")
        log.info("in the task")
        await asyncio.to_thread(log.info, "in a thread the task started")

    async def main() -> None:
        await asyncio.create_task(task())
        log.info("outside")  # the task's context stayed in the task
        with log_context("orders-cdc", "worker"):
            log.info("the connector")

    asyncio.run(main())
    lines = captured.getvalue().splitlines()
    assert lines[0].endswith("INFO [orders-cdc|task-0] headwater.test: in the task")
    assert lines[1].endswith("[orders-cdc|task-0] headwater.test: in a thread the task started")
    assert lines[2].endswith("INFO headwater.test: outside")
    assert lines[3].endswith("INFO [orders-cdc|worker] headwater.test: the connector")


def test_json_lines_for_log_shippers() -> None:
    setup("INFO", "json")
    stream = io.StringIO()
    logging.getLogger().handlers[0].setStream(stream)  # type: ignore[attr-defined]
    log = logging.getLogger("headwater.test")
    with log_context("sink", "task-3"):
        log.warning("slow %s", "flush")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second = (json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{"))
    assert {k: first[k] for k in ("level", "logger", "message", "connector", "task")} == {
        "level": "WARNING", "logger": "headwater.test", "message": "slow flush", "connector": "sink", "task": "task-3"}
    assert first["time"].endswith("Z") and "connector" not in second and "ValueError: boom" in second["exception"]


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="--log-format"):
        setup("INFO", "xml")
