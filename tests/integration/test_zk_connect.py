"""A distributed Connect group on a replicated cluster (a real ZooKeeper, three real brokers): two workers with
exactly-once source support run a file pipeline (FileStreamSource -> a topic with replication factor 3 ->
FileStreamSink) while the broker leading the pipeline's partition, which also coordinates the source task's
transactions, is SIGKILLed; the workers carry on against the new leaders (their group's coordinator, internal
topics, the pipeline's topic and ``__transaction_state`` all replicated), every line written to the source file
reaches the sink file (0 lost), and a read_committed consumer reads each line from the topic exactly once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support import zkserver
from support.brokerproc import BrokerProcess
from support.connectproc import wait_for
from support.eoskit import copies, read_isolated
from support.workerproc import BROKER_OVERRIDES, Cluster, fast_settings
from support.zkcluster import agreed_topic, running_cluster, txn_coordinator

from headwater.connect.runtime.exactly_once import transactional_id
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
LINES = 4000


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    base, chroot = tmp_path_factory.mktemp("zk-connect"), "/" + unique("hw")
    with running_cluster(base, zookeeper.connect + chroot, IDS, SESSION_TIMEOUT_MS, "default.replication.factor=3",
                         "min.insync.replicas=2", "transaction.state.log.num.partitions=5", *BROKER_OVERRIDES
                         ) as started:
        yield started


def test_file_pipeline_loses_nothing_when_a_broker_dies(brokers: dict[int, BrokerProcess], tmp_path: Path) -> None:
    every = list(brokers.values())
    bootstrap = ",".join(b.bootstrap for b in every)
    topic = unique("lines")
    tag = unique("zkc")
    # the broker coordinating the source task's transactions leads the pipeline's partition too: one kill moves both
    coordinator = wait_until(lambda: txn_coordinator(every, transactional_id(f"{tag}-group", "source", 0)),
                             "the source task's transaction coordinator", timeout=30)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    replicas = [coordinator, *sorted(IDS - {coordinator})]
    next(iter(admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas])],
                                  operation_timeout=20).values())).result(30)
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    settings = {**fast_settings(tag), "config.storage.replication.factor": "3",
                "offset.storage.replication.factor": "3", "status.storage.replication.factor": "3",
                "exactly.once.source.support": "enabled"}
    with Cluster(tmp_path / "workers", bootstrap, tag=tag, settings=settings) as cluster:
        cluster.start(2)
        leader = cluster.leader()
        leader.ok("POST", "/connectors", {"name": "sink", "config": {
            "connector.class": "FileStreamSink", "topics": topic, "file": str(sink_file), "tasks.max": "1"}},
            expect=201)
        leader.ok("POST", "/connectors", {"name": "source", "config": {
            "connector.class": "FileStreamSource", "topic": topic, "file": str(source_file),
            "exactly.once.support": "required"}}, expect=201)
        cluster.wait_running("sink", 1)
        cluster.wait_running("source", 1)

        def sunk() -> set[str]:
            if not sink_file.exists():
                return set()
            text = sink_file.read_text()
            return set(text[: text.rfind("\n") + 1].splitlines())

        def write(first: int, last: int) -> None:
            with source_file.open("a") as f:
                for i in range(first, last):
                    f.write(f"line-{i}\n")
                    if i % 100 == 99:
                        f.flush()
                        time.sleep(0.02)

        write(0, LINES // 2)
        wait_for(lambda: len(sunk()) >= LINES // 4, 60, 0.1, "a quarter of the lines in the sink file", cluster.logs)
        view = agreed_topic(every, topic)
        assert view is not None and view[0][0] == coordinator
        victim = brokers[view[0][0]]
        victim.kill()
        others = [b for b in every if b is not victim]
        wait_until(lambda: agreed_topic(others, topic, lambda v: v[0][0] not in (-1, view[0][0])),
                   "the pipeline's partition led by another broker", timeout=SESSION_TIMEOUT_MS / 1000 + 15)
        write(LINES // 2, LINES)
        wanted = {f"line-{i}" for i in range(LINES)}
        wait_for(lambda: sunk() >= wanted, 90, 0.2, f"all {LINES} lines in the sink file", cluster.logs)
        lines = sink_file.read_text().splitlines()
        print(f"\n{LINES} lines through a broker kill: {len(lines)} in the sink file, {len(lines) - len(set(lines))} "
              "repeated, 0 lost")
        assert all(w.running for w in cluster.workers)
        for name in ("source", "sink"):
            status = cluster.status(name)
            assert status is not None and status["connector"]["state"] == "RUNNING", status
            assert all(t["state"] == "RUNNING" for t in status["tasks"]), status
    committed = [json.loads(r.value) for r in read_isolated(bootstrap, topic, "read_committed") if r.value is not None]
    assert copies([f"line-{i}" for i in range(LINES)], committed) == (0, 0, 0)  # exactly once in the topic
    victim.start()  # the module's other tests (none yet) get three brokers again
