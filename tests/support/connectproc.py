"""Start and stop a real ``headwater up`` process (broker + standalone worker + REST API) for tests,
plus the small HTTP, polling and Kafka helpers the Connect integration tests share.

Like ``brokerproc.BrokerProcess`` (both are ``brokerproc.LoggedProcess``): the process logs to a
file, and ``start`` waits for the ready line ``Headwater is up: Kafka bootstrap HOST:PORT, Connect
REST API http://HOST:PORT/``, which gives the real ports when port 0 was asked.
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest

from headwater.testing.names import unique
from headwater.testing.rest import Response, send
from headwater.testing.waiting import wait_until

from .brokerproc import LoggedProcess
from .confluent import headers_of, position

__all__ = ["JSON_CONVERTER", "NEVER_MATCHING_FILTER", "ConnectProcess", "Message", "Response", "TopicReader", "consume",
           "create_topic", "end_offset", "end_offsets", "module_connect", "produce", "sink_config", "source_config",
           "unique", "values", "wait_for"]

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"

# Connector settings for a transform that leaves every record as it is (its predicate never matches):
# a connector carrying it takes the per-record path with the same data.
NEVER_MATCHING_FILTER = {
    "transforms": "keep", "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.keep.predicate": "never", "predicates": "never",
    "predicates.never.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.never.pattern": "no-topic-is-called-this",
}

_READY = re.compile(r"Headwater is up: Kafka bootstrap (\S+):(\d+), Connect REST API (https?://\S+?):(\d+)/")

HTTP_TIMEOUT = 30.0  # seconds for any one REST call
T = TypeVar("T")


def module_connect(name: str) -> Any:
    """A module-scoped ``connect`` fixture: one ``headwater up`` process shared by the module's tests."""

    @pytest.fixture(scope="module")
    def connect(tmp_path_factory: pytest.TempPathFactory):
        with ConnectProcess(tmp_path_factory.mktemp(name)) as proc:
            yield proc
            print(f"headwater up log: {proc.log_file}")

    return connect


def source_config(path: Path, topic: str, **extra: str) -> dict[str, str]:
    """A FileStreamSource connector config (plus ``extra`` settings)."""
    return {"connector.class": "FileStreamSourceConnector", "file": str(path), "topic": topic, **extra}


def sink_config(path: Path, topics: str, **extra: str) -> dict[str, str]:
    """A FileStreamSink connector config (plus ``extra`` settings)."""
    return {"connector.class": "FileStreamSinkConnector", "file": str(path), "topics": topics, **extra}


def wait_for(check: Callable[[], T | None], timeout: float = 20.0, interval: float = 0.05, what: str = "condition",
             log: Callable[[], str] | None = None) -> T:
    """Poll ``check()`` until it returns something truthy; return it. A check that raises what
    ``headwater.testing.waiting.NOT_YET`` lists (an assertion, an IndexError or KeyError, a refused
    connection) is not there yet. On timeout, fail naming ``what``, the last value or exception, and
    the tail of ``log()`` when given."""
    return wait_until(check, what, timeout, interval, log=log)


