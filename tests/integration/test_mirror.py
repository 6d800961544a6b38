"""MirrorMaker end to end: two real Headwater brokers (A and B) and Connect workers over them.

Each test gets its own topics and a worker cluster of its own on the target; the brokers are shared by
the module. Records are produced with librdkafka and read back with it on the other side.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.brokerproc import BrokerProcess
from support.connectproc import scrape_metrics, unique, wait_for
from support.mirrorkit import (
    Rec,
    by_partition,
    create,
    grow,
    mirror_config,
    produce_keyed,
    read_all,
    topics,
    unpack_checkpoint,
    unpack_heartbeat,
    unpack_offset_sync,
)
from support.txnmix import write_interleaved
from support.workerproc import BROKER_OVERRIDES, Cluster, fast_settings

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
    syncs = [unpack_offset_sync(r.key, r.value) for r in read_all(a.bootstrap, "mm2-offset-syncs.B.internal")]
    assert {s[1] for s in syncs if s[0] == topic} == set(range(6))
    metrics = [worker.ok("GET", f"/connectors/{name}/tasks/{i}/metrics")["metrics"] for i in (0, 1)]
    assert sum(m["records_mirrored"] for m in metrics) == 9000
    assert all(set(m["replication_lag"]) and m["replication_lag_records"] == 0 for m in metrics)
    # MM2's metric names on the worker's /metrics, as the JMX-exporter rules give them (topic: the remote one)
    exported = scrape_metrics(worker.rest)[1]
    record_count = "kafka_connect_mirror_source_connector_record_count_total{"
    counts = {p: sum(v for k, v in exported.items() if k.startswith(record_count)
                     and f'partition="{p}"' in k and f'topic="{remote}"' in k and 'target="B"' in k)
              for p in range(6)}
    assert sum(counts.values()) == 9000 and all(counts.values()), counts
    latency = [v for k, v in exported.items()
               if k.startswith("kafka_connect_mirror_source_connector_replication_latency_ms{") and remote in k]
    assert len(latency) == 6 and all(v >= 0 for v in latency), latency  # the records carry timestamps of their own
    assert sum(v for k, v in exported.items() if k.startswith("headwater_mirror_replication_lag_records{")
               and remote in k) == 0
    # the lag per topic-partition is the RUNNING tasks' trace in the status (refreshed at each offset commit)

    def traces() -> list[str]:
        status = worker.status(name) or {}
        return [t.get("trace") or "" for t in status.get("tasks", [])]
    wait_for(lambda: all("replication lag from A: 0 records" in t for t in traces()), 15, 0.5, "lag in the status")
    assert all(f"{topic}-{p} -> A.{topic}-{p}: 0 records" in "".join(traces()) for p in range(6))
    # the worker's log lines carry the connector and task, as Kafka's MDC
    logs = target_workers.logs()
    assert f"[{name}|task-0] headwater.connectors.mirror.source: mirroring 3 partitions" in logs
    assert f"[{name}|worker] headwater.connectors.mirror.topics: created A.{topic} on B" in logs


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
    wait_for(lambda: topics(b.bootstrap).get(f"A.{second}") == 3 and topics(b.bootstrap).get(f"A.{first}") == 4,
             30, 0.5, "the new topic and partitions on B")
    wait_for(lambda: len(read_all(b.bootstrap, f"A.{second}", 300, timeout=5)) == 300, 60, 0.5, "second topic")
    wait_for(lambda: len(read_all(b.bootstrap, f"A.{first}", 500, timeout=5)) == 500, 60, 0.5, "grown topic")
    assert by_partition(read_all(b.bootstrap, f"A.{first}", 500)) == by_partition(read_all(a.bootstrap, first, 500))


def test_internal_topics_are_mm2s_formats(brokers: tuple[BrokerProcess, BrokerProcess],
                                          target_workers: Cluster) -> None:
    """Offset syncs, checkpoints, heartbeats and source offsets, read with an independent reader."""
    a, b = brokers
    topic, group = unique("fmt"), unique("fmt-group")
    create(a.bootstrap, topic, 2)
    produce_keyed(a.bootstrap, topic, 1000, headers=False)
    consumed = commit(a.bootstrap, topic, group, {0: 150, 1: 250})
    worker = target_workers.workers[0]
    names = {cls: unique(cls.rsplit(".", 1)[1]) for cls in (SOURCE, CHECKPOINT, HEARTBEAT)}
    for cls, name in names.items():
        worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
            name, cls, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, groups=group,
            emit_heartbeats_interval_seconds=1))
    wait_for(lambda: len(read_all(b.bootstrap, f"A.{topic}", 1000, timeout=5)) == 1000, 60, 0.5, "mirrored")

    def checkpoints() -> list[tuple[str, str, int, int, int, str]]:
        return [unpack_checkpoint(r.key, r.value) for r in read_all(b.bootstrap, "A.checkpoints.internal")
                if r.key is not None]
    wait_for(lambda: {c[2] for c in checkpoints() if c[0] == group} == {0, 1}, 60, 0.5, "a checkpoint per partition")
    latest = {c[2]: c for c in checkpoints() if c[0] == group}
    for partition, cp in latest.items():
        assert cp[1] == f"A.{topic}" and cp[3] == consumed[partition]
        assert cp[4] == consumed[partition]  # nothing else wrote to A.<topic>: same offsets, exactly
    syncs = [unpack_offset_sync(r.key, r.value) for r in read_all(a.bootstrap, "mm2-offset-syncs.B.internal")]
    assert {s[1] for s in syncs if s[0] == topic} == {0, 1}
    assert all(s[2] == s[3] for s in syncs if s[0] == topic)  # one run each: upstream = downstream here
    beats = [unpack_heartbeat(r.key, r.value) for r in read_all(b.bootstrap, "heartbeats", 2, timeout=20)]
    assert ("A", "B") in {(s, t) for s, t, _ in beats}
    assert all(abs(ts - time.time() * 1000) < 300_000 for _, _, ts in beats)
    # source offsets: Connect's JSON key [connector, {cluster, partition, topic}] -> {"offset": last mirrored}
    offsets_topic = target_workers.settings["offset.storage.topic"]  # type: ignore[index]
    stored = {}
    for r in read_all(b.bootstrap, offsets_topic):
        if r.key and r.value:
            connector, part = json.loads(r.key)
            if connector == names[SOURCE]:
                stored[part["partition"]] = (part, json.loads(r.value))
    assert set(stored) == {0, 1}
    for partition, (part, offset) in stored.items():
        assert part == {"cluster": "A", "topic": topic, "partition": partition}
        assert offset["offset"] <= 999 and isinstance(offset["offset"], int)


def commit(bootstrap: str, topic: str, group: str, offsets: dict[int, int]) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()
    return offsets


def consume_and_commit(bootstrap: str, topic: str, group: str, count: int) -> dict[int, int]:
    """Consume about ``count`` records in group ``group`` and commit; returns the committed offset per partition."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = 0
    deadline = time.monotonic() + 60
    while seen < count and time.monotonic() < deadline:
        msgs = c.consume(min(500, count - seen), 1.0)
        seen += sum(1 for m in msgs if not m.error())
    c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c.committed(c.assignment(), timeout=30) if tp.offset >= 0}
    c.close()
    return committed


