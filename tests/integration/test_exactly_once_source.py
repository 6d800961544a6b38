"""Exactly-once source tasks (KIP-618) on distributed workers (subprocesses) over a real broker (issue 29).

The connector is ``ScriptedSource`` (tests/support/eosplugin, on the workers' plugin.path): numbered records,
``count`` of them, ``batch`` a poll, whose transaction boundaries the test can script. Records and their
offsets are checked with read_committed (and read_uncommitted) consumers of the target topic and of the
offsets topic. A partition's high watermark minus its records is the number of transaction markers written
to it: one per transaction that touched it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.brokerproc import BrokerProcess
from support.confluent import position
from support.connectproc import unique, wait_for
from support.workerproc import BROKER_OVERRIDES, PLUGINS, Cluster, WorkerProcess, fast_settings

from headwater.connect.kafka.partitioner import partition_for_key
from headwater.connect.storage.offsets import offset_key

pytestmark = pytest.mark.timeout(240)

EOS_PLUGIN = Path(__file__).resolve().parents[1] / "support" / "eosplugin"
OFFSET_PARTITIONS = 5  # fast_settings' offset.storage.partitions
SOURCE = {"source": "scripted"}  # the scripted task's source partition


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("eos-broker") / "data", *BROKER_OVERRIDES, "num.partitions=1") as proc:
        yield proc


def eos_settings(tag: str, level: str = "enabled") -> dict[str, str]:
    return {**fast_settings(tag), "exactly.once.source.support": level, "plugin.path": f"{PLUGINS},{EOS_PLUGIN}"}


@pytest.fixture(scope="module")
def eos(broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, WorkerProcess]]:
    """One worker with exactly.once.source.support=enabled."""
    tag = unique("eos")
    with Cluster(tmp_path_factory.mktemp("eos-workers"), broker.bootstrap, tag, eos_settings(tag)) as cluster:
        (worker,) = cluster.start(1)
        yield cluster, worker


def scripted(topic: str, **settings: str) -> dict[str, str]:
    return {"connector.class": "ScriptedSource", "topic": topic, "tasks.max": "1", **settings}


def read(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every record of ``topic`` a consumer with ``isolation`` reads, from the start to
    the end offsets of the moment of the call (past aborted records and transaction markers)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-read"), "enable.auto.commit": False,
                         "isolation.level": isolation, "fetch.wait.max.ms": 50})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends if ends[p] > 0])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            out += [(position(m)[0], m.key(), m.value()) for m in consumer.consume(10000, timeout=0.2)
                    if m.error() is None]
            positions = consumer.position([TopicPartition(topic, p) for p in ends if ends[p] > 0])
            if all(tp.offset >= ends[tp.partition] for tp in positions):
                return out
        raise AssertionError(f"could not read {topic} to {ends} within 30 s")
    finally:
        consumer.close()


def seqs(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[int]:
    return [json.loads(v or b"")["seq"] for _, _, v in read(bootstrap, topic, isolation)]


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's high watermark (not its last stable offset: what open transactions hold counts); 0 while
    the topic does not exist yet."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-hw"),
                         "isolation.level": "read_uncommitted"})
    try:
        if topic not in consumer.list_topics(topic, timeout=10).topics or consumer.list_topics(
                topic, timeout=10).topics[topic].error is not None:
            return 0
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        consumer.close()


def stored_offsets(bootstrap: str, offsets_topic: str, connector: str) -> list[Any]:
    """The scripted task's offsets a read_committed reader of ``offsets_topic`` finds, in log order."""
    key = offset_key(connector, SOURCE).encode()
    return [json.loads(v) if v is not None else None for _, k, v in read(bootstrap, offsets_topic) if k == key]


def wait_seqs(bootstrap: str, topic: str, count: int, worker: WorkerProcess) -> list[int]:
    found: list[int] = wait_for(lambda: s if len(s := seqs(bootstrap, topic)) >= count else None, 60, 0.3,
                                f"{count} committed records in {topic}", worker.log_text)
    return found


# -- poll boundaries: records and offsets commit together ------------------------------------------------


