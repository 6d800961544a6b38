"""Distributed Connect workers as real subprocesses, for the integration tests and benchmarks.

``WorkerProcess`` runs ``python -m headwater connect distributed <props> --set ...``,
logs to a file and waits for the ready line ``Headwater Connect worker (distributed, group G) REST
API at http://HOST:PORT/`` (with ``listeners=http://127.0.0.1:0`` the worker picks a free port and
prints it). ``Cluster`` starts several workers sharing one group and its internal topics, and reads
statuses, the leader and task placement across them.

Settings: ``fast_settings`` gives short group timeouts (session 3 s, heartbeat 0.5 s, lost work
reassigned after 1 s) and unique internal topic names; the broker must then allow the short
session timeout (``BROKER_OVERRIDES``).
"""

from __future__ import annotations

import re
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .brokerproc import LoggedProcess
from .confluent import position
from .connectproc import Response, http, unique, wait_for

__all__ = ["BROKER_OVERRIDES", "REPO", "Join", "SHIPPED_PROPERTIES", "Cluster", "WorkerProcess", "cluster_settings",
           "leader_ids", "placement", "tasks_per_worker", "fast_settings"]

REPO = Path(__file__).resolve().parents[2]
SHIPPED_PROPERTIES = REPO / "configs" / "worker-distributed.properties"
PLUGINS = REPO / "plugins"

# A broker for workers with short session timeouts: no initial join delay, sessions down to 1 s.
BROKER_OVERRIDES = ("group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000")

_READY = re.compile(r"Headwater Connect worker \(distributed, group (\S+)\) REST API at (https?://[^\s/]+?):(\d+)/")
# membership.py: "joined group G generation N as MEMBER (leader LEADER): ..."; member ids are
# "connect-<worker id>-<uuid>" (client id "connect-<worker id>", and the broker appends a uuid).
_JOINED = re.compile(r"joined group (\S+) generation (\d+) as connect-(\S+?)-[0-9a-f-]{36} "
                     r"\(leader connect-(\S+?)-[0-9a-f-]{36}\): (\d+) connectors, (\d+) tasks, (\d+) revoked")

HTTP_TIMEOUT = 30.0


def cluster_settings(tag: str) -> dict[str, str]:
    """A group and internal topics of this cluster's own: ``<tag>`` names them."""
    return {"group.id": f"{tag}-group", "config.storage.topic": f"{tag}-configs",
            "offset.storage.topic": f"{tag}-offsets", "status.storage.topic": f"{tag}-status"}


def fast_settings(tag: str) -> dict[str, str]:
    """Settings for fast tests: short heartbeats and sessions, lost work reassigned after 1 s, offsets
    flushed every second, fewer internal partitions, strings for keys and values."""
    return {
        **cluster_settings(tag),
        "heartbeat.interval.ms": "500",
        "session.timeout.ms": "3000",
        "rebalance.timeout.ms": "10000",
        "scheduled.rebalance.max.delay.ms": "1000",
        "offset.flush.interval.ms": "1000",
        "offset.storage.partitions": "5",
        "status.storage.partitions": "2",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "task.shutdown.graceful.timeout.ms": "3000",
    }


@dataclass(frozen=True)
class Join:
    """One "joined group" log line: the generation, who joined, its leader and what it was given."""

    generation: int
    worker_id: str
    leader_id: str
    connectors: int
    tasks: int
    revoked: int