@pytest.mark.parametrize("policy", ["DefaultReplicationPolicy", "IdentityReplicationPolicy"])
def test_consumer_fails_over_to_b_without_skipping_a_record(brokers: tuple[BrokerProcess, BrokerProcess],
                                                           target_workers: Cluster, policy: str) -> None:
    """A group stops half-way on A; with the same group id on B it reads exactly the rest: none skipped,
    none twice (translation exact to the record, group offsets synced by default)."""
    a, b = brokers
    topic, group = unique("failover"), unique("app")
    create(a.bootstrap, topic, 3)
    produce_keyed(a.bootstrap, topic, 4000, headers=False)
    worker = target_workers.workers[0]
    for cls in (SOURCE, CHECKPOINT):
        name = unique(cls.rsplit(".", 1)[1])
        worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
            name, cls, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, groups=group,
            replication_policy_class=policy))
    produce_keyed(a.bootstrap, topic, 2000, start=4000, headers=False)  # mirrored in other batches
    committed = consume_and_commit(a.bootstrap, topic, group, 2777)
    read_on_a = read_group(a.bootstrap, topic, group, committed)
    remote = topic if policy.startswith("Identity") else f"A.{topic}"
    wait_for(lambda: len(read_all(b.bootstrap, remote, 6000, timeout=5)) == 6000, 60, 0.5, "mirrored")

    def synced() -> dict[int, int]:
        return committed_offsets(b.bootstrap, group, remote, 3)
    wait_for(lambda: all(synced().get(p, -1) >= 0 for p in committed), 60, 0.5, "group offsets synced on B")
    from headwater.connectors.mirror import RemoteClusterUtils
    translated = RemoteClusterUtils.translate_offsets({"bootstrap.servers": b.bootstrap,
                                                       "replication.policy.class": policy}, "A", group)
    assert {tp.partition: off for tp, off in translated.items() if tp.topic == remote} == synced()
    # the same group id on B, from the synced offsets
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([remote])
    read_on_b: list[bytes | None] = []
    deadline = time.monotonic() + 60
    while len(read_on_a) + len(read_on_b) < 6000 and time.monotonic() < deadline:
        read_on_b.extend(m.value() for m in c.consume(1000, 0.5) if not m.error())
    time.sleep(1.0)
    read_on_b.extend(m.value() for m in c.consume(1000, 1.0) if not m.error())
    c.close()
    everything = {f"v{i}".encode() * (1 + i % 4) for i in range(6000)}
    seen = Counter(read_on_a + read_on_b)
    skipped = everything - set(seen)
    duplicates = sum(n - 1 for n in seen.values())
    assert not skipped, f"{len(skipped)} records skipped"
    assert duplicates == 0, f"{duplicates} records read twice"