def test_each_poll_commits_its_records_and_offsets_in_one_transaction(eos: tuple[Cluster, WorkerProcess]) -> None:
    """exactly.once.support=required starts on an enabled worker. 50 records in polls of 10: five transactions,
    each holding a poll's records (target partition) and its offset (the offsets topic's partition of the key),
    so each of the two partitions holds five commit markers; a read_committed reader finds every record once and
    the last offset."""
    cluster, worker = eos
    topic, name = unique("eos-poll"), unique("eos-poll")
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="50", batch="10",
                                                             **{"exactly.once.support": "required"}))
    assert wait_seqs(cluster.bootstrap, topic, 50, worker) == list(range(50))
    offsets_topic = f"{cluster.tag}-offsets"
    offsets = wait_for(lambda: o if (o := stored_offsets(cluster.bootstrap, offsets_topic, name))[-1:] == [
        {"seq": 49}] else None, 30, 0.3, "the last offset stored", worker.log_text)
    assert offsets == [{"seq": s} for s in (9, 19, 29, 39, 49)], offsets
    assert high_watermark(cluster.bootstrap, topic) == 50 + 5  # five transactions
    key_partition = partition_for_key(offset_key(name, SOURCE).encode(), OFFSET_PARTITIONS)
    assert high_watermark(cluster.bootstrap, offsets_topic, key_partition) >= 5 + 5
    status = worker.ok("GET", f"/connectors/{name}/status")
    assert status["tasks"][0]["state"] == "RUNNING", status
    worker.ok("DELETE", f"/connectors/{name}")


def test_the_tasks_commit_is_called_after_empty_polls_too(eos: tuple[Cluster, WorkerProcess]) -> None:
    """As Kafka's commitTransaction: with poll boundaries and nothing left to send, each poll still ends with
    the task's commit() (only the transaction is skipped), so a source cleaning up there is not left waiting."""
    cluster, worker = eos
    topic, name = unique("eos-idle"), unique("eos-idle")
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="20", batch="10"))
    assert wait_seqs(cluster.bootstrap, topic, 20, worker) == list(range(20))

    def commits() -> int | None:
        trace = worker.ok("GET", f"/connectors/{name}/status")["tasks"][0].get("trace") or ""
        return int(trace.split("=")[1]) if trace.startswith("commits=") else None

    wait_for(lambda: n if (n := commits()) is not None and n > 10 else None, 30, 0.3,
             "commit() called after the empty polls that follow the two transactions", worker.log_text)
    worker.ok("DELETE", f"/connectors/{name}")


# -- connector boundaries ------------------------------------------------------------------------------


def test_connector_boundaries_and_an_abort(eos: tuple[Cluster, WorkerProcess]) -> None:
    """The task commits after every fifth record and aborts after 12 and after 29 (the last): records 10-12 and
    25-29 were written but are invisible to read_committed; as Kafka's TransactionContext says, the offsets of
    an aborted transaction are still committed, so a restart goes on after 29 and sends nothing again."""
    cluster, worker = eos
    topic, name = unique("eos-conn"), unique("eos-conn")
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="30", batch="10", **{
        "transaction.boundary": "connector", "commit.every": "5", "abort.at": "12,29"}))
    offsets_topic = f"{cluster.tag}-offsets"
    wait_for(lambda: stored_offsets(cluster.bootstrap, offsets_topic, name)[-1:] == [{"seq": 29}], 60, 0.3,
             "the offset of 29 stored", worker.log_text)
    aborted = {10, 11, 12, 25, 26, 27, 28, 29}
    assert seqs(cluster.bootstrap, topic) == [s for s in range(30) if s not in aborted]
    assert sorted(seqs(cluster.bootstrap, topic, "read_uncommitted")) == list(range(30))  # written, then aborted
    # transactions: 0-4, 5-9, 10-12 (aborted), 13-14, 15-19, 20-24, 25-29 (aborted): a marker each
    assert high_watermark(cluster.bootstrap, topic) == 30 + 7
    assert stored_offsets(cluster.bootstrap, offsets_topic, name) == [
        {"seq": s} for s in (4, 9, 12, 14, 19, 24, 29)]
    worker.ok("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false", expect=(200, 202, 204))
    wait_for(lambda: (st := worker.status(name)) and st["tasks"] and st["tasks"][0]["state"] == "RUNNING", 30, 0.2,
             "the restarted task RUNNING", worker.log_text)
    time.sleep(2)  # a task that resumed from an older offset would have sent again by now (polls of 10, no wait)
    assert sorted(seqs(cluster.bootstrap, topic, "read_uncommitted")) == list(range(30))
    worker.ok("DELETE", f"/connectors/{name}")


# -- interval boundaries ---------------------------------------------------------------------------------


def test_interval_boundary_spans_polls(eos: tuple[Cluster, WorkerProcess]) -> None:
    """transaction.boundary=interval: 40 polls of one record, 50 ms apart, committed every 600 ms: a handful of
    transactions (a marker each), not one per poll; every record once."""
    cluster, worker = eos
    topic, name = unique("eos-interval"), unique("eos-interval")
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="40", batch="1", **{
        "poll.ms": "50", "transaction.boundary": "interval", "transaction.boundary.interval.ms": "600"}))
    assert wait_seqs(cluster.bootstrap, topic, 40, worker) == list(range(40))
    markers = high_watermark(cluster.bootstrap, topic) - 40
    assert 2 <= markers <= 20, markers  # 40 polls of 50 ms: about 4 transactions (one per poll would be 40)
    worker.ok("DELETE", f"/connectors/{name}")


