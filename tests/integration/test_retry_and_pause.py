"""Retries that retry and a pause that pauses, through ``headwater up`` (a real broker and worker).

- A transform that fails with a RetriableException a few times per record is retried with Kafka
  Connect's backoff, on the source side and on the sink side: every record arrives once, in order,
  and the log carries the retry counts. ``errors.retry.timeout=0`` never retries.
- PAUSED is reported only once a task has stopped moving records: lines appended to a source file,
  or records produced to a sink's topic, after the task read PAUSED go nowhere until resume, and
  resume continues exactly where the task stopped.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.connectproc import (
    ConnectProcess,
    consume,
    end_offset,
    sink_config,
    source_config,
    unique,
    values,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

STRING = "org.apache.kafka.connect.storage.StringConverter"

# A plugin dropped on plugin.path: fails the first ``fail.times`` applications to each record whose
# number (the digits at the end of its value) is a multiple of ``fail.every``.
FLAKY_PLUGIN = '''
from collections import Counter

from pydantic import Field

from headwater.connect.api import RetriableException, Transformation, TransformConfig, hookimpl


class FlakyConfig(TransformConfig):
    every: int = Field(10, alias="fail.every")
    times: int = Field(3, alias="fail.times")


class Flaky(Transformation):
    config_class = FlakyConfig

    def configure(self, props):
        super().configure(props)
        self.failed = Counter()

    def apply(self, record):
        value = str(record.value)
        number = int(value[len(value.rstrip("0123456789")):] or -1)
        if number % self.config.every == 0 and self.failed[value] < self.config.times:
            self.failed[value] += 1
            raise RetriableException(f"flaky on {value} (failure {self.failed[value]})")
        return record


@hookimpl
def headwater_transforms():
    return [Flaky]
'''


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectProcess]:
    base = tmp_path_factory.mktemp("retry-and-pause")
    plugins = base / "plugins"
    plugins.mkdir()
    (plugins / "flaky_transform.py").write_text(FLAKY_PLUGIN)
    with ConnectProcess(base, plugin_path=plugins) as proc:
        yield proc
        print(f"headwater up log: {proc.log_file}")


def flaky(every: int, times: int, **errors: str) -> dict[str, str]:
    return {"transforms": "flaky", "transforms.flaky.type": "flaky_transform.Flaky",
            "transforms.flaky.fail.every": str(every), "transforms.flaky.fail.times": str(times),
            "value.converter": STRING, **errors}


def file_lines(path: Path) -> list[str]:
    text = path.read_text() if path.exists() else ""
    return text[: text.rfind("\n") + 1].splitlines()


def task_state(connect: ConnectProcess, name: str) -> str | None:
    tasks = connect.status(name)["tasks"]
    return tasks[0]["state"] if tasks else None


# -- 1. retries ----------------------------------------------------------------------------------------


def test_retriable_transform_failures_are_retried_on_both_sides(connect: ConnectProcess, tmp_path: Path) -> None:
    src, out, topic = tmp_path / "in.txt", tmp_path / "out.txt", unique("retry")
    lines = [f"line-{i}" for i in range(60)]
    src.write_text("".join(line + "\n" for line in lines))
    retry = {"errors.retry.timeout": "60000", "errors.retry.delay.max.ms": "200", "errors.log.enable": "true"}
    source, sink = unique("retry-src"), unique("retry-sink")
    connect.create(source, source_config(src, topic, **flaky(10, 3, **retry)))
    connect.create(sink, sink_config(out, topic, **flaky(7, 2, **retry)))

    wait_for(lambda: len(file_lines(out)) >= len(lines), 60, 0.1, "60 lines in the sink's file", connect.log_text)
    time.sleep(1)  # a late repeat would land now
    assert file_lines(out) == lines  # in order, none lost, none doubled
    assert task_state(connect, source) == task_state(connect, sink) == "RUNNING"

    log = connect.log_text()
    for name, every, times in ((source, 10, 3), (sink, 7, 2)):
        retried = re.findall(rf"Task {re.escape(name)}-0: retriable failure in stage 'TRANSFORMATION' with class "
                             rf"'\S+' \(attempt (\d)\), retrying in \d+ ms: flaky on (line-\d+)", log)
        flaky_lines = [line for i, line in enumerate(lines) if i % every == 0]
        assert sorted(retried) == sorted((str(a), line) for line in flaky_lines for a in range(1, times + 1))
        succeeded = re.findall(rf"Task {re.escape(name)}-0: stage 'TRANSFORMATION' with class '\S+' succeeded "
                               rf"after (\d) retries", log)
        assert succeeded == [str(times)] * len(flaky_lines)
    assert "Error encountered in task" not in log.split(source)[-1]  # nothing was given up on
    for name in (source, sink):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_retry_timeout_zero_never_retries(connect: ConnectProcess, tmp_path: Path) -> None:
    src, out, topic = tmp_path / "in.txt", tmp_path / "out.txt", unique("noretry")
    lines = [f"line-{i}" for i in range(30)]
    src.write_text("".join(line + "\n" for line in lines))
    source, sink = unique("noretry-src"), unique("noretry-sink")
    connect.create(source, source_config(src, topic, **{"value.converter": STRING}))
    connect.create(sink, sink_config(out, topic, **flaky(10, 1, **{
        "errors.retry.timeout": "0", "errors.tolerance": "all", "errors.log.enable": "true"})))
    kept = [line for i, line in enumerate(lines) if i % 10]
    wait_for(lambda: len(file_lines(out)) >= len(kept), 60, 0.1, f"{len(kept)} lines in the sink's file",
             connect.log_text)
    time.sleep(1)
    assert file_lines(out) == kept  # the failing records were skipped at once (errors.tolerance=all)
    log = connect.log_text()
    given_up = re.findall(rf"Error encountered in task {re.escape(sink)}-0\. Executing stage 'TRANSFORMATION' "
                          rf"with class '\S+' \(1 attempt, no retry\)", log)
    assert len(given_up) == 3
    assert f"Task {sink}-0: retriable failure" not in log
    for name in (source, sink):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


# -- 2. pause ------------------------------------------------------------------------------------------


class Appender:
    """Appends numbered lines to a file, a few hundred a second, until stopped."""

    def __init__(self, path: Path, prefix: str) -> None:
        self.path, self.prefix, self.count = path, prefix, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with self.path.open("a") as f:
            while not self.stop.is_set():
                for _ in range(10):
                    f.write(f"{self.prefix}-{self.count}\n")
                    self.count += 1
                f.flush()
                time.sleep(0.02)

    def __enter__(self) -> Appender:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)

    def lines(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.count)]


def test_a_paused_source_sends_nothing_and_resumes_where_it_stopped(connect: ConnectProcess, tmp_path: Path) -> None:
    src, topic, name = tmp_path / "in.txt", unique("pause-src"), unique("pause-src")
    src.write_text("")
    connect.create(name, source_config(src, topic, **{"value.converter": STRING}))
    connect.wait_state(name, "RUNNING", tasks=1)
    with Appender(src, "p") as appender:
        wait_for(lambda: end_offset(connect.bootstrap, topic) > 100, 30, 0.05, "records flowing")
        assert connect.call("PUT", f"/connectors/{name}/pause").status == 202
        wait_for(lambda: task_state(connect, name) == "PAUSED", 20, 0.02, "the task PAUSED", connect.log_text)
        at_pause = end_offset(connect.bootstrap, topic)
        written_at_pause = appender.count
        time.sleep(2)  # lines keep coming into the file
        wait_for(lambda: appender.count > written_at_pause + 200, 30, 0.05, "200 more lines in the file")
        assert end_offset(connect.bootstrap, topic) == at_pause  # nothing polled or sent after PAUSED
        assert connect.call("PUT", f"/connectors/{name}/resume").status == 202
        connect.wait_state(name, "RUNNING", tasks=1)
        time.sleep(0.5)
    expected = appender.lines()
    got = values(consume(connect.bootstrap, topic, len(expected), timeout=30, settle=1))
    assert got == expected  # resumed exactly where it stopped: nothing lost, nothing repeated
    connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_paused_sink_delivers_nothing_and_resumes_where_it_stopped(connect: ConnectProcess, tmp_path: Path) -> None:
    src, out, topic = tmp_path / "in.txt", tmp_path / "out.txt", unique("pause-sink")
    source, sink = unique("pause-feed"), unique("pause-sink")
    src.write_text("")
    connect.create(source, source_config(src, topic, **{"value.converter": STRING}))
    connect.create(sink, sink_config(out, topic, **{"value.converter": STRING}))
    connect.wait_state(sink, "RUNNING", tasks=1)
    with Appender(src, "s") as appender:
        wait_for(lambda: len(file_lines(out)) > 100, 30, 0.05, "records reaching the sink", connect.log_text)
        assert connect.call("PUT", f"/connectors/{sink}/pause").status == 202
        wait_for(lambda: task_state(connect, sink) == "PAUSED", 20, 0.02, "the sink task PAUSED", connect.log_text)
        at_pause = len(file_lines(out))
        topic_at_pause = end_offset(connect.bootstrap, topic)
        time.sleep(2)
        wait_for(lambda: end_offset(connect.bootstrap, topic) > topic_at_pause + 200, 30, 0.05,
                 "200 more records in the topic", connect.log_text)  # records kept flowing in
        assert len(file_lines(out)) == at_pause  # none delivered to put after PAUSED
        assert connect.call("PUT", f"/connectors/{sink}/resume").status == 202
        connect.wait_state(sink, "RUNNING", tasks=1)
        time.sleep(0.5)
    expected = appender.lines()
    wait_for(lambda: len(file_lines(out)) >= len(expected), 30, 0.1, f"{len(expected)} lines in the sink's file",
             connect.log_text)
    time.sleep(1)
    assert file_lines(out) == expected
    for name in (source, sink):
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
