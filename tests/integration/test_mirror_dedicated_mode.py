"""MirrorMaker's dedicated mode end to end: ``headwater mirror mm2.properties`` processes between two real
brokers (A and B), and ``headwater mirror translate-offsets`` reading checkpoints on B.

Two processes run the same file: they join the same groups (``mm2-A-B`` for the flow, ``mm2-B-A`` for
the heartbeats-only flow into A) and so share the connectors and tasks; killing one leaves the other
carrying all of them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.brokerproc import BrokerProcess, LoggedProcess
from support.connectproc import unique, wait_for
from support.mirrorkit import Rec, create, produce_keyed, read_all, topics
from support.workerproc import BROKER_OVERRIDES, REPO

from headwater.kafka.mirror import Checkpoint, Heartbeat

pytestmark = pytest.mark.timeout(240)

_READY = re.compile(r"Headwater MirrorMaker running \d+ flows")
_WORKER = re.compile(r"flow (\S+?)(?: \(heartbeats only\))?: worker (\S+) joined group")

# Short intervals and group timeouts (as workerproc.fast_settings), for the flows and their workers.
FAST = {
    "tasks.max": "4",
    "refresh.topics.interval.seconds": "2",
    "refresh.groups.interval.seconds": "2",
    "emit.checkpoints.interval.seconds": "1",
    "sync.group.offsets.interval.seconds": "1",
    "emit.heartbeats.interval.seconds": "1",
    "offset.flush.interval.ms": "1000",
    "heartbeat.interval.ms": "500",
    "session.timeout.ms": "3000",
    "rebalance.timeout.ms": "5000",  # how long a rebalance waits for a member killed during it
    "scheduled.rebalance.max.delay.ms": "1000",
    "offset.storage.partitions": "5",
    "status.storage.partitions": "2",
    "task.shutdown.graceful.timeout.ms": "3000",
}


class MirrorProcess(LoggedProcess):
    """One ``headwater mirror <file>`` subprocess, ready once every flow's worker has joined its group."""

    def __init__(self, properties: Path, log_file: Path, name: str = "mirror") -> None:
        self.properties = properties
        self.log_file = log_file
        self.name = name
        self.proc = None

    def launch(self) -> MirrorProcess:
        self._spawn([sys.executable, "-m", "headwater", "mirror", str(self.properties)], cwd=REPO)
        return self

    def wait_ready(self, timeout: float = 60) -> MirrorProcess:
        self._wait_ready(_READY, timeout)
        return self

    def start(self, timeout: float = 60) -> MirrorProcess:
        return self.launch().wait_ready(timeout)

    def worker_id(self, flow: str) -> str:
        """The worker id (host:port) of this process's worker for ``flow``."""
        for m in _WORKER.finditer(self.log_text(True)):
            if m.group(1) == flow:
                return m.group(2)
        raise AssertionError(f"{self.name} has no worker for {flow}:\n{self.log_text(True)[-3000:]}")