# -- a connector's own offsets topic ----------------------------------------------------------------------


def test_connector_offsets_topic_is_written_and_read_back_first(eos: tuple[Cluster, WorkerProcess]) -> None:
    """offsets.storage.topic: the offsets go to the connector's topic (in the transactions), copied to the worker's
    after each commit. When the task starts again it reads the connector's topic first: an offset of 9 written
    there while the connector was stopped makes it send 10-19 again, though the worker's topic says 19."""
    cluster, worker = eos
    topic, name, own = unique("eos-own"), unique("eos-own"), unique("eos-own-offsets")
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="20", batch="5",
                                                             **{"offsets.storage.topic": own}))
    assert wait_seqs(cluster.bootstrap, topic, 20, worker) == list(range(20))
    assert wait_for(lambda: stored_offsets(cluster.bootstrap, own, name)[-1:] == [{"seq": 19}], 30, 0.3,
                    "the offset of 19 in the connector's topic", worker.log_text)
    worker_offsets = f"{cluster.tag}-offsets"
    assert wait_for(lambda: stored_offsets(cluster.bootstrap, worker_offsets, name)[-1:] == [{"seq": 19}], 30, 0.3,
                    "the offset of 19 copied to the worker's topic", worker.log_text)
    worker.ok("PUT", f"/connectors/{name}/stop", expect=(202, 204))
    wait_for(lambda: (st := worker.status(name)) and st["connector"]["state"] == "STOPPED", 30, 0.2, "STOPPED")
    from confluent_kafka import Producer

    key = offset_key(name, SOURCE).encode()
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce(own, key=key, value=b'{"seq":9}', partition=partition_for_key(key, OFFSET_PARTITIONS))
    assert producer.flush(30) == 0
    worker.ok("PUT", f"/connectors/{name}/resume", expect=(202, 204))
    again = wait_seqs(cluster.bootstrap, topic, 30, worker)
    assert sorted(again) == sorted([*range(20), *range(10, 20)]), again
    worker.ok("DELETE", f"/connectors/{name}")


# -- a fenced task ------------------------------------------------------------------------------------------


def test_a_fenced_task_fails_saying_so(eos: tuple[Cluster, WorkerProcess]) -> None:
    """A producer that starts with the task's transactional.id (<group.id>-<connector>-<task>) fences the task's:
    the task fails, its trace saying it was fenced; nothing of its open transaction becomes visible."""
    from confluent_kafka import Producer

    cluster, worker = eos
    topic, name = unique("eos-fenced"), unique("eos-fenced")
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="100000", batch="1", **{
        "poll.ms": "20", "transaction.boundary": "interval", "transaction.boundary.interval.ms": "60000"}))
    wait_for(lambda: high_watermark(cluster.bootstrap, topic) >= 5, 60, 0.2, "records of the open transaction",
             worker.log_text)
    zombie_hunter = Producer({"bootstrap.servers": cluster.bootstrap,
                              "transactional.id": f"{cluster.tag}-group-{name}-0"})
    zombie_hunter.init_transactions(30)
    failed = wait_for(lambda: st if (st := worker.status(name)) and st["tasks"] and st["tasks"][0][
        "state"] == "FAILED" else None, 60, 0.2, "the fenced task FAILED", worker.log_text)
    trace = failed["tasks"][0]["trace"]
    assert f"task {name}-0 was fenced" in trace and f"transactional.id {cluster.tag}-group-{name}-0" in trace, trace
    assert seqs(cluster.bootstrap, topic) == []  # its one transaction was open for 60 s: aborted by the fencing
    worker.ok("DELETE", f"/connectors/{name}")


# -- worker levels ------------------------------------------------------------------------------------------


def test_preparing_is_accepted_and_tasks_stay_at_least_once(broker: BrokerProcess, tmp_path: Path) -> None:
    """exactly.once.source.support=preparing (the first step of the rolling upgrade): the worker starts, source
    tasks deliver without transactions (no marker after their records), and required is still refused. A
    connector's offsets.storage.topic holds its offsets at least once too (as in Kafka's distributed mode)."""
    tag = unique("eos-prep")
    with Cluster(tmp_path, broker.bootstrap, tag, eos_settings(tag, "preparing")) as cluster:
        (worker,) = cluster.start(1)
        topic, name, own = unique("prep"), unique("prep"), unique("prep-offsets")
        worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="20", batch="5",
                                                                 **{"offsets.storage.topic": own}))
        assert wait_seqs(cluster.bootstrap, topic, 20, worker) == list(range(20))
        assert high_watermark(cluster.bootstrap, topic) == 20
        wait_for(lambda: stored_offsets(cluster.bootstrap, own, name)[-1:] == [{"seq": 19}], 30, 0.3,
                 "the offset of 19 in the connector's topic", worker.log_text)
        refused = worker.call("PUT", f"/connectors/{unique('req')}/config",
                              scripted(topic, **{"exactly.once.support": "required"}))
        assert refused.status == 400 and "does not have exactly-once source support enabled" in refused.body.decode()


