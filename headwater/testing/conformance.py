"""The connector conformance suite: checks any source or sink connector must pass, run against the real
broker and worker of the kit's fixtures. A plugin author subclasses one of the two suites::

    class TestMyConnector(SourceConnectorConformance):
        connector_class = "my_plugin.MyConnector"
        config = {"topic": "{topic}", "rate": "100"}

Each check is a test method, ``test_<check>``; a check that does not apply is skipped by naming it in
``skip_checks`` with the reason. Checks watch the connector from inside the worker through the probe
(``headwater.testing.probe``): what the runtime asked of the tasks and what they answered.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import ValidationError

from headwater.connect.api import ConnectorConfig, ExactlyOnceSupport, SinkConnectorConfig, SourceConnectorConfig

from .broker import EmbeddedBroker
from .names import unique
from .probe import Polled, TaskJournal, json_key
from .rest import ConnectClient
from .waiting import wait_until
from .worker import EmbeddedWorker

__all__ = ["CHECKS", "SinkConnectorConformance", "SourceConnectorConformance"]

#: Every check, by the name ``skip_checks`` takes (its test method is ``test_<name>``).
CHECKS = ("config_errors_per_field", "lifecycle", "no_poll_after_stop", "offsets_round_trip", "version_reported",
          "tasks_max", "nothing_lost_on_task_restart", "exactly_once")

_COMMON_KEYS = {f.alias or n for model in (ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig)
                for n, f in model.model_fields.items()}
# ``stop`` comes from another thread than the one that polls (as in Kafka Connect), so a poll the worker
# had already set off may begin just after it: one call that begins within this many seconds is not late
# (its thread may start a second late on a busy machine; a task that keeps polling makes a second call).
STOP_RACE = 2.0
# Values tried, in order, to find one a declared field rejects (unless ``invalid_values`` names one).
_BAD_VALUES = ("not-a-number", "-1", "-99999999", "", "maybe", "[]")


class _Conformance:
    """What the source and sink suites share: settings, fixtures and the checks that apply to both."""

    #: The connector under test: any name ``connector.class`` accepts.
    connector_class: ClassVar[str] = ""
    #: A working config of it (without ``name`` and ``connector.class``). In string values ``{topic}`` is
    #: replaced by a topic made for each check, ``{name}`` by the connector's name and ``{tmp_path}`` by a
    #: folder of the check's own.
    config: ClassVar[dict[str, str]] = {}
    #: Checks that do not apply, with why: ``{"offsets_round_trip": "reads no offsets: ..."}``.
    skip_checks: ClassVar[dict[str, str]] = {}
    #: Bad values for declared keys, checked on top of those found from the config model.
    invalid_values: ClassVar[dict[str, str]] = {}
    #: The ``tasks.max`` values the tasks check creates the connector with.
    tasks_max_values: ClassVar[tuple[int, ...]] = (1, 2, 3)
    #: Partitions of the topic made for each check.
    partitions: ClassVar[int] = 1
    #: Seconds any one wait may take.
    timeout: ClassVar[float] = 30.0
    #: Seconds to keep watching a stopped task for calls it should not get.
    quiet_period: ClassVar[float] = 1.0

    #: What the checks call the task method they watch (a sink's is ``put``).
    call_name: ClassVar[str] = "poll"

    broker: EmbeddedBroker
    worker: EmbeddedWorker
    connect: ConnectClient
    tmp_path: Path
    topic: str
    cls: type  # the connector class (the original, not its probed subclass)

    @pytest.fixture(autouse=True)
    def _headwater_conformance(self, request: pytest.FixtureRequest, headwater_broker: EmbeddedBroker,
                               headwater_worker: EmbeddedWorker, headwater_connect: ConnectClient,
                               tmp_path: Path) -> Iterator[None]:
        check = request.node.originalname.removeprefix("test_")
        unknown = sorted(set(self.skip_checks) - set(CHECKS))
        if unknown:
            pytest.fail(f"skip_checks names no check: {unknown}; the checks are {list(CHECKS)}", pytrace=False)
        if check in self.skip_checks:
            pytest.skip(f"{check} skipped: {self.skip_checks[check]}")
        assert self.connector_class, f"{type(self).__name__} must set connector_class"
        self.broker, self.worker, self.connect, self.tmp_path = (headwater_broker, headwater_worker,
                                                                 headwater_connect, tmp_path)
        try:
            self.cls = headwater_worker.probe(self.connector_class)
        except LookupError as exc:
            pytest.fail(f"{exc}: install the plugin (its 'headwater' entry point) or name its module in the "
                        f"headwater_plugins fixture or ini option", pytrace=False)
        self.topic = headwater_broker.create_topic(unique(f"conformance-{check.replace('_', '-')}"),
                                                   self.partitions)
        yield

    # -- helpers -------------------------------------------------------------------------------

    def connector_config(self, name: str, **overrides: str) -> dict[str, str]:
        """The config the suite creates connector ``name`` with: ``config`` with its placeholders filled."""
        fill = {"{topic}": self.topic, "{name}": name, "{tmp_path}": str(self.tmp_path)}
        config = {**self.base_config(), **self.config, **overrides}
        for key, value in config.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            for placeholder, actual in fill.items():
                text = text.replace(placeholder, actual)
            config[key] = text
        return {"connector.class": self.connector_class, "name": name, **config}

    def base_config(self) -> dict[str, str]:
        """Keys the suite sets unless ``config`` does."""
        return {}

    def start(self, check: str, **overrides: str) -> tuple[str, dict[str, Any]]:
        """Create a connector for ``check`` and wait until it and its tasks run; (name, status)."""
        name = unique(check.replace("_", "-"))
        self.connect.create(name, self.connector_config(name, **overrides))
        return name, self.connect.wait_for_state(name, "RUNNING", timeout=self.timeout)

    def instances(self, name: str) -> list[TaskJournal]:
        return self.worker.journal.tasks(name)

    def wait_for_instances(self, name: str, count: int, what: str) -> list[TaskJournal]:
        """Wait until ``count`` task instances of ``name`` have started."""
        wait_until(lambda: len(self.instances(name)) >= count, what, self.timeout,
                   seen=lambda: [t.describe() for t in self.instances(name)])
        return self.instances(name)

    def wait_quiet(self, name: str) -> None:
        """Wait until every task instance of ``name`` was stopped and no poll or put is under way in it."""
        wait_until(lambda: all(t.stopped and not t.in_call for t in self.instances(name)),
                   f"every task of {name} to be stopped, with no {self.call_name} under way", self.timeout,
                   seen=lambda: [t.describe() for t in self.instances(name)])

    def wait_no_running_task(self, name: str, what: str) -> None:
        """Wait until the worker runs no task of connector ``name`` (``what`` happened to it)."""
        wait_until(lambda: not self.worker.running_tasks(name), f"the worker to run no task of {what} connector "
                   f"{name}", self.timeout, seen=lambda: f"tasks {self.worker.running_tasks(name)} still run")

    def wait_for_calls(self, name: str, instances: list[TaskJournal]) -> None:
        """Wait until every task was polled at least once."""
        wait_until(lambda: all(t.calls for t in instances), f"every task of {name} to be called ({self.call_name})",
                   self.timeout, seen=lambda: [t.describe() for t in instances])

    # -- the checks both kinds share ----------------------------------------------------------------

    def test_config_errors_per_field(self) -> None:
        """A bad value in a declared key is reported by ``config/validate`` under that key, and a create
        with it is refused with 400 naming the key (and creates nothing)."""
        name = unique("config-errors")
        good = self.connector_config(name)
        answer = self.connect.validate(self.connector_class, good)
        assert answer["error_count"] == 0, (
            f"the suite's config of {self.connector_class} must be valid, but validate reported "
            f"{self.connect.errors_by_key(answer)}")
        cases = self.invalid_cases(good)
        assert cases, f"no declared key of {self.connector_class} could be given a bad value; set invalid_values"
        problems = []
        for key, config in cases:
            shown = config.get(key, "<missing>")
            errors = self.connect.errors_by_key(self.connect.validate(self.connector_class, config))
            if not errors.get(key):
                problems.append(f"validate with {key}={shown!r}: no error under {key!r}; errors were under "
                                f"{sorted(errors)} ({errors})")
            created = self.connect.call("POST", "/connectors", {"name": name, "config": config})
            if created.status != 400:
                problems.append(f"create with {key}={shown!r} answered {created.status}, not 400: "
                                f"{created.body[:300]!r}")
                self.connect.call("DELETE", f"/connectors/{name}")
            elif key not in str((created.json or {}).get("message", "")):
                problems.append(f"create with {key}={shown!r} was refused, but its message does not name {key!r}: "
                                f"{created.json}")
        assert not problems, "config errors are not reported per key:\n  " + "\n  ".join(problems)

    def invalid_cases(self, good: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
        """(key, config) pairs that must fail on ``key``: each required key of the connector's own left out,
        a value its config model rejects for each key of its own, ``tasks.max=0`` and ``invalid_values``."""
        model = self.cls.config_class  # type: ignore[attr-defined]
        cases: list[tuple[str, dict[str, str]]] = [("tasks.max", {**good, "tasks.max": "0"})]
        for attr, f in model.model_fields.items():
            key = f.alias or attr
            if key in _COMMON_KEYS or key in self.invalid_values:
                continue
            if f.is_required():
                cases.append((key, {k: v for k, v in good.items() if k != key}))
            bad = next((v for v in _BAD_VALUES if _rejects(model, {**good, key: v}, attr)), None)
            if bad is not None:
                cases.append((key, {**good, key: bad}))
        cases += [(key, {**good, key: value}) for key, value in self.invalid_values.items()]
        return cases

    def test_lifecycle(self) -> None:
        """Create, pause, resume, restart with tasks, stop and delete each reach their state; restarted tasks
        are new instances; stop and delete leave no task running."""
        name, status = self.start("lifecycle")
        count = len(status["tasks"])
        self.connect.pause(name)
        self.connect.wait_for_state(name, "PAUSED", timeout=self.timeout)
        self.connect.resume(name)
        self.connect.wait_for_state(name, "RUNNING", timeout=self.timeout)
        before = len(self.instances(name))
        self.connect.restart(name, include_tasks=True)
        self.wait_for_instances(name, before + count, f"{count} new task instances of {name} after a restart "
                                                      f"with includeTasks")
        self.connect.wait_for_state(name, "RUNNING", tasks=count, timeout=self.timeout)
        self.connect.stop(name)
        stopped = self.connect.wait_for_state(name, "STOPPED", tasks=0, timeout=self.timeout)
        assert stopped["tasks"] == [], f"a STOPPED connector still lists tasks: {stopped}"
        self.wait_quiet(name)
        self.wait_no_running_task(name, "stopped")
        self.connect.resume(name)
        self.connect.wait_for_state(name, "RUNNING", tasks=count, timeout=self.timeout)
        self.connect.delete(name)
        self.connect.wait_gone(name, self.timeout)
        self.wait_quiet(name)
        self.wait_no_running_task(name, "deleted")
        journal = self.worker.journal.connector(name)
        wait_until(lambda: journal.stops >= journal.starts, f"connector {name} to be stopped as often as started",
                   self.timeout, seen=lambda: f"{journal.starts} starts, {journal.stops} stops")

    def test_no_poll_after_stop(self) -> None:
        """Once a task's ``stop`` was called, its ``poll`` (a sink's ``put``) is not called again, and a call
        under way returns: through a task restart and a delete. (A poll the worker set off as ``stop`` came,
        from another thread, may begin up to STOP_RACE seconds after it; a second one may not.)"""
        name, status = self.start("no_poll_after_stop")
        count = len(status["tasks"])
        first = self.wait_for_instances(name, count, f"{count} task instances of {name}")
        self.wait_for_calls(name, first)
        self.connect.restart_task(name, 0)
        self.wait_for_instances(name, count + 1, f"a new instance of task 0 of {name} after its restart")
        self.connect.wait_for_state(name, "RUNNING", tasks=count, timeout=self.timeout)
        self.connect.delete(name)
        self.connect.wait_gone(name, self.timeout)
        self.wait_quiet(name)
        time.sleep(self.quiet_period)  # calls that come late
        late = [t.describe() for t in self.instances(name)
                if t.calls_after_stop > 1 or (t.first_late_call or 0) > STOP_RACE]
        assert not late, f"{self.call_name} was called after stop:\n  " + "\n  ".join(late)

    def test_version_reported(self) -> None:
        """``GET /connector-plugins`` lists the connector's class with a version."""
        wanted = f"{self.cls.__module__}.{self.cls.__qualname__}"
        plugins = self.connect.plugins()
        found = [p for p in plugins if p["class"] == wanted]
        assert found, f"GET /connector-plugins does not list {wanted}: {[p['class'] for p in plugins]}"
        assert all(str(p.get("version") or "").strip() for p in found), f"{wanted} reports no version: {found}"

    def test_tasks_max(self) -> None:
        """With each of ``tasks_max_values``, ``task_configs`` returns at most ``tasks.max`` configs and
        ``GET /connectors/{name}/tasks`` lists at least one and at most ``tasks.max`` tasks, all RUNNING."""
        names = {}
        for value in self.tasks_max_values:
            name = unique(f"tasks-max-{value}")
            self.connect.create(name, self.connector_config(name, **{"tasks.max": str(value)}))
            names[name] = value
        problems = []
        for name, value in names.items():
            calls = self.wait_for_task_configs(name)
            too_many = [(asked, made) for asked, made in calls if made > asked]
            if too_many:
                problems.append(f"tasks.max={value}: task_configs(max_tasks) returned more configs than asked "
                                f"(max_tasks, configs): {too_many}")
                continue
            try:
                status = self.connect.wait_for_state(name, "RUNNING", timeout=self.timeout)
            except AssertionError as exc:
                problems.append(f"tasks.max={value}: {exc}")
                continue
            tasks = self.connect.tasks(name)
            if not 1 <= len(tasks) <= value or len(status["tasks"]) != len(tasks):
                problems.append(f"tasks.max={value}: GET /connectors/{name}/tasks lists {len(tasks)} tasks "
                                f"(status: {status['tasks']})")
        for name in names:
            self.connect.delete(name)
        assert not problems, "tasks.max is not honoured:\n  " + "\n  ".join(problems)

    def wait_for_task_configs(self, name: str) -> list[tuple[int, int]]:
        """The (max_tasks, configs returned) of each ``task_configs`` call of connector ``name``, once there is one."""
        journal = self.worker.journal.connector(name)
        return wait_until(lambda: list(journal.task_configs_calls), f"task_configs to be called for {name}",
                          self.timeout, seen=lambda: self.connect.describe(name))