def write_properties(path: Path, a: BrokerProcess, b: BrokerProcess, **extra: str) -> Path:
    lines = ["clusters = A, B", f"A.bootstrap.servers = {a.bootstrap}", f"B.bootstrap.servers = {b.bootstrap}",
             *(f"{k} = {v}" for k, v in extra.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def statuses(bootstrap: str, topic: str) -> dict[str, dict[str, Any]]:
    """The newest status of each connector and task in a Connect status topic, by its key."""
    latest: dict[str, tuple[int, int, dict[str, Any]]] = {}
    for r in read_all(bootstrap, topic):
        if r.key is None:
            continue
        value = json.loads(r.value) if r.value else {}
        latest[r.key.decode()] = (r.partition, r.offset, value)
    return {k: v for k, (_, _, v) in latest.items() if v}


def running_on(bootstrap: str, topic: str) -> dict[str, set[str]]:
    """worker id -> the connectors and tasks RUNNING there, per a status topic."""
    out: dict[str, set[str]] = {}
    for key, value in statuses(bootstrap, topic).items():
        if value.get("state") == "RUNNING":
            out.setdefault(value["worker_id"], set()).add(key)
    return out


def contents(records: list[Rec]) -> set[tuple[Any, ...]]:
    return {(r.partition, r.key, r.value, r.headers, r.timestamp) for r in records}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("mm2-brokers")
    with BrokerProcess(base / "a", *BROKER_OVERRIDES) as a, BrokerProcess(base / "b", *BROKER_OVERRIDES) as b:
        yield a, b


def test_two_processes_share_the_flows_and_survive_a_kill(brokers: tuple[BrokerProcess, BrokerProcess],
                                                          tmp_path: Path) -> None:
    a, b = brokers
    topic = unique("orders")
    create(a.bootstrap, topic, 4)
    produce_keyed(a.bootstrap, topic, 2000)
    props = write_properties(tmp_path / "mm2.properties", a, b, **{"A->B.enabled": "true",
                                                                   "A->B.topics": f"{topic}, heartbeats"}, **FAST)
    first = MirrorProcess(props, tmp_path / "mirror1.log", "mirror1")
    second = MirrorProcess(props, tmp_path / "mirror2.log", "mirror2")
    third = MirrorProcess(props, tmp_path / "mirror3.log", "mirror3")
    try:
        for proc in (first.launch(), second.launch()):
            proc.wait_ready()

        def logs() -> str:
            return "\n".join(f"--- {p.name} ---\n{p.log_text(True)[-4000:]}" for p in (first, second, third))

        remote = f"A.{topic}"
        wait_for(lambda: remote in topics(b.bootstrap), 30, 0.5, f"{remote} on B", logs)
        source = read_all(a.bootstrap, topic, 2000)
        # Every record, in its partition, as it was; the second process joining moves tasks over, and a moved
        # task may copy again what its offsets did not yet cover (at least once), so duplicates are allowed.
        wait_for(lambda: contents(read_all(b.bootstrap, remote, 2000, timeout=5, settle=0.5)) == contents(source),
                 60, 0.5, f"every record in {remote}", logs)
        assert topics(b.bootstrap)[remote] == 4
        on_b = topics(b.bootstrap)
        for internal in ("mm2-configs.A.internal", "mm2-offsets.A.internal", "mm2-status.A.internal"):
            assert internal in on_b
        # the heartbeats-only flow B->A keeps its own worker state on A
        assert {"mm2-configs.B.internal", "mm2-status.B.internal"} <= set(topics(a.bootstrap))

        # Both processes are members of the flow's group, and its work is spread over them.
        ids = {p.name: p.worker_id("A->B") for p in (first, second)}
        assert all("joined group mm2-A-B" in p.log_text(True) for p in (first, second))
        wait_for(lambda: set(ids.values()) <= set(running_on(b.bootstrap, "mm2-status.A.internal")), 30, 0.5,
                 "connectors and tasks RUNNING in both processes", logs)
        spread = running_on(b.bootstrap, "mm2-status.A.internal")
        assert sum(len(v) for v in spread.values()) >= 5  # 3 connectors, 4 source tasks, the heartbeat task

        # A's heartbeats (from the heartbeats-only flow B->A) reach B as A.heartbeats.
        wait_for(lambda: "A.heartbeats" in topics(b.bootstrap), 30, 0.5, "A.heartbeats on B", logs)
        beats = [Heartbeat.decode(r.key, r.value) for r in read_all(b.bootstrap, "A.heartbeats", 1, timeout=15)
                 if r.key and r.value]
        assert beats and {(h.source_cluster_alias, h.target_cluster_alias) for h in beats} == {("B", "A")}
        own = [Heartbeat.decode(r.key, r.value) for r in read_all(b.bootstrap, "heartbeats", 1, timeout=15)
               if r.key and r.value]
        assert own and {(h.source_cluster_alias, h.target_cluster_alias) for h in own} == {("A", "B")}

        # SIGKILL one process: the other takes its connectors and tasks over and keeps mirroring.
        time.sleep(1.5)  # one offset flush, so that little is copied twice after the kill
        first.kill()
        produce_keyed(a.bootstrap, topic, 1000, start=2000)
        survivor = ids["mirror2"]
        wait_for(lambda: set(running_on(b.bootstrap, "mm2-status.A.internal")) == {survivor}, 30, 0.5,
                 "every connector and task RUNNING in the surviving process", logs)
        source = read_all(a.bootstrap, topic, 3000)
        wait_for(lambda: contents(source) <= contents(read_all(b.bootstrap, remote, 3000, timeout=5)), 30, 0.5,
                 "every record, old and new, on B", logs)
        assert second.running
        assert second.stop(30) == 0  # SIGTERM: a clean stop

        # Started again alone (so the leader), a process finds the stored configs equal to the file's and
        # leaves them, and the connectors, as they are.
        third.start()
        wait_for(lambda: "flow A->B: connectors" in third.log_text(True), 15, 0.2, "the configs checked", logs)
        assert "in place" in third.log_text(True)
        assert not re.search(r"flow \S+: (created|updated) ", third.log_text(True))
        assert third.stop(30) == 0
    finally:
        for proc in (first, second, third):
            proc.kill()


def test_invalid_files_exit_2_naming_the_key_and_create_nothing(brokers: tuple[BrokerProcess, BrokerProcess],
                                                                tmp_path: Path) -> None:
    a, b = brokers
    before = set(topics(b.bootstrap)), set(topics(a.bootstrap))
    cases = {
        "A->C.enabled": {"A->C.enabled": "true"},  # C is not in clusters
        "B->B.enabled": {"A->B.enabled": "true", "B->B.enabled": "true"},  # a flow into itself
        "A->B.topics": {"A->B.enabled": "true", "A->B.topics": "orders["},  # a connector setting
        "offset.flush.interval.ms": {"A->B.enabled": "true", "offset.flush.interval.ms": "soon"},  # a worker one
    }
    for key, settings in cases.items():
        path = write_properties(tmp_path / "bad.properties", a, b, **settings)
        result = subprocess.run([sys.executable, "-m", "headwater", "mirror", str(path)], capture_output=True,
                                text=True, timeout=60, cwd=REPO)
        assert result.returncode == 2, (key, result.stderr)
        assert result.stderr.startswith("headwater mirror: invalid configuration: "), result.stderr
        assert key in result.stderr, (key, result.stderr)
    assert (set(topics(b.bootstrap)), set(topics(a.bootstrap))) == before


def test_translate_offsets_prints_the_checkpointed_offsets(brokers: tuple[BrokerProcess, BrokerProcess],
                                                           tmp_path: Path) -> None:
    from confluent_kafka import Producer

    _, b = brokers
    source, group = "C", unique("app")  # a source alias of its own: its checkpoints topic is this test's
    create(b.bootstrap, f"{source}.checkpoints.internal", 1, **{"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": b.bootstrap})
    for cp in (Checkpoint(group, "C.orders", 0, 10, 9), Checkpoint(group, "C.orders", 1, 20, 18),
               Checkpoint(group, "C.orders", 0, 15, 14),  # newer: wins for partition 0
               Checkpoint("someone-else", "C.orders", 0, 99, 98)):
        producer.produce(f"{source}.checkpoints.internal", key=cp.key(), value=cp.value())
    assert producer.flush(30) == 0
    props = tmp_path / "mm2.properties"
    props.write_text(f"clusters = C, B\nC.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = {b.bootstrap}\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "headwater", "mirror", "translate-offsets", *args],
                              capture_output=True, text=True, timeout=60, cwd=REPO)

    table = cli("--cluster", "B", "--source", source, "--group", group, "--bootstrap-server", b.bootstrap)
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()]
    assert rows == [["TOPIC", "PARTITION", "OFFSET"], ["C.orders", "0", "14"], ["C.orders", "1", "18"]]

    as_json = cli("--cluster", "B", "--source", source, "--group", group, "--config", str(props), "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == [{"topic": "C.orders", "partition": 0, "offset": 14},
                                          {"topic": "C.orders", "partition": 1, "offset": 18}]

    none = cli("--cluster", "B", "--source", source, "--group", unique("nobody"), "--config", str(props))
    assert none.returncode == 1 and "no checkpoints" in none.stderr and not none.stdout

    unknown = cli("--cluster", "D", "--source", source, "--group", group, "--config", str(props))
    assert unknown.returncode == 2 and "clusters" in unknown.stderr


def test_exactly_once_flow_survives_a_kill(brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path) -> None:
    """Dedicated mode with KIP-618: ``B.exactly.once.source.support = enabled`` (Kafka's documented form) gives
    the flow's worker exactly-once source support, and with a read_committed source consumer the flow copies
    each committed record of A once, none of an aborted transaction, through a SIGKILL of the process mid-copy."""
    from support.eoskit import copies, end_offsets, read_isolated
    from support.txnmix import write_interleaved

    from headwater.connect.runtime.exactly_once import transactional_id

    a, b = brokers
    topic = unique("eos-orders")
    create(a.bootstrap, topic, 4)
    mix = write_interleaved(a.bootstrap, topic, rounds=2)
    produce_keyed(a.bootstrap, topic, 60_000)
    props = write_properties(tmp_path / "mm2.properties", a, b, **{
        "A->B.enabled": "true", "A->B.topics": topic, "B.exactly.once.source.support": "enabled",
        "A->B.source.consumer.isolation.level": "read_committed",
        "A->B.source.consumer.max.partition.fetch.bytes": "32768"}, **FAST)
    first = MirrorProcess(props, tmp_path / "mirror1.log", "mirror1")
    second = MirrorProcess(props, tmp_path / "mirror2.log", "mirror2")
    remote = f"A.{topic}"
    try:
        first.start()

        def logs() -> str:
            return "\n".join(f"--- {p.name} ---\n{p.log_text(True)[-4000:]}" for p in (first, second))

        wait_for(lambda: end_offsets(b.bootstrap, remote) >= 5000, 60, 0.1, "the flow copying", logs)
        first.kill()
        second.start()
        source = read_isolated(a.bootstrap, topic, "read_committed")
        assert len(source) == 60_000 + len(mix.committed) + 1
        wait_for(lambda: len(read_isolated(b.bootstrap, remote, "read_committed")) >= len(source), 90, 1.0,
                 f"{len(source)} records on B", logs)
        time.sleep(2.0)  # anything copied again would show now
        target = read_isolated(b.bootstrap, remote, "read_committed")
        # the flow's source tasks wrote with Kafka's transactional ids, <group>-<connector>-<task>
        assert f"transactional.id {transactional_id('mm2-A-B', 'MirrorSourceConnector', 0)}" in logs()
    finally:
        for proc in (first, second):
            proc.kill()
    counts = copies([(r.partition, r.value) for r in source], [(r.partition, r.value) for r in target])
    print(f"\ndedicated mode exactly-once: {len(source)} records, {len(target)} on B: duplicates={counts[0]} "
          f"missing={counts[1]} foreign={counts[2]}")
    assert counts == (0, 0, 0)
    assert not {r.value for r in target} & set(mix.aborted)