def read_group(bootstrap: str, topic: str, group: str, committed: dict[int, int]) -> list[bytes | None]:
    """The values a group consumed on a cluster: everything below its committed offsets."""
    return [r.value for r in read_all(bootstrap, topic, sum(committed.values()) + 1, timeout=5)
            if r.offset < committed.get(r.partition, 0)]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed(
            [TopicPartition(topic, p) for p in range(partitions)], timeout=30) if tp.offset >= 0}
    finally:
        c.close()


def test_a_and_b_both_ways_never_loop(brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path) -> None:
    a, b = brokers
    prefix = unique("bidi")
    create(a.bootstrap, f"{prefix}-a", 2)
    create(b.bootstrap, f"{prefix}-b", 2)
    produce_keyed(a.bootstrap, f"{prefix}-a", 200, headers=False)
    produce_keyed(b.bootstrap, f"{prefix}-b", 300, headers=False)
    tag_b, tag_a = unique("mm-b"), unique("mm-a")
    with Cluster(tmp_path / "on-b", b.bootstrap, tag_b, worker_settings(tag_b)) as on_b, \
            Cluster(tmp_path / "on-a", a.bootstrap, tag_a, worker_settings(tag_a)) as on_a:
        on_b.start(1)
        on_a.start(1)
        pattern = f".*{prefix}.*"  # lets the remote topics through the filter: only the cycle check stops them
        on_b.workers[0].ok("PUT", "/connectors/a-to-b/config", mirror_config(
            "a-to-b", SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=pattern))
        on_a.workers[0].ok("PUT", "/connectors/b-to-a/config", mirror_config(
            "b-to-a", SOURCE, ("B", b.bootstrap), ("A", a.bootstrap), topics=pattern))
        wait_for(lambda: len(read_all(b.bootstrap, f"A.{prefix}-a", 200, timeout=5)) == 200, 60, 0.5, "A -> B")
        wait_for(lambda: len(read_all(a.bootstrap, f"B.{prefix}-b", 300, timeout=5)) == 300, 60, 0.5, "B -> A")
        time.sleep(5)  # two more refreshes of each side's topics (every 2 s)
        on_a_topics = {t for t in topics(a.bootstrap) if prefix in t}
        on_b_topics = {t for t in topics(b.bootstrap) if prefix in t}
        assert on_a_topics == {f"{prefix}-a", f"B.{prefix}-b"}
        assert on_b_topics == {f"{prefix}-b", f"A.{prefix}-a"}
        # the whole log: the line comes once per topic, and later lines push it out of a tail
        wait_for(lambda: "topic A." in (log := on_a.logs(tail=1 << 30)) or "a cycle" in log, 30, 0.5,
                 "the cycle's log line on A's worker")