class SourceConnectorConformance(_Conformance):
    """The conformance suite of a source connector. Its ``config`` must make it write records soon after
    it starts (to ``{topic}`` or topics of its own)."""

    def test_offsets_round_trip(self) -> None:
        """After a stop and a resume, the new tasks are handed the offsets committed before (as the
        worker's offsets endpoint reports them), and do not send again records those offsets covered."""
        name, status = self.start("offsets_round_trip")
        self.connect.wait_for_offsets(name, self.timeout)
        self.connect.stop(name)
        self.connect.wait_for_state(name, "STOPPED", tasks=0, timeout=self.timeout)
        self.wait_quiet(name)
        first = self.instances(name)
        committed = {json_key(e["partition"]): e["offset"] for e in self.connect.offsets(name)}
        assert committed, f"connector {name} has no committed offsets after it stopped"
        covered = _covered(first, committed)
        self.connect.resume(name)
        self.connect.wait_for_state(name, "RUNNING", timeout=self.timeout)
        count = len(status["tasks"])
        later = self.wait_for_instances(name, len(first) + count, f"{count} new task instances of {name} after "
                                                                  f"the resume")[len(first):]
        self.wait_for_more(later)  # what it sends first is what matters
        reads = {p: found for t in later for p, found in t.offsets_read}
        problems = []
        for partition, offset in committed.items():
            if partition not in reads:
                problems.append(f"the resumed task never asked for the offset of source partition {partition} "
                                f"(committed: {offset}); it asked for {sorted(reads) or 'none'}")
            elif reads[partition] != offset:
                problems.append(f"source partition {partition}: the task was handed {reads[partition]}, but "
                                f"{offset} was committed")
        resent = [(p.partition, p.offset) for t in later for p in t.polled
                  if p.offset is not None and p.offset in covered.get(p.partition, set())]
        if resent:
            problems.append(f"the resumed task sent again {len(resent)} records its committed offsets covered "
                            f"(it does not resume from them): first (partition, offset): {resent[0]}; "
                            f"committed: {committed}")
        self.connect.delete(name)
        assert not problems, "offsets do not round-trip:\n  " + "\n  ".join(problems)

    def test_nothing_lost_on_task_restart(self) -> None:
        """Every record the tasks returned from ``poll``, before and after ``POST .../tasks/0/restart``,
        reaches its topic (at least once)."""
        name, status = self.start("nothing_lost")
        count = len(status["tasks"])
        first = self.wait_for_instances(name, count, f"{count} task instances of {name}")
        self.wait_for_polled(name, first)
        self.connect.restart_task(name, 0)
        fresh = self.wait_for_instances(name, count + 1, f"a new instance of task 0 of {name}")[count:]
        self.connect.wait_for_state(name, "RUNNING", tasks=count, timeout=self.timeout)
        self.wait_for_more(fresh)
        self.connect.stop(name)  # everything polled is flushed before the tasks end
        self.connect.wait_for_state(name, "STOPPED", tasks=0, timeout=self.timeout)
        self.wait_quiet(name)
        config = self.connect.config(name)
        polled = [p for t in self.instances(name) for p in t.polled]
        expected = {_encoded(p, self.worker.converters(config)) for p in polled}
        topics = sorted({topic for topic, _, _ in expected})
        written = {(r.topic, r.key, r.value) for topic in topics for r in self.broker.consume(topic)}
        missing = [e for e in expected if e not in written]
        self.connect.delete(name)
        assert not missing, (f"{len(missing)} of {len(expected)} distinct records the tasks polled never reached "
                             f"{topics}; e.g. (topic, key, value) {sorted(missing, key=str)[:3]}")

    def test_exactly_once(self) -> None:
        """For a connector that declares exactly-once support (``exactly_once_support`` answers SUPPORTED for
        the suite's config; skipped otherwise): on a worker with ``exactly.once.source.support=enabled`` it runs
        with ``exactly.once.support=required``, and across a restart of task 0 every record the tasks polled is
        read exactly once by a read_committed consumer, and no source offset is polled twice."""
        name = unique("exactly-once")
        config = self.connector_config(name, **{"exactly.once.support": "required"})
        support = self.cls().exactly_once_support(config)
        if support is not ExactlyOnceSupport.SUPPORTED:
            pytest.skip(f"{self.connector_class} does not declare exactly-once support with the suite's config "
                        f"(exactly_once_support answered {support})")
        own = {"group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic", "bootstrap.servers",
               "listeners"}
        settings = {k: v for k, v in self.worker.settings.items() if k not in own}
        worker = EmbeddedWorker(self.broker.bootstrap, self.worker.plugins,
                                {**settings, "exactly.once.source.support": "enabled"}).start()
        shared, self.worker, self.connect = (self.worker, self.connect), worker, ConnectClient(worker.url)
        try:
            worker.probe(self.connector_class)
            problems = self._exactly_once_problems(name, config)
        finally:
            self.connect.delete_created()
            self.worker, self.connect = shared
            worker.stop()
        assert not problems, "not exactly once:\n  " + "\n  ".join(problems)

    def _exactly_once_problems(self, name: str, config: dict[str, str]) -> list[str]:
        self.connect.create(name, config)
        status = self.connect.wait_for_state(name, "RUNNING", timeout=self.timeout)
        count = len(status["tasks"])
        self.wait_for_polled(name, self.wait_for_instances(name, count, f"{count} task instances of {name}"))
        self.connect.restart_task(name, 0)
        fresh = self.wait_for_instances(name, count + 1, f"a new instance of task 0 of {name}")[count:]
        self.connect.wait_for_state(name, "RUNNING", tasks=count, timeout=self.timeout)
        self.wait_for_more(fresh)
        self.connect.stop(name)  # the tasks' last transactions commit before they end
        self.connect.wait_for_state(name, "STOPPED", tasks=0, timeout=self.timeout)
        self.wait_quiet(name)
        polled = [p for t in self.instances(name) for p in t.polled]
        converters = self.worker.converters(self.connect.config(name))
        expected = Counter(_encoded(p, converters) for p in polled)
        topics = sorted({topic for topic, _, _ in expected})
        written = Counter((r.topic, r.key, r.value) for topic in topics
                          for r in self.broker.consume(topic, isolation_level="read_committed"))
        problems = []
        positions = Counter((p.partition, p.offset) for p in polled if p.offset is not None)
        again = [position for position, n in positions.items() if n > 1]
        if again:
            problems.append(f"{len(again)} source offsets were polled more than once (a restarted task must resume "
                            f"after its committed offsets): first (partition, offset): {again[0]}")
        missing, extra = expected - written, written - expected
        if missing:
            problems.append(f"{sum(missing.values())} of {sum(expected.values())} records polled are not in a "
                            f"committed transaction of {topics}: e.g. {sorted(missing, key=str)[:3]}")
        if extra:
            problems.append(f"{sum(extra.values())} records of committed transactions in {topics} are more than the "
                            f"tasks polled (written twice): e.g. {sorted(extra, key=str)[:3]}")
        return problems

    def wait_for_polled(self, name: str, instances: list[TaskJournal]) -> None:
        wait_until(lambda: all(t.polled for t in instances), f"records polled by every task of {name}",
                   self.timeout, seen=lambda: [t.describe() for t in instances])

    def wait_for_more(self, instances: list[TaskJournal]) -> None:
        """Give restarted tasks a moment to poll records; a source that read everything has none left."""
        deadline = time.monotonic() + self.quiet_period * 3
        while not any(t.polled for t in instances) and time.monotonic() < deadline:
            time.sleep(0.05)


