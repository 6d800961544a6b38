"""MirrorMaker end to end: two real Headwater brokers (A and B) and Connect workers over them.

Each test gets its own topics and a worker cluster of its own on the target; the brokers are shared by
the module. Records are produced with librdkafka and read back with it on the other side.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from brokerproc import BrokerProcess
from connectproc import unique, wait_for
from mirrorkit import by_partition, create, grow, mirror_config, produce_keyed, read_all, topics
from workerproc import BROKER_OVERRIDES, Cluster, fast_settings

from headwater.kafka.mirror import OffsetSync

pytestmark = pytest.mark.timeout(240)

SOURCE = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
CHECKPOINT = "org.apache.kafka.connect.mirror.MirrorCheckpointConnector"
HEARTBEAT = "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("mirror-brokers")
    with BrokerProcess(base / "a", *BROKER_OVERRIDES) as a, BrokerProcess(base / "b", *BROKER_OVERRIDES) as b:
        yield a, b


def worker_settings(tag: str) -> dict[str, str]:
    return {**fast_settings(tag), "key.converter": "org.apache.kafka.connect.json.JsonConverter"}


@pytest.fixture
def target_workers(brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path):
    """One Connect worker on B (the target), with JsonConverter defaults: the mirror must copy bytes anyway."""
    _, b = brokers
    tag = unique("mm")
    with Cluster(tmp_path, b.bootstrap, tag, worker_settings(tag)) as cluster:
        cluster.start(1)
        yield cluster


def test_a_to_b_copies_every_record_byte_for_byte(brokers: tuple[BrokerProcess, BrokerProcess],
                                                  target_workers: Cluster) -> None:
    a, b = brokers
    topic = unique("orders")
    create(a.bootstrap, topic, 6, **{"retention.ms": "86400000"})
    produce_keyed(a.bootstrap, topic, 6000)
    worker = target_workers.workers[0]
    name = unique("mirror")
    worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
        name, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic))
    target_workers.wait_running(name, 2)
    produce_keyed(a.bootstrap, topic, 3000, start=6000)
    remote = f"A.{topic}"
    source_records = read_all(a.bootstrap, topic, 9000)
    mirrored = read_all(b.bootstrap, remote, 9000, settle=1.0)
    assert topics(b.bootstrap)[remote] == 6
    assert len(mirrored) == 9000
    assert by_partition(mirrored) == by_partition(source_records)  # key, value, headers, timestamp, order
    # the topic's own config came along
    from confluent_kafka.admin import AdminClient, ConfigResource
    res = ConfigResource("topic", remote)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "86400000"
    # offset syncs in MM2's format on the source cluster
    syncs = [OffsetSync.decode(r.key, r.value) for r in read_all(a.bootstrap, "mm2-offset-syncs.B.internal")]
    mine = [s for s in syncs if s.topic == topic]
    assert {s.partition for s in mine} == set(range(6))
    metrics = [worker.ok("GET", f"/connectors/{name}/tasks/{i}/metrics")["metrics"] for i in (0, 1)]
    assert sum(m["records_mirrored"] for m in metrics) == 9000
    assert all(set(m["replication_lag"]) and m["replication_lag_records"] == 0 for m in metrics)
    # the lag per topic-partition is the RUNNING tasks' trace in the status (refreshed at each offset commit)

    def traces() -> list[str]:
        status = worker.status(name) or {}
        return [t.get("trace") or "" for t in status.get("tasks", [])]
    wait_for(lambda: all("replication lag from A: 0 records" in t for t in traces()), 15, 0.5, "lag in the status")
    assert all(f"{topic}-{p} -> A.{topic}-{p}: 0 records" in "".join(traces()) for p in range(6))


def test_new_topics_and_partitions_show_up_on_b(brokers: tuple[BrokerProcess, BrokerProcess],
                                                target_workers: Cluster) -> None:
    a, b = brokers
    prefix = unique("grow")
    first = f"{prefix}-one"
    create(a.bootstrap, first, 2)
    produce_keyed(a.bootstrap, first, 100, headers=False)
    worker = target_workers.workers[0]
    name = unique("mirror")
    worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
        name, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=f"{prefix}-.*"))
    wait_for(lambda: len(read_all(b.bootstrap, f"A.{first}", 100, timeout=5)) == 100, 60, 0.5, "first topic")
    second = f"{prefix}-two"
    create(a.bootstrap, second, 3)
    produce_keyed(a.bootstrap, second, 300, headers=False)
    grow(a.bootstrap, first, 4)
    produce_keyed(a.bootstrap, first, 400, start=100, headers=False)
    started = time.monotonic()
    wait_for(lambda: topics(b.bootstrap).get(f"A.{second}") == 3 and topics(b.bootstrap).get(f"A.{first}") == 4,
             30, 0.5, "the new topic and partitions on B")
    wait_for(lambda: len(read_all(b.bootstrap, f"A.{second}", 300, timeout=5)) == 300, 60, 0.5, "second topic")
    wait_for(lambda: len(read_all(b.bootstrap, f"A.{first}", 500, timeout=5)) == 500, 60, 0.5, "grown topic")
    assert by_partition(read_all(b.bootstrap, f"A.{first}", 500)) == by_partition(read_all(a.bootstrap, first, 500))
    assert time.monotonic() - started < 60