@dataclass
class WorkerProcess(LoggedProcess):
    """One ``headwater connect distributed`` worker subprocess.

    ``settings`` are passed as ``--set key=value`` on top of ``properties`` (default: the shipped
    configs/worker-distributed.properties); ``bootstrap.servers``, ``listeners`` (port 0) and
    ``plugin.path`` (the repository's plugins/) are always set.
    """

    bootstrap: str
    settings: dict[str, str]
    log_file: Path
    properties: Path = SHIPPED_PROPERTIES
    name: str = "worker"
    proc: subprocess.Popen[bytes] | None = None
    rest: str = ""
    port: int = 0
    _log_start: int = 0
    _terminated: bool = False
    started_at: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)  # with every REST call (credentials)
    ssl_context: ssl.SSLContext | None = None  # trust for an https listener

    # -- lifecycle ---------------------------------------------------------------------------------

    def args(self) -> list[str]:
        settings = {"bootstrap.servers": self.bootstrap, "listeners": "http://127.0.0.1:0",
                    "plugin.path": str(PLUGINS), **self.settings}
        args = [sys.executable, "-m", "headwater", "connect", "distributed", str(self.properties)]
        for k, v in settings.items():
            args += ["--set", f"{k}={v}"]
        return args

    def launch(self) -> WorkerProcess:
        """Start the process without waiting for it to be ready (see ``wait_ready``)."""
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        self.rest, self.port = "", 0
        self.started_at = time.monotonic()
        self._spawn(self.args(), cwd=REPO)
        return self

    def wait_ready(self, timeout: float = 60) -> WorkerProcess:
        m = self._wait_ready(_READY, timeout)
        self.port = int(m.group(3))
        self.rest = f"{m.group(2)}:{self.port}"
        return self

    def start(self, timeout: float = 60) -> WorkerProcess:
        return self.launch().wait_ready(timeout)

    @property
    def worker_id(self) -> str:
        """``127.0.0.1:PORT``, as statuses name it."""
        assert self.port, f"{self.name} is not started"
        return f"127.0.0.1:{self.port}"

    def joins(self) -> list[Join]:
        """Every group join of this run, from the log."""
        return [Join(int(m.group(2)), m.group(3), m.group(4), int(m.group(5)), int(m.group(6)), int(m.group(7)))
                for m in _JOINED.finditer(self.log_text(True))]

    def __repr__(self) -> str:
        return f"WorkerProcess({self.name}, {self.rest or 'not started'})"

    # -- REST ----------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, timeout: float = HTTP_TIMEOUT) -> Response:
        return http(method, self.rest + path, body=body, timeout=timeout, headers=self.headers,
                    context=self.ssl_context)

    def ok(self, method: str, path: str, body: Any = None, expect: int | Iterable[int] = (200, 201, 202, 204)) -> Any:
        resp = self.call(method, path, body)
        wanted = {expect} if isinstance(expect, int) else set(expect)
        assert resp.status in wanted, f"{self.name}: {method} {path} -> {resp.status} {resp.body[:2000]!r}"
        return resp.json

    def status(self, connector: str) -> dict[str, Any] | None:
        """The connector's status as this worker sees it (None: unknown here, or the call failed)."""
        try:
            resp = self.call("GET", f"/connectors/{connector}/status", timeout=5)
        except OSError:
            return None
        return resp.json if resp.status == 200 else None


def placement(status: dict[str, Any] | None) -> dict[int, tuple[str, str]]:
    """task id -> (state, worker_id) of a status answer."""
    return {t["id"]: (t["state"], t["worker_id"]) for t in (status or {}).get("tasks", [])}


def leader_ids(workers: Iterable[WorkerProcess]) -> set[str]:
    """The leader each live worker last joined under (one element when they agree)."""
    out = set()
    for w in workers:
        joins = w.joins()
        if w.running and joins:
            out.add(joins[-1].leader_id)
    return out