def http(method: str, url: str, body: Any = None, raw: bytes | None = None,
         timeout: float = HTTP_TIMEOUT, headers: dict[str, str] | None = None,
         context: ssl.SSLContext | None = None) -> Response:
    """One HTTP call with the stdlib; 4xx/5xx are returned, not raised. ``body`` is sent as JSON,
    ``raw`` as is; ``headers`` on top of Accept and Content-Type; ``context`` for https."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Accept": "application/json"} | ({"Content-Type": "application/json"} if data is not None else {})
    return send(method, url, data, sent | (headers or {}), timeout, context)


@dataclass
class ConnectProcess(LoggedProcess):
    """A ``headwater up`` subprocess: a broker on ``.bootstrap`` and the Connect REST API on ``.rest``.

    ``data_dir`` holds the broker's logs and ``connect.offsets``; ``plugin_path`` defaults to an empty
    folder beside it (never the repository's ``plugins/``). ``connectors`` are connector JSON files
    created at start. ``restart`` keeps the ports, so clients can go on with the same addresses.
    ``settings`` are worker properties (``--set``); ``headers`` (credentials) and ``ssl_context`` (trust for
    an https listener) go with every call.
    """

    name = "headwater up"  # not a field: no annotation

    base: Path
    connectors: list[Path] = field(default_factory=list)
    plugin_path: Path | None = None
    log_file: Path | None = None
    prefix: list[str] = field(default_factory=list)  # runs the command under this (e.g. setpriv ...)
    settings: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    ssl_context: ssl.SSLContext | None = None
    kafka_port: int = 0
    rest_port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    bootstrap: str = ""
    rest: str = ""
    _log_start: int = 0

    def __post_init__(self) -> None:
        self.base = Path(self.base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.base / "data"
        if self.plugin_path is None:
            self.plugin_path = self.base / "plugins"
        self.plugin_path.mkdir(parents=True, exist_ok=True)
        if self.log_file is None:
            self.log_file = self.base / "headwater-up.log"

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, timeout: float = 60, wait_healthy: bool = True) -> ConnectProcess:
        """Start and wait for the ready line, then (``wait_healthy``) for ``GET /health`` to answer 200."""
        args = [*self.prefix, sys.executable, "-m", "headwater", "up", "--data-dir", str(self.data_dir),
                "--kafka-listener", f"127.0.0.1:{self.kafka_port}", "--rest-listener", f"127.0.0.1:{self.rest_port}",
                "--plugin-path", str(self.plugin_path),
                *(arg for k, v in self.settings.items() for arg in ("--set", f"{k}={v}")),
                *map(str, self.connectors)]
        self._spawn(args, cwd=self.base)
        deadline = time.monotonic() + timeout
        m = self._wait_ready(_READY, timeout)
        self.kafka_port, self.rest_port = int(m.group(2)), int(m.group(4))
        self.bootstrap = f"{m.group(1)}:{self.kafka_port}"
        self.rest = f"{m.group(3)}:{self.rest_port}"
        if wait_healthy:
            # Kafka Connect's readiness probe: 200 once the worker can serve requests
            wait_for(lambda: self.get("/health").status == 200, max(deadline - time.monotonic(), 1), 0.05,
                     "GET /health to answer 200", lambda: self.log_text(True))
        return self

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM and wait: a clean shutdown (tasks stop, source offsets are committed)."""
        return 0 if self.proc is None else super().stop(timeout)

    # -- REST ------------------------------------------------------------------------------------

    def url(self, path: str, **params: Any) -> str:
        query = urllib.parse.urlencode(
            [(k, v) for k, vs in params.items() for v in (vs if isinstance(vs, list | tuple) else [vs])])
        return self.rest + path + (f"?{query}" if query else "")

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None, **params: Any) -> Response:
        return http(method, self.url(path, **params), body=body, raw=raw, headers=self.headers,
                    context=self.ssl_context)

    def get(self, path: str, **params: Any) -> Response:
        return self.call("GET", path, **params)

    def ok(self, method: str, path: str, body: Any = None, expect: int | Iterable[int] = (200, 201, 202, 204),
           **params: Any) -> Any:
        """A call that must answer ``expect``; returns the JSON body (None when empty)."""
        resp = self.call(method, path, body=body, **params)
        wanted = {expect} if isinstance(expect, int) else set(expect)
        assert resp.status in wanted, f"{method} {path} -> {resp.status} {resp.body[:2000]!r}"
        return resp.json

    def create(self, name: str, config: dict[str, Any], **body: Any) -> dict[str, Any]:
        return self.ok("POST", "/connectors", {"name": name, "config": config, **body}, expect=201)

    def status(self, name: str) -> dict[str, Any]:
        return self.ok("GET", f"/connectors/{name}/status", expect=200)

    def wait_state(self, name: str, state: str = "RUNNING", tasks: int | None = None,
                   task_state: str | None = None, timeout: float = 20) -> dict[str, Any]:
        """Poll the status until the connector is in ``state`` and (when given) it has ``tasks`` tasks,
        all in ``task_state`` (default: ``state``)."""
        want_task = task_state or state

        def check() -> dict[str, Any] | None:
            st = self.status(name)
            if st["connector"]["state"] != state:
                return None
            if tasks is not None and len(st["tasks"]) != tasks:
                return None
            if any(t["state"] != want_task for t in st["tasks"]):
                return None
            return st

        return wait_for(check, timeout, 0.05, f"{name} to be {state} with {tasks} tasks {want_task}", self.log_text)

    def connector_names(self) -> list[str]:
        return self.ok("GET", "/connectors", expect=200)


