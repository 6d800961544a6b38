"""A standalone worker (``headwater connect standalone``) against the test session's broker: connectors
from a file and from the REST API run, pause, resume, restart, stop and are deleted, each write answered
once the herder's loop has applied it; SIGTERM stops the worker cleanly."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from support.brokerproc import BrokerProcess, LoggedProcess
from support.connectproc import consume, http, produce, sink_config, source_config, unique, wait_for
from support.workerproc import REPO

_READY = re.compile(r"Headwater Connect worker \(standalone\) REST API at (http://\S+?)/?\s")


class StandaloneProcess(LoggedProcess):
    name = "headwater connect standalone"

    def __init__(self, base: Path, bootstrap: str, connectors: list[Path]) -> None:
        self.base, self.bootstrap, self.connectors = base, bootstrap, connectors
        self.log_file = base / "standalone.log"
        self.rest = ""

    def start(self, timeout: float = 60) -> StandaloneProcess:
        plugins = self.base / "plugins"  # a folder of its own: connectors never write into plugin.path
        plugins.mkdir(exist_ok=True)
        self._spawn([sys.executable, "-m", "headwater", "connect", "standalone",
                     str(REPO / "configs" / "worker-standalone.properties"), *map(str, self.connectors),
                     "--set", f"bootstrap.servers={self.bootstrap}", "--set", "listeners=http://127.0.0.1:0",
                     "--set", f"offset.storage.file.filename={self.base / 'connect.offsets'}",
                     "--set", "offset.flush.interval.ms=500", "--set", f"plugin.path={plugins}"], cwd=self.base)
        self.rest = self._wait_ready(_READY, timeout).group(1)
        return self

    def call(self, method: str, path: str, body: Any = None, expect: int | None = None) -> Any:
        resp = http(method, self.rest + path, body)
        if expect is not None:
            assert resp.status == expect, f"{method} {path} -> {resp.status} {resp.body[:2000]!r}"
        return resp.json

    def states(self, name: str) -> tuple[str, list[str]] | None:
        """The connector's state and its tasks' (None while it has no status)."""
        resp = http("GET", f"{self.rest}/connectors/{name}/status")
        if resp.status != 200:
            return None
        return resp.json["connector"]["state"], [t["state"] for t in resp.json["tasks"]]

    def wait_states(self, name: str, connector: str, tasks: list[str]) -> None:
        wait_for(lambda: self.states(name) == (connector, tasks), 30, 0.05,
                 f"{name} {connector} with tasks {tasks}", lambda: self.log_text(True))


def test_standalone_worker_runs_connectors_from_file_and_rest(broker: BrokerProcess, tmp_path: Path) -> None:
    topic, source, sink = unique("standalone-t"), unique("standalone-source"), unique("standalone-sink")
    source_file, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("one\ntwo\n")
    connector_file = tmp_path / "source.json"
    connector_file.write_text(json.dumps({"name": source, "config": source_config(source_file, topic)}))

    worker = StandaloneProcess(tmp_path, broker.bootstrap, [connector_file]).start()
    try:
        worker.wait_states(source, "RUNNING", ["RUNNING"])
        wait_for(lambda: [m.value for m in consume(broker.bootstrap, topic)] == [b"one", b"two"], 30,
                 what="the file's lines in the topic", log=lambda: worker.log_text(True))

        created = worker.call("POST", "/connectors", {"name": sink, "config": sink_config(out, topic)}, expect=201)
        assert created["name"] == sink
        assert worker.call("POST", "/connectors", {"name": sink, "config": sink_config(out, topic)},
                           expect=409)["message"] == f"Connector {sink} already exists"
        worker.wait_states(sink, "RUNNING", ["RUNNING"])
        wait_for(lambda: out.exists() and out.read_text() == "one\ntwo\n", 30, what="the lines in the sink's file",
                 log=lambda: worker.log_text(True))

        worker.call("PUT", f"/connectors/{sink}/pause", expect=202)
        worker.wait_states(sink, "PAUSED", ["PAUSED"])
        worker.call("PUT", f"/connectors/{sink}/resume", expect=202)
        worker.wait_states(sink, "RUNNING", ["RUNNING"])
        restarted = worker.call("POST", f"/connectors/{sink}/restart?includeTasks=true", expect=202)
        assert [restarted["connector"]["state"], *(t["state"] for t in restarted["tasks"])] == ["RESTARTING"] * 2
        worker.wait_states(sink, "RUNNING", ["RUNNING"])

        produce(broker.bootstrap, topic, [(None, b"three", [])])
        wait_for(lambda: out.read_text() == "one\ntwo\nthree\n", 30, what="a record produced after the restart",
                 log=lambda: worker.log_text(True))

        worker.call("PUT", f"/connectors/{sink}/stop", expect=204)
        worker.wait_states(sink, "STOPPED", [])
        worker.call("DELETE", f"/connectors/{sink}", expect=204)
        assert worker.call("GET", "/connectors", expect=200) == [source]
        assert worker.states(sink) is None
        # the deleted connector's last statuses (its stop) leave nothing behind in the worker's figures
        metrics = http("GET", f"{worker.rest}/metrics").body.decode()
        assert sink not in metrics, [line for line in metrics.splitlines() if sink in line]
    finally:
        code = worker.stop()
    assert code == 0, worker.log_text(True)[-3000:]