class SinkConnectorConformance(_Conformance):
    """The conformance suite of a sink connector: it reads the topic made for each check (``topics`` is
    set to it unless ``config`` says otherwise) and must take the records ``record`` makes."""

    call_name: ClassVar[str] = "put"
    #: Records sent before, during and after a task restart (each time).
    records_per_batch: ClassVar[int] = 20

    def base_config(self) -> dict[str, str]:
        return {"topics": "{topic}"}

    def record(self, i: int) -> tuple[Any, Any]:
        """The key and value of the i-th record the suite sends (bytes, text, or JSON-able)."""
        return str(i), {"id": i, "text": f"record {i}"}

    def send(self, start: int, count: int) -> None:
        pairs = [self.record(i) for i in range(start, start + count)]
        self.broker.produce(self.topic, [v for _, v in pairs], keys=[k for k, _ in pairs])

    def wait_for_calls(self, name: str, instances: list[TaskJournal]) -> None:
        """Send records and wait until a task was handed some (tasks without a partition get none)."""
        self.send(0, self.records_per_batch)
        wait_until(lambda: any(t.calls for t in instances), f"a task of {name} to be called ({self.call_name})",
                   self.timeout, seen=lambda: [t.describe() for t in instances])

    def test_nothing_lost_on_task_restart(self) -> None:
        """Every record sent to the topic, before, during and after ``POST .../tasks/0/restart``, is handed
        to ``put`` (at least once).

        The second batch is sent while the connector is paused, so that the restarted task is the first to
        see it: a task that resumes past where its predecessor stopped skips records that exist (a position
        past the end of the partition would only be reset to the earliest offset, hiding the bug)."""
        n = self.records_per_batch
        self.send(0, n)
        name, status = self.start("nothing_lost")
        count = len(status["tasks"])
        self.wait_for_delivered(name)
        self.connect.pause(name)
        self.connect.wait_for_state(name, "PAUSED", tasks=count, timeout=self.timeout)
        self.send(n, n)
        self.connect.restart_task(name, 0)
        self.wait_for_instances(name, count + 1, f"a new instance of task 0 of {name}")
        self.connect.resume(name)
        self.connect.wait_for_state(name, "RUNNING", tasks=count, timeout=self.timeout)
        self.send(2 * n, n)
        self.wait_for_delivered(name)
        self.connect.delete(name)

    def wait_for_delivered(self, name: str) -> None:
        """Wait until every offset now in the topic was handed to a task of ``name``."""
        ends = self.broker.end_offsets(self.topic)

        def missing() -> dict[int, list[int]]:
            seen: dict[int, set[int]] = {}
            for t in self.instances(name):
                for (topic, partition), offsets in list(t.delivered.items()):
                    if topic == self.topic:
                        seen.setdefault(partition, set()).update(offsets)
            return {p: [o for o in range(end) if o not in seen.get(p, set())] for p, end in ends.items()
                    if any(o not in seen.get(p, set()) for o in range(end))}

        wait_until(lambda: not missing(), f"every record of {self.topic} ({ends}) to be handed to put",
                   self.timeout, 0.1, seen=lambda: f"offsets never put, by partition: {missing()}")