def scrape_metrics(rest_url: str) -> tuple[str, dict[str, float]]:
    """A worker's ``GET /metrics``: its content type, and each sample (``name{labels}`` as written, the
    labels in prometheus-client's sorted order) with its value."""
    with urllib.request.urlopen(rest_url.rstrip("/") + "/metrics", timeout=10) as resp:
        kind = resp.headers["Content-Type"]
        text = resp.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return kind, samples


# -- Kafka helpers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Message:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int = -1


class TopicReader:
    """Reads partition 0 of a topic from the beginning with one confluent-kafka consumer kept open, so a
    test can wait for more records without re-reading (and time their arrival)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self.topic = topic
        self.messages: list[Message] = []
        self.at_eof = False
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("test-reader"),
                                  "enable.auto.commit": False, "enable.partition.eof": True,
                                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500,
                                  "fetch.wait.max.ms": 50})
        self.consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

    def poll(self, timeout: float = 0.1) -> int:
        """Read what is there now; returns how many records arrived."""
        from confluent_kafka import KafkaError

        before = len(self.messages)
        for m in self.consumer.consume(10000, timeout=timeout):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.at_eof = True
                continue  # e.g. an unknown topic while it is being auto-created
            self.at_eof = False
            self.messages.append(Message(position(m)[1], m.key(), m.value(), headers_of(m), m.timestamp()[1]))
        return len(self.messages) - before

    def read(self, count: int | None = None, timeout: float = 30.0, settle: float = 0.0) -> list[Message]:
        """Read until at least ``count`` records in all (without: until the end), or ``timeout``; then
        ``settle`` seconds more to catch unexpected extra records. Returns every record read so far."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            if (len(self.messages) >= count) if count is not None else self.at_eof:
                break
        settle_until = time.monotonic() + settle
        while time.monotonic() < settle_until:
            self.poll()
        return self.messages

    def values(self) -> list[str]:
        return values(self.messages)

    def close(self) -> None:
        self.consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def consume(bootstrap: str, topic: str, count: int | None = None, timeout: float = 30.0,
            settle: float = 0.0) -> list[Message]:
    """All records of partition 0 of ``topic`` from the beginning (confluent-kafka, manual assignment).

    With ``count``, read until at least that many arrived (or ``timeout``); without it, read to the
    current end. ``settle`` then keeps reading that long more to catch unexpected extra records.
    """
    with TopicReader(bootstrap, topic) as reader:
        return list(reader.read(count, timeout, settle))


def end_offset(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """The high watermark of partition 0 (0 when the topic does not exist yet)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("test-watermark")})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=timeout)[1]
    except KafkaException:
        return 0
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int, timeout: float = 10.0) -> list[int]:
    """The high watermark of each of the topic's first ``partitions`` partitions."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("test-watermark")})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    """Create a topic (replication factor 1) with confluent-kafka's admin client and wait for it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def values(messages: Iterable[Message]) -> list[str]:
    return [(m.value or b"").decode() for m in messages]


def produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
            timeout: float = 30.0) -> int:
    """Send ``(key, value, headers)`` records to partition 0 of ``topic`` with aiokafka, in order, and
    wait for every ack; returns how many were sent."""
    from aiokafka import AIOKafkaProducer

    items = list(records)

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, key=k, headers=h or None, partition=0)
                       for k, v, h in items]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(go(), timeout))
    return len(items)