def mirrored_or_failed(cluster: Cluster, name: str, bootstrap: str, topic: str,
                       count: int) -> tuple[str, Any] | None:
    """("failed", the FAILED tasks) as soon as one is; ("mirrored", the records) once ``topic`` holds
    ``count`` different values; None meanwhile (a condition to wait for)."""
    status = cluster.status(name)
    failed = [t for t in (status or {}).get("tasks", []) if t["state"] == "FAILED"]
    if failed:
        return "failed", failed
    on_b = read_all(bootstrap, topic, timeout=5)
    if len({r.value for r in on_b}) >= count:
        return "mirrored", on_b
    return None


def first_copies(records: Iterable[Rec]) -> dict[int, list[bytes | None]]:
    """Each partition's values in order, a value seen before (a re-sent record) left out."""
    out: dict[int, list[bytes | None]] = {}
    seen: set[tuple[int, bytes | None]] = set()
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        if (r.partition, r.value) not in seen:
            seen.add((r.partition, r.value))
            out.setdefault(r.partition, []).append(r.value)
    return out


def test_mirror_worker_killed_mid_stream_loses_nothing(brokers: tuple[BrokerProcess, BrokerProcess],
                                                      tmp_path: Path) -> None:
    """SIGKILL the worker while 100,000 records stream into 8 partitions: after the restart the task
    re-sends from its last stored offsets, a backlog of more than 1 MiB a partition whose small batches are
    merged (merged records take more bytes than they did in their own batches), and stays RUNNING; every
    record reaches B, in order per partition, the re-sent ones at least once."""
    a, b = brokers
    topic, name = unique("crash"), "crash"
    create(a.bootstrap, topic, 8)
    tag = unique("mm-crash")
    total, chunk = 100_000, 10_000
    produced = [0]
    small_batches: dict[str, Any] = {"batch.size": 8192}

    def keep_producing() -> None:
        while produced[0] < total:  # batches of at most 8 KiB: the mirror merges them
            produce_keyed(a.bootstrap, topic, chunk, start=produced[0], pad=80, **small_batches)
            produced[0] += chunk

    with Cluster(tmp_path, b.bootstrap, tag, worker_settings(tag)) as cluster:
        cluster.start(1)
        cluster.workers[0].ok("PUT", f"/connectors/{name}/config", mirror_config(
            name, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, tasks_max=2))
        producer = threading.Thread(target=keep_producing)
        producer.start()
        try:
            wait_for(lambda: len(read_all(b.bootstrap, f"A.{topic}", 5_000, timeout=5)) >= 5_000, 60, 0.2,
                     "mirroring under way", cluster.logs)
            cluster.workers[0].kill()
        finally:
            producer.join(60)  # the rest is produced while the worker is down: a backlog of over 1 MiB a partition
        assert produced[0] == total
        cluster.start(1)
        outcome, detail = wait_for(lambda: mirrored_or_failed(cluster, name, b.bootstrap, f"A.{topic}", total), 90,
                                   1.0, "every record on B after the restart", cluster.logs)
        assert outcome == "mirrored", detail
        cluster.wait_running(name, 2)
    source = read_all(a.bootstrap, topic, total)
    assert len(source) == total
    assert first_copies(detail) == {p: [r[1] for r in recs] for p, recs in by_partition(source).items()}