def _rejects(model: Any, config: dict[str, str], attr: str) -> bool:
    """Whether the config model rejects ``config`` because of field ``attr``."""
    try:
        model.model_validate(config)
    except ValidationError as exc:
        return any(err["loc"] and err["loc"][0] in (attr, model.model_fields[attr].alias) for err in exc.errors())
    return False


def _covered(instances: list[TaskJournal], committed: dict[str, Any]) -> dict[str, set[str]]:
    """Per source partition, the offsets polled up to the committed one (the records it covers)."""
    order: dict[str, list[str]] = {}
    for task in instances:
        for p in task.polled:
            if p.offset is not None:
                order.setdefault(p.partition, []).append(p.offset)
    out = {}
    for partition, offset in committed.items():
        seen = order.get(partition, [])
        wanted = json_key(offset)
        if wanted in seen:
            last = len(seen) - 1 - seen[::-1].index(wanted)
            out[partition] = set(seen[: last + 1])
    return out


def _encoded(p: Polled, converters: tuple[Any, Any]) -> tuple[str, bytes | None, bytes | None]:
    """A polled record as the worker writes it (no transforms): (topic, key bytes, value bytes)."""
    if p.encoded:
        return p.topic, p.key, p.value
    key_converter, value_converter = converters
    return (p.topic, key_converter.from_connect_data(p.topic, p.key_schema, p.key),
            value_converter.from_connect_data(p.topic, p.value_schema, p.value))