@dataclass
class Cluster:
    """Workers of one group (``tag`` names the group and its internal topics)."""

    base: Path
    bootstrap: str
    tag: str = field(default_factory=lambda: unique("dist"))
    settings: dict[str, str] | None = None  # default: fast_settings(tag)
    properties: Path = SHIPPED_PROPERTIES
    workers: list[WorkerProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.base = Path(self.base)
        if self.settings is None:
            self.settings = fast_settings(self.tag)

    def new_worker(self, **extra: str) -> WorkerProcess:
        assert self.settings is not None
        n = len(self.workers)
        w = WorkerProcess(self.bootstrap, {**self.settings, **extra}, self.base / f"worker{n}.log",
                          self.properties, name=f"worker{n}")
        self.workers.append(w)
        return w

    def start(self, count: int, timeout: float = 60, **extra: str) -> list[WorkerProcess]:
        """Start ``count`` more workers together; returns them once each printed its ready line."""
        new = [self.new_worker(**extra).launch() for _ in range(count)]
        for w in new:
            w.wait_ready(timeout)
        return new

    @property
    def live(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.running and w.rest]

    def by_id(self, worker_id: str) -> WorkerProcess:
        for w in self.workers:
            if w.port and w.worker_id == worker_id:
                return w
        raise KeyError(worker_id)

    def leader(self, timeout: float = 30) -> WorkerProcess:
        """The live worker that every live worker last joined under."""

        def check() -> WorkerProcess | None:
            ids = leader_ids(self.live)
            if len(ids) != 1:
                return None
            (lid,) = ids
            try:
                w = self.by_id(lid)
            except KeyError:
                return None
            return w if w.running else None

        return wait_for(check, timeout, 0.1, "one leader agreed on by every live worker", self.logs)

    def followers(self) -> list[WorkerProcess]:
        lead = self.leader()
        return [w for w in self.live if w is not lead]

    def status(self, connector: str) -> dict[str, Any] | None:
        """The status as seen by the first live worker that answers."""
        for w in self.live:
            st = w.status(connector)
            if st is not None:
                return st
        return None

    def wait_running(self, connector: str, tasks: int, timeout: float = 30,
                     check: Callable[[dict[str, Any]], bool] | None = None,
                     on: Iterable[WorkerProcess] | None = None) -> dict[str, Any]:
        """Poll until the connector and its ``tasks`` tasks are RUNNING on live workers (``on``: only
        those), every live worker reports the same placement, and ``check(status)`` holds."""

        def ready() -> dict[str, Any] | None:
            allowed = {w.worker_id for w in (on if on is not None else self.live)}
            seen = []
            for w in self.live:
                st = w.status(connector)
                if st is None:
                    return None
                seen.append(st)
            if not seen:
                return None
            st = seen[0]
            if st["connector"]["state"] != "RUNNING" or st["connector"]["worker_id"] not in allowed:
                return None
            if len(st["tasks"]) != tasks:
                return None
            if any(t["state"] != "RUNNING" or t["worker_id"] not in allowed for t in st["tasks"]):
                return None
            if any(placement(s) != placement(st) or s["connector"] != st["connector"] for s in seen[1:]):
                return None
            if check is not None and not check(st):
                return None
            return st

        return wait_for(ready, timeout, 0.1, f"{connector} RUNNING with {tasks} tasks on live workers", self.logs)

    def logs(self, tail: int = 3000) -> str:
        return "\n".join(f"--- {w.name} ({w.rest}) ---\n{w.log_text()[-tail:]}" for w in self.workers)

    def stop_all(self) -> None:
        for w in self.workers:
            if w.running:
                w.terminate()
        for w in self.workers:
            if w.running:
                try:
                    w.stop(20)
                except AssertionError:
                    pass

    def close(self) -> None:
        """Stop every worker still running (SIGTERM, then SIGKILL)."""
        self.stop_all()
        for w in self.workers:
            w.kill()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tasks_per_worker(status: dict[str, Any] | None) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in (status or {}).get("tasks", []):
        counts[t["worker_id"]] = counts.get(t["worker_id"], 0) + 1
    return counts


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every record of every partition of ``topic``, from the start to
    the high watermarks of the moment of the call (confluent-kafka, manual assignment)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("test-read"), "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        pending = {p for p, end in ends.items() if end > 0}
        if not pending:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        out: list[tuple[int, int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for m in consumer.consume(10000, timeout=0.2):
                if m.error() is not None:
                    continue
                partition, offset = position(m)
                out.append((partition, offset, m.key(), m.value()))
                if offset + 1 >= ends[partition]:
                    pending.discard(partition)
        assert not pending, f"could not read {topic} to its end within {timeout}s"
        return out
    finally:
        consumer.close()