def test_batches_bigger_than_the_target_takes_are_split(brokers: tuple[BrokerProcess, BrokerProcess],
                                                        target_workers: Cluster) -> None:
    """A's batches of about 900 kB go whole unless B's topic takes less (max.message.bytes 200000 there):
    the worker splits them into batches B takes, the records in order. A record alone bigger than B takes
    fails the task (errors.tolerance=none) with a message naming the limit."""
    from confluent_kafka import Producer

    a, b = brokers
    topic = unique("bigbatches")
    create(a.bootstrap, topic, 2)
    create(b.bootstrap, f"A.{topic}", 2, **{"max.message.bytes": "200000"})
    p = Producer({"bootstrap.servers": a.bootstrap, "batch.size": 1_000_000, "linger.ms": 200})
    for i in range(12_000):
        p.produce(topic, key=b"k%d" % (i % 2), value=b"%d:" % i + b"x" * 300, timestamp=1_650_000_000_000 + i)
    assert p.flush(60) == 0
    worker = target_workers.workers[0]
    name = unique("mirror")
    worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
        name, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, sync_topic_configs_enabled="false"))
    source = read_all(a.bootstrap, topic, 12_000)
    outcome, detail = wait_for(lambda: mirrored_or_failed(target_workers, name, b.bootstrap, f"A.{topic}", 12_000),
                               60, 0.5, "every record on B", target_workers.logs)
    assert outcome == "mirrored", detail
    assert by_partition(read_all(b.bootstrap, f"A.{topic}", 12_000, settle=1.0)) == by_partition(source)
    assert "into 5 batches of at most 200000 bytes" in target_workers.logs(100_000)  # ~900 kB each, split
    target_workers.wait_running(name, 2)
    p.produce(topic, key=b"k0", value=b"y" * 300_000)
    assert p.flush(60) == 0
    status = wait_for(lambda: (s := worker.status(name)) and any(t["state"] == "FAILED" for t in s["tasks"]) and s,
                      60, 0.5, "the task FAILED", target_workers.logs)
    trace = next(t["trace"] for t in cast(dict[str, Any], status)["tasks"] if t["state"] == "FAILED")
    assert "cannot be split to fit the target's limit of 200000 bytes" in trace, trace


def test_bad_configs_are_refused_and_create_nothing(brokers: tuple[BrokerProcess, BrokerProcess],
                                                   target_workers: Cluster) -> None:
    a, b = brokers
    worker = target_workers.workers[0]
    before = set(topics(b.bootstrap)), set(topics(a.bootstrap))
    cases = {
        "target.cluster.alias": {"target.cluster.alias": "A"},  # a flow into itself
        "topics": {"topics": "orders-(["},  # does not compile
        "source.cluster.alias": {"source.cluster.alias": "not an alias!"},
        "replication.policy.class": {"replication.policy.class": "MyPolicy"},
    }
    for key, change in cases.items():
        config = {**mirror_config("bad", SOURCE, ("A", a.bootstrap), ("B", b.bootstrap)), **change}
        validated = worker.ok("PUT", "/connector-plugins/MirrorSourceConnector/config/validate", config)
        errors = {c["value"]["name"]: c["value"]["errors"] for c in validated["configs"] if c["value"]["errors"]}
        assert key in errors, (key, errors)
        resp = worker.call("PUT", "/connectors/bad/config", config)
        assert resp.status == 400 and key in resp.json["message"], resp
    assert (set(topics(b.bootstrap)), set(topics(a.bootstrap))) == before
    # an unreachable cluster: the connector fails with the reason in its trace, nothing is created
    config = {**mirror_config("unreachable", SOURCE, ("A", "127.0.0.1:1"), ("B", b.bootstrap)),
              "admin.timeout.ms": "5000"}
    worker.ok("PUT", "/connectors/unreachable/config", config)
    status = wait_for(lambda: (s := worker.status("unreachable")) and s["connector"]["state"] == "FAILED" and s,
                      30, 0.5, "the connector FAILED")
    assert "could not reach the source cluster 'A' at 127.0.0.1:1" in status["connector"]["trace"]
    assert (set(topics(b.bootstrap)), set(topics(a.bootstrap))) == before


def test_read_committed_copies_only_committed_transactions(brokers: tuple[BrokerProcess, BrokerProcess],
                                                          target_workers: Cluster) -> None:
    """Committed and aborted transactions interleaved on A (real transactional producers): with MM2's
    ``source.consumer.isolation.level=read_committed`` only the committed records reach B; with the default
    (read_uncommitted, into other names) the aborted ones too. No marker is ever copied."""
    a, b = brokers
    topic = unique("txn")
    create(a.bootstrap, topic, 1)
    mix = write_interleaved(a.bootstrap, topic)
    worker = target_workers.workers[0]
    committed, everything = unique("mirror-rc"), unique("mirror-ru")
    worker.ok("PUT", f"/connectors/{committed}/config", mirror_config(
        committed, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, tasks_max=1,
        **{"source.consumer.isolation.level": "read_committed"}))
    worker.ok("PUT", f"/connectors/{everything}/config", mirror_config(
        everything, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=topic, tasks_max=1,
        **{"replication.policy.separator": "_", "emit.offset-syncs.enabled": "false"}))
    copied = read_all(b.bootstrap, f"A.{topic}", len(mix.committed) + 1, settle=1.0)
    assert [r.value for r in copied] == [*mix.committed, mix.end]
    uncommitted = read_all(b.bootstrap, f"A_{topic}", len(mix.everything), settle=1.0)
    assert sorted(r.value or b"" for r in uncommitted) == sorted(mix.everything)


