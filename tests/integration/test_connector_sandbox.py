"""What a connector may touch, through a real distributed worker's REST API: a FileStreamSink aimed at
``plugin.path`` (directly, through a symlink, through ``..``) is refused by the validate endpoint and by a
create, and nothing is written; paths outside ``connector.allowed.paths`` are refused for the file source
and sink, the spool-dir source and the Spark lake; inside, a file source and sink carry records end to
end; a forged task config is checked again where the task opens its file; and a worker key Headwater
cannot honour stops ``headwater connect`` and ``headwater up`` at start, naming the key."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import Response, consume, produce, sink_config, source_config, unique, values, wait_for
from support.workerproc import REPO, SHIPPED_PROPERTIES, WorkerProcess, cluster_settings

from headwater.connect.config import WorkerConfig
from headwater.connect.plugins import PluginRegistry
from headwater.connect.runtime.worker import Worker
from headwater.connect.status import State, TargetState, TaskId
from headwater.connect.storage.offsets import MemoryOffsetStore
from headwater.connectors.file.sink import FileStreamSinkTask


class Place:
    """The worker's folders: ``allowed`` (its connector.allowed.paths, with symlinks out of it), ``plugins``
    (its plugin.path) and ``outside``."""

    def __init__(self, base: Path) -> None:
        self.allowed, self.plugins, self.outside = base / "allowed", base / "plugins", base / "outside"
        for folder in (self.allowed, self.plugins, self.outside):
            folder.mkdir(parents=True)
        (self.allowed / "to-plugins").symlink_to(self.plugins)
        (self.allowed / "to-outside").symlink_to(self.outside)
        for sub in ("in", "error", "finished"):
            (self.allowed / sub).mkdir()


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Place:
    return Place(tmp_path_factory.mktemp("sandbox"))


@pytest.fixture(scope="module")
def worker(broker: BrokerProcess, place: Place, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    settings = {**cluster_settings(unique("sandbox")), "plugin.path": str(place.plugins),
                "connector.allowed.paths": str(place.allowed), "offset.flush.interval.ms": "500",
                "session.timeout.ms": "10000", "heartbeat.interval.ms": "1000", "offset.storage.partitions": "2",
                "status.storage.partitions": "1"}  # the session broker's default group session bounds
    log = tmp_path_factory.mktemp("sandbox-worker") / "worker.log"
    with WorkerProcess(broker.bootstrap, settings, log) as w:
        yield w


def validate(worker: WorkerProcess, plugin: str, config: dict[str, str]) -> dict[str, list[str]]:
    answer = worker.ok("PUT", f"/connector-plugins/{plugin}/config/validate", {"name": "v", **config}, expect=200)
    found = {c["value"]["name"]: c["value"]["errors"] for c in answer["configs"] if c["value"]["errors"]}
    assert answer["error_count"] == sum(len(m) for m in found.values())
    return found


def refused_create(worker: WorkerProcess, name: str, config: dict[str, str]) -> Response:
    answer = worker.call("POST", "/connectors", {"name": name, "config": config})
    assert answer.status == 400, answer
    assert worker.call("GET", f"/connectors/{name}").status == 404  # nothing was stored, nothing started
    return answer


@pytest.mark.parametrize("way", ["direct", "symlink", "dotdot"])
def test_a_file_sink_into_plugin_path_is_refused_and_writes_nothing(worker: WorkerProcess, place: Place,
                                                                    way: str) -> None:
    topic, name = unique("sandbox-plugin"), unique("sandbox-evil")
    produce(worker.bootstrap, topic, [(None, b"import os; os.system('touch /tmp/pwned')", [])])
    target = {"direct": place.plugins, "symlink": place.allowed / "to-plugins",
              "dotdot": place.allowed / "in" / ".." / ".." / "plugins"}[way] / "evil.py"
    config = sink_config(target, topic)
    found = validate(worker, "FileStreamSinkConnector", config)
    assert list(found) == ["file"], found
    assert f"is not a place a connector may write to: it is in the worker's plugin.path folder '{place.plugins}'" \
        in found["file"][0]
    answer = refused_create(worker, name, config)
    assert "Invalid configuration file:" in answer.body.decode() and "plugin.path" in answer.body.decode()
    assert worker.call("PUT", f"/connectors/{name}/config", config).status == 400
    assert worker.call("GET", f"/connectors/{name}").status == 404
    assert list(place.plugins.iterdir()) == []  # no .py, nothing at all


@pytest.mark.parametrize("way", ["outside", "symlink", "dotdot"])
def test_paths_outside_the_bound_are_refused_for_every_file_connector(worker: WorkerProcess, place: Place,
                                                                      way: str) -> None:
    a = place.allowed
    out = {"outside": place.outside, "symlink": a / "to-outside", "dotdot": a / "in" / ".." / ".." / "outside"}[way]
    (out / "in").mkdir(exist_ok=True)
    cases = [
        ("FileStreamSourceConnector", "file", source_config(out / "secrets.txt", "t")),
        ("FileStreamSinkConnector", "file", sink_config(out / "out.txt", "t")),
        ("SpoolDirLineDelimitedSourceConnector", "input.path",
         {"topic": "t", "input.path": str(out / "in"), "error.path": str(a / "error"),
          "finished.path": str(a / "finished"), "input.file.pattern": ".*"}),
        ("SpoolDirLineDelimitedSourceConnector", "finished.path",
         {"topic": "t", "input.path": str(a / "in"), "error.path": str(a / "error"), "finished.path": str(out),
          "input.file.pattern": ".*"}),
        ("SparkParquetSink", "lake.path", {"topics": "t", "lake.path": str(out / "lake")}),
    ]
    for plugin, key, config in cases:
        found = validate(worker, plugin, {"connector.class": plugin, **config})
        assert list(found) == [key], (plugin, found)
        assert "outside the folders the worker lets connectors" in found[key][0]
        assert f"(connector.allowed.paths={a})" in found[key][0], found
    answer = refused_create(worker, unique("sandbox-out"), cases[0][2])
    assert f"connector.allowed.paths={a}" in answer.body.decode()


def test_spark_settings_that_load_code_are_refused_by_validate_and_create(worker: WorkerProcess, place: Place) -> None:
    config = {"connector.class": "SparkParquetSink", "topics": "t", "lake.path": str(place.allowed / "lake"),
              "spark.conf.spark.driver.extraJavaOptions": "-javaagent:/tmp/agent.jar",
              "spark.conf.spark.sql.shuffle.partitions": "2"}
    found = validate(worker, "SparkParquetSink", config)
    assert list(found) == ["spark.conf.spark.driver.extraJavaOptions"], found
    assert "spark.conf.allowed" in found["spark.conf.spark.driver.extraJavaOptions"][0]
    refused_create(worker, unique("sandbox-spark"), config)
    del config["spark.conf.spark.driver.extraJavaOptions"]
    assert validate(worker, "SparkParquetSink", config) == {}


def test_inside_the_bound_a_file_source_and_sink_carry_records(worker: WorkerProcess, place: Place) -> None:
    topic, source, sink = unique("sandbox-ok"), unique("sandbox-src"), unique("sandbox-sink")
    data, out = place.allowed / f"{source}.txt", place.allowed / "new" / f"{sink}.txt"
    data.write_text("one\ntwo\nthree\n")
    # given relative to nothing the worker would refuse: '..' that stays inside is fine
    worker.ok("POST", "/connectors", {"name": source, "config": source_config(place.allowed / "in" / ".." / data.name,
                                                                              topic)}, expect=201)
    worker.ok("POST", "/connectors", {"name": sink, "config": sink_config(out, topic)}, expect=201)
    wait_for(lambda: out.exists() and out.read_text().splitlines() == ["one", "two", "three"], 60, 0.1,
             f"the three lines in {out}", worker.log_text)
    assert values(consume(worker.bootstrap, topic, 3)) == ["one", "two", "three"]
    for name in (source, sink):
        worker.ok("DELETE", f"/connectors/{name}", expect=204)


def test_a_forged_task_config_is_checked_where_the_task_opens_its_file(broker: BrokerProcess, tmp_path: Path) -> None:
    """A task config that did not come from the connector's validated config (the connector's says a
    harmless file) names a file in plugin.path: the task fails naming the key, and creates nothing."""
    place = Place(tmp_path)
    config = WorkerConfig.model_validate({"bootstrap.servers": broker.bootstrap, "plugin.path": str(place.plugins)})
    states: list[tuple[State, str | None]] = []
    w = Worker("w", config, PluginRegistry(), MemoryOffsetStore(),
               lambda name, task, state, trace: states.append((state, trace)))
    topic = unique("sandbox-forged")
    props = {"name": "forged", **sink_config(place.allowed / "out.txt", topic)}
    target = place.plugins / "evil.py"
    forged = {"file": str(target), "task.class": f"{FileStreamSinkTask.__module__}.FileStreamSinkTask"}

    async def run() -> None:
        assert await w.start_task(TaskId("forged", 0), props, forged, TargetState.STARTED)
        runner = w.tasks[TaskId("forged", 0)].runner
        assert runner is not None
        await asyncio.wait_for(asyncio.shield(runner), 60)
        await w.stop()

    asyncio.run(run())
    failed = [trace or "" for state, trace in states if state == State.FAILED]
    assert failed and "PathRefused: file: " in failed[0] and "plugin.path folder" in failed[0], states
    assert not target.exists() and list(place.plugins.iterdir()) == []


@pytest.mark.parametrize(("mode", "setting", "named"), [
    ("standalone", "exactly.once.source.support=enabled", "exactly.once.source.support: 'enabled' cannot be used "
                                                          "by a standalone worker"),
    ("standalone", "exactly.once.source.support=preparing", "exactly.once.source.support: 'preparing' cannot be "
                                                            "used by a standalone worker"),
    ("distributed", "exactly.once.source.support=always", "exactly.once.source.support: Value error, String must be "
                                                          "one of (case insensitive): disabled, preparing, enabled"),
    ("standalone", "connector.client.config.override.policy=None", "connector.client.config.override.policy: "
                                                                    "'None' cannot be honoured"),
    ("distributed", "response.http.headers.config=set X-Frame-Options: DENY", "response.http.headers.config: "),
    ("standalone", "connector.allowed.paths=/no/such/folder", "connector.allowed.paths: Value error, '/no/such/folder' "
                                                              "is not an existing directory"),
    ("up", "metric.reporters=com.example.Reporter", "metric.reporters: 'com.example.Reporter' cannot be honoured"),
])
def test_a_key_headwater_cannot_honour_stops_the_worker_at_start_naming_it(tmp_path: Path, mode: str, setting: str,
                                                                           named: str) -> None:
    if mode == "up":
        command = ["up", "--data-dir", str(tmp_path / "data"), "--kafka-listener", "127.0.0.1:0", "--rest-listener",
                   "127.0.0.1:0", "--broker-set", "metrics.listener=", "--set", setting]
        invalid = "headwater up: invalid configuration"
    else:
        properties = SHIPPED_PROPERTIES if mode == "distributed" else REPO / "configs" / "worker-standalone.properties"
        command = ["connect", mode, str(properties), "--set", "bootstrap.servers=127.0.0.1:1", "--set",
                   "listeners=http://127.0.0.1:0", "--set", setting]
        invalid = f"headwater connect {mode}: invalid worker configuration"
    done = subprocess.run([sys.executable, "-m", "headwater", *command], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-3000:]
    assert invalid in done.stderr
    assert named in done.stderr, done.stderr
    assert "REST API at" not in done.stderr + done.stdout