# -- whole batches in a transaction ---------------------------------------------------------------------------


def test_a_prebuilt_batch_joins_its_producers_transaction(broker: BrokerProcess) -> None:
    """A batch sent whole (``prebuilt_batch``, the encoded path mirrors take) by a transactional producer is
    marked transactional, as the producer's own batches are: aborted, a read_committed reader never sees it;
    committed, it does."""
    import asyncio

    from headwater.connect import kafka as clients
    from headwater.kafka.records import Record, build_batch

    topic = unique("eos-prebuilt")

    async def run() -> None:
        producer = clients.producer(broker.bootstrap, {}, transactional_id=unique("prebuilt"), acks="all")
        await producer.start()
        try:
            for value, commit in ((b"aborted", False), (b"committed", True)):
                await producer.begin_transaction()
                data = build_batch([Record(0, int(time.time() * 1000), None, value, [])])
                ack = await producer.send_batch(clients.prebuilt_batch(producer, data, 1), topic, partition=0)
                await ack
                await (producer.commit_transaction() if commit else producer.abort_transaction())
        finally:
            await producer.stop()

    asyncio.run(run())
    assert [v for _, _, v in read(broker.bootstrap, topic, "read_uncommitted")] == [b"aborted", b"committed"]
    assert [v for _, _, v in read(broker.bootstrap, topic)] == [b"committed"]


# -- a worker killed mid-stream ------------------------------------------------------------------------------


def test_worker_killed_mid_stream_sends_nothing_twice(broker: BrokerProcess, tmp_path: Path) -> None:
    """SIGKILL of the worker while its task writes (a transaction every 300 ms): a worker started in its place
    resumes from the last committed offset, and what the killed task had sent after it (its open transaction)
    is aborted when the new task's producer starts: a read_committed reader finds every record once, in order.
    (At least once, the records sent after the last offset flush would be there twice.)"""
    tag = unique("eos-kill")
    with Cluster(tmp_path, broker.bootstrap, tag, eos_settings(tag)) as cluster:
        (first,) = cluster.start(1)
        topic, name = unique("eos-kill"), unique("eos-kill")
        first.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="4000", batch="20", **{
            "poll.ms": "10", "transaction.boundary": "interval", "transaction.boundary.interval.ms": "300"}))
        wait_for(lambda: high_watermark(cluster.bootstrap, topic) >= 600, 60, 0.05, "600 records written",
                 first.log_text)
        first.kill()
        written = high_watermark(cluster.bootstrap, topic)
        (second,) = cluster.start(1)
        found = wait_for(lambda: s if len(s := seqs(cluster.bootstrap, topic)) >= 4000 else None, 120, 0.5,
                         "4000 committed records", second.log_text)
        assert found == list(range(4000)), (len(found), len(set(found)))
        aborted = len(seqs(cluster.bootstrap, topic, "read_uncommitted")) - 4000
        print(f"of {written} records written by the killed task, {aborted} were in its open transaction (aborted)")


# -- a batch the target refuses --------------------------------------------------------------------------------


def test_a_refused_batch_fails_the_task_whatever_errors_tolerance_says(eos: tuple[Cluster, WorkerProcess]) -> None:
    """Records too big for the topic's max.message.bytes: at least once, errors.tolerance=all would skip them;
    exactly once, producing is never tolerated (as in Kafka): the task fails saying which batch was refused, and
    nothing of its transaction is committed."""
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster, worker = eos
    topic, name = unique("eos-refused"), unique("eos-refused")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"max.message.bytes": "300"})])[topic].result(30)
    worker.ok("PUT", f"/connectors/{name}/config", scripted(topic, count="50", batch="10", pad="100", **{
        "errors.tolerance": "all"}))
    failed = wait_for(lambda: st if (st := worker.status(name)) and st["tasks"] and st["tasks"][0][
        "state"] == "FAILED" else None, 60, 0.2, "the task FAILED", worker.log_text)
    trace = failed["tasks"][0]["trace"]
    assert f"task {name}-0: " in trace and "the open transaction is aborted and nothing of it is committed" in trace
    assert "producing a batch of 10 records (" in trace and f"to {topic}-0 failed: MessageSizeTooLarge" in trace, trace
    assert seqs(cluster.bootstrap, topic) == []
    worker.ok("DELETE", f"/connectors/{name}")
