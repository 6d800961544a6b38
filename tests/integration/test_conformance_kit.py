"""The plugin author kit (``headwater.testing``) proves what it claims: its conformance suite, run in a
pytest session of its own (pytester) against connectors written here, passes good connectors and fails
each broken one on the check its fault breaks, and on no other; the fixtures leave no thread running;
Headwater's own file connectors pass it.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from headwater.testing import SinkConnectorConformance, SourceConnectorConformance, wait_until

pytest_plugins = ["pytester"]

# The plugin under test: a good source and sink, and sources and a sink broken in one way each.
CONNECTORS = '''
import threading
import time
from typing import Any, ClassVar

from pydantic import Field

from headwater.connect.api import (ExactlyOnceSupport, SinkConnector, SinkConnectorConfig, SinkTask,
                                   SourceConnector, SourceConnectorConfig, SourceRecord, SourceTask, TopicPartition,
                                   hookimpl)

RECEIVED: list[Any] = []


class CountConfig(SourceConnectorConfig):
    topic: str = Field(alias="topic", min_length=1)
    batch: int = Field(5, alias="batch", ge=1)


class CountTask(SourceTask):
    reads_offsets = True

    def start(self, config):
        self.topic, self.batch, self.task = config["topic"], int(config["batch"]), config["task"]
        self.partition = {"counter": self.task}
        stored = self.context.offset_storage_reader.offset(self.partition) if self.reads_offsets else None
        self.next = stored["n"] + 1 if stored else 0
        self.stopping = threading.Event()

    def poll(self):
        if self.stopping.wait(0.05):
            return None
        records = [SourceRecord(self.topic, {"task": self.task, "n": n}, f"{self.task}-{n}",
                                source_partition=self.partition, source_offset={"n": n})
                   for n in range(self.next, self.next + self.batch)]
        self.next += self.batch
        return records

    def stop(self):
        self.stopping.set()


class CountConnector(SourceConnector):
    config_class = CountConfig
    version = "2.0.0"
    task = CountTask

    def start(self, config):
        self.config = config

    def task_class(self):
        return self.task

    def task_configs(self, max_tasks):
        return [{"topic": self.config.topic, "batch": str(self.config.batch), "task": str(i)}
                for i in range(max_tasks)]


class PollerTask(CountTask):
    """Leaves a prefetching thread running after stop: poll is called after stop."""

    def start(self, config):
        super().start(config)
        threading.Thread(target=self.prefetch, name="rogue-poller", daemon=True).start()

    def prefetch(self):
        self.stopping.wait()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            self.poll()
            time.sleep(0.1)

    def poll(self):
        if self.stopping.is_set():
            return [SourceRecord(self.topic, "late", "late")]
        return super().poll()


class PollsAfterStopConnector(CountConnector):
    task = PollerTask


class NotPerFieldConnector(CountConnector):
    """Reports every config problem under one made-up key."""

    @classmethod
    def validate(cls, props):
        errors = super().validate(props)
        return {"config": [m for ms in errors.values() for m in ms]} if errors else {}


class ForgetfulTask(CountTask):
    """Never reads its committed offsets: starts from 0 on every start."""

    reads_offsets = False


class IgnoresOffsetsConnector(CountConnector):
    task = ForgetfulTask


class ExactlyOnceCountConnector(CountConnector):
    """Declares exactly-once support, and has it: its tasks resume after their committed offsets."""

    def exactly_once_support(self, config):
        return ExactlyOnceSupport.SUPPORTED


class ForgetfulExactlyOnceConnector(ExactlyOnceCountConnector):
    """Declares exactly-once support, but its tasks start from 0 again: what they send twice is committed twice."""

    task = ForgetfulTask


class TooManyTasksConnector(CountConnector):
    """One task config too many once more than one is allowed."""

    def task_configs(self, max_tasks):
        configs = super().task_configs(max_tasks)
        return configs + configs[-1:] if max_tasks > 1 else configs


class NoVersionConnector(CountConnector):
    version = ""


class CollectConfig(SinkConnectorConfig):
    flush_size: int = Field(10, alias="flush.size", ge=1)


class CollectTask(SinkTask):
    def start(self, config):
        pass

    def put(self, records):
        RECEIVED.extend(r.value for r in records)


class CollectSinkConnector(SinkConnector):
    config_class = CollectConfig
    version = "0.3.0"

    def start(self, config):
        self.config = config

    def task_class(self):
        return CollectTask

    def task_configs(self, max_tasks):
        return [{} for _ in range(max_tasks)]


NEXT: dict[Any, int] = {}  # where SkippingTask resumes, kept "in its destination"


class SkippingTask(CollectTask):
    """Keeps its own position in its destination, one past where it should: a restarted task skips a record."""

    def put(self, records):
        super().put(records)
        for r in records:
            NEXT[TopicPartition(r.topic, r.kafka_partition)] = r.kafka_offset + 2  # the bug: + 1 is next

    def open(self, partitions):
        self.context.offset({tp: NEXT[tp] for tp in partitions if tp in NEXT})


class SkipsRecordsSinkConnector(CollectSinkConnector):
    def task_class(self):
        return SkippingTask


@hookimpl
def headwater_connectors():
    return [CountConnector, PollsAfterStopConnector, NotPerFieldConnector, IgnoresOffsetsConnector,
            TooManyTasksConnector, NoVersionConnector, CollectSinkConnector, SkipsRecordsSinkConnector,
            ExactlyOnceCountConnector, ForgetfulExactlyOnceConnector]
'''

CONFTEST = '''
import pytest


@pytest.fixture(scope="module")
def headwater_plugins():
    return ["kit_connectors"]
'''

SUITE = '''
from headwater.testing import SinkConnectorConformance, SourceConnectorConformance

COUNT = {"topic": "{topic}", "batch": "5"}


class Fast:
    quiet_period = 0.5  # the rogue poller calls poll within 0.1 s of stop


class TestCount(Fast, SourceConnectorConformance):
    connector_class = "kit_connectors.CountConnector"
    config = COUNT


class TestPollsAfterStop(Fast, SourceConnectorConformance):
    connector_class = "PollsAfterStop"
    config = COUNT


class TestNotPerField(Fast, SourceConnectorConformance):
    connector_class = "NotPerFieldConnector"
    config = COUNT


class TestIgnoresOffsets(Fast, SourceConnectorConformance):
    connector_class = "IgnoresOffsets"
    config = COUNT


class TestTooManyTasks(Fast, SourceConnectorConformance):
    connector_class = "TooManyTasks"
    config = COUNT


class TestNoVersion(Fast, SourceConnectorConformance):
    connector_class = "NoVersion"
    config = COUNT
    skip_checks = {"lifecycle": "shown to be skippable", "offsets_round_trip": "shown to be skippable"}


class TestExactlyOnceCount(Fast, SourceConnectorConformance):
    connector_class = "ExactlyOnceCount"
    config = COUNT


class TestForgetfulExactlyOnce(Fast, SourceConnectorConformance):
    connector_class = "ForgetfulExactlyOnce"
    config = COUNT


class TestCollect(Fast, SinkConnectorConformance):
    connector_class = "CollectSink"


class TestSkipsRecords(Fast, SinkConnectorConformance):
    connector_class = "SkipsRecordsSink"
    timeout = 5.0
'''

# Which checks each connector must fail; every other check must pass (or be skipped, as listed).
EXPECTED_FAILURES = {
    "TestCount": set(),
    "TestPollsAfterStop": {"no_poll_after_stop"},
    "TestNotPerField": {"config_errors_per_field"},
    "TestIgnoresOffsets": {"offsets_round_trip"},
    "TestTooManyTasks": {"tasks_max"},
    "TestNoVersion": {"version_reported"},
    "TestExactlyOnceCount": set(),
    "TestForgetfulExactlyOnce": {"offsets_round_trip", "exactly_once"},
    "TestCollect": set(),
    "TestSkipsRecords": {"nothing_lost_on_task_restart"},
}
# exactly_once: only for connectors that declare exactly-once support
SKIPPED = {"TestCount": {"exactly_once"}, "TestPollsAfterStop": {"exactly_once"}, "TestNotPerField": {"exactly_once"},
           "TestIgnoresOffsets": {"exactly_once"}, "TestTooManyTasks": {"exactly_once"},
           "TestNoVersion": {"lifecycle", "offsets_round_trip", "exactly_once"}}
MESSAGES = {
    "TestPollsAfterStop": "poll was called after stop",
    "TestNotPerField": "no error under 'batch'",
    "TestIgnoresOffsets": "never asked for the offset of source partition",
    "TestTooManyTasks": "returned more configs than asked",
    "TestNoVersion": "reports no version",
    "TestSkipsRecords": "to be handed to put; last seen: offsets never put",
    "TestForgetfulExactlyOnce": "source offsets were polled more than once",
}


def _kit_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(("headwater-", "rogue-"))}


def test_the_suite_fails_broken_connectors_on_the_right_checks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(kit_connectors=CONNECTORS, conftest=CONFTEST, test_suite=SUITE)
    pytester.syspathinsert()
    running_before = _kit_threads()  # this session's own broker and worker, if any
    started = time.monotonic()
    result = pytester.inline_run("-p", "no:cacheprovider", "-q")
    took = time.monotonic() - started

    outcomes: dict[str, dict[str, str]] = {}
    texts: dict[str, str] = {}
    for report in result.getreports("pytest_runtest_logreport"):
        _, cls, test = report.nodeid.split("::")
        check = test.removeprefix("test_")
        if report.when == "call" or report.outcome != "passed":
            outcomes.setdefault(cls, {})[check] = report.outcome
        if report.failed:
            texts[cls] = texts.get(cls, "") + str(report.longrepr)

    for cls, failing in EXPECTED_FAILURES.items():
        got = outcomes.get(cls, {})
        assert {c for c, o in got.items() if o == "failed"} == failing, f"{cls}: {got}\n{texts.get(cls, '')[:3000]}"
        assert {c for c, o in got.items() if o == "skipped"} == SKIPPED.get(cls, set()), f"{cls}: {got}"
        assert got, f"{cls} ran no checks"
    for cls, text in MESSAGES.items():
        assert text in texts.get(cls, ""), f"{cls}: the failure does not say {text!r}:\n{texts.get(cls, '')[:3000]}"
    assert took < 180, f"the conformance runs took {took:.0f}s"  # 35 s on a busy machine; far more: a check waited out

    # the fixtures stopped their threads (the rogue poller ends by itself soon after its task stopped)
    wait_until(lambda: not _kit_threads() - running_before, "the kit's threads to end", 30, 0.1,
               seen=lambda: f"threads left running: {_kit_threads() - running_before}")


def test_the_embedded_broker_and_worker_stop_everything(tmp_path: Path) -> None:
    from headwater.testing import ConnectClient, EmbeddedBroker, EmbeddedWorker

    before = set(threading.enumerate())
    broker = EmbeddedBroker(tmp_path / "broker").start()
    worker = EmbeddedWorker(broker.bootstrap).start()
    ports = [int(broker.bootstrap.rsplit(":", 1)[1]), int(worker.url.rsplit(":", 1)[1])]
    assert ConnectClient(worker.url).connectors() == []
    assert worker.stop() == [], "the worker left tasks or threads behind"
    assert broker.stop() == [], "the broker left tasks or threads behind"
    for port in ports:
        with socket.socket() as sock:
            assert sock.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still accepts connections"
    assert set(threading.enumerate()) - before == set()


def test_a_thread_stuck_in_plugin_code_is_reported() -> None:
    from headwater.testing.loop import LoopThread

    release = threading.Event()
    loop = LoopThread("headwater-stuck")

    async def stuck_poll() -> None:
        await asyncio.to_thread(release.wait)  # as a sync poll that does not return runs

    loop.submit(stuck_poll())
    wait_until(lambda: any(t.name.startswith("headwater-stuck-executor") for t in threading.enumerate()),
               "the poll to be stuck in the loop's executor", 30)
    leftover = loop.close(timeout=0.5)
    release.set()
    assert any(name.startswith("thread headwater-stuck-executor") for name in leftover), leftover
    assert any(name.startswith("asyncio task") for name in leftover), leftover


def test_the_pytest_plugin_imports_nothing_heavy() -> None:
    # it is loaded in every pytest session of the environment: the kit's modules load on first use
    code = ("import sys, headwater.testing.plugin, headwater.testing; "
            "print(sorted(m for m in sys.modules if m.startswith(('headwater.', 'aiokafka', 'kafka', 'pydantic'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "['headwater.testing', 'headwater.testing.plugin']", loaded


# Headwater's own file connectors pass the suite as any plugin's would; what they read is set up by a
# fixture of the class, as an author sets up what a connector needs.

class TestFileSourceConformance(SourceConnectorConformance):
    connector_class = "FileStreamSource"
    config = {"file": "{tmp_path}/input.txt", "topic": "{topic}"}
    quiet_period = 0.5

    @pytest.fixture(autouse=True)
    def _input(self, tmp_path: Path) -> None:
        (tmp_path / "input.txt").write_text("".join(f"line {i}\n" for i in range(2000)))


class TestFileSinkConformance(SinkConnectorConformance):
    connector_class = "FileStreamSink"
    config = {"file": "{tmp_path}/output.txt"}
    quiet_period = 0.5