def test_compressed_and_log_append_time_topics_copy_exactly(brokers: tuple[BrokerProcess, BrokerProcess],
                                                            target_workers: Cluster) -> None:
    """zstd batches go whole; a LogAppendTime topic's records keep the time A gave them."""
    from confluent_kafka import Producer

    a, b = brokers
    zipped, stamped = unique("zstd"), unique("appendtime")
    create(a.bootstrap, zipped, 2)
    create(a.bootstrap, stamped, 2, **{"message.timestamp.type": "LogAppendTime"})
    p = Producer({"bootstrap.servers": a.bootstrap, "compression.type": "zstd", "linger.ms": 20})
    for i in range(3000):
        for topic in (zipped, stamped):
            p.produce(topic, key=f"k{i % 7}".encode(), value=f"record {i} ".encode() * 20, headers=[("i", b"%d" % i)],
                      timestamp=1_600_000_000_000 + i)
    assert p.flush(60) == 0
    worker = target_workers.workers[0]
    name = unique("mirror")
    worker.ok("PUT", f"/connectors/{name}/config", mirror_config(
        name, SOURCE, ("A", a.bootstrap), ("B", b.bootstrap), topics=f"{zipped}|{stamped}"))
    for topic in (zipped, stamped):
        source = read_all(a.bootstrap, topic, 3000)
        wait_for(lambda t=topic: len(read_all(b.bootstrap, f"A.{t}", 3000, timeout=5)) == 3000,  # type: ignore[misc]
                 60, 0.5, topic)
        assert by_partition(read_all(b.bootstrap, f"A.{topic}", 3000)) == by_partition(source)
    stamps = {r.timestamp for r in read_all(a.bootstrap, stamped, 3000)}
    assert all(ts > 1_700_000_000_000 for ts in stamps)  # the broker's append times, not the producer's
    metrics = [worker.ok("GET", f"/connectors/{name}/tasks/{i}/metrics")["metrics"] for i in (0, 1)]
    assert sum(m["batches_copied_whole"] + m["batches_rebuilt"] for m in metrics) > 0


def test_mirror_into_headwater_up(brokers: tuple[BrokerProcess, BrokerProcess], tmp_path: Path) -> None:
    """The three connectors in a standalone worker: ``headwater up`` is the target cluster B."""
    from support.connectproc import ConnectProcess

    a, _ = brokers
    topic, group = unique("up"), unique("up-group")
    create(a.bootstrap, topic, 3)
    produce_keyed(a.bootstrap, topic, 900)
    commit(a.bootstrap, topic, group, {0: 100, 1: 200, 2: 0})
    with ConnectProcess(tmp_path) as up:  # started on entry
        for cls in (SOURCE, CHECKPOINT, HEARTBEAT):
            name = cls.rsplit(".", 1)[1]
            up.create(name, mirror_config(name, cls, ("A", a.bootstrap), ("B", up.bootstrap), topics=topic,
                                          groups=group))
            up.wait_state(name, "RUNNING", timeout=30)
        source = read_all(a.bootstrap, topic, 900)
        wait_for(lambda: len(read_all(up.bootstrap, f"A.{topic}", 900, timeout=5)) == 900, 60, 0.5, "mirrored")
        assert by_partition(read_all(up.bootstrap, f"A.{topic}", 900)) == by_partition(source)
        wait_for(lambda: committed_offsets(up.bootstrap, group, f"A.{topic}", 3) == {0: 100, 1: 200, 2: 0}, 60, 0.5,
                 "the group's offsets on B")
        assert any(r.key for r in read_all(up.bootstrap, "heartbeats", 1, timeout=20))
