"""The Spark lake under faults: workers SIGKILLed mid-flush (0 duplicates, 0 gaps), commits left half
published, bad input (an unwritable lake, a type conflict, a record without a key in upsert mode, a
Spark master that does not answer), and a real Spark standalone cluster."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import ConnectProcess, create_topic, end_offsets, unique, wait_for
from support.lake import mid_swap
from support.workerproc import BROKER_OVERRIDES, Cluster
from test_spark_sink import JSON_PLAIN, change_stream, produce, sink, table_rows, wait_committed

from headwater.testing.names import free_port

pytestmark = pytest.mark.timeout(300)


def flushes_started(log: str) -> int:
    return len(re.findall(r"flushing \S+ offsets", log))


def lake_ids(spark, path: Path, column: str = "id") -> list[int]:
    return [r[0] for r in spark.read.option("mergeSchema", "true").parquet(str(path)).select(column).collect()]


def published_ids(spark, path: Path) -> list[int] | None:
    """The lake's ids, sorted; None while a commit's files are still being moved into place (a failed
    task's last flush is published while the task closes, after its status already says FAILED)."""
    try:
        return sorted(lake_ids(spark, path))
    except Exception as exc:
        if mid_swap(exc):
            return None
        raise


# -- exactly once across a SIGKILL, distributed mode ---------------------------------------------------------


@pytest.fixture(scope="module")
def dist_broker(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("lake-broker")
    with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1") as proc:
        yield proc


def test_append_is_exactly_once_when_the_tasks_worker_is_killed_mid_flush(dist_broker: BrokerProcess, spark,
                                                                          tmp_path: Path) -> None:
    topic, lake, total = unique("eo"), tmp_path / "lake", 60_000
    create_topic(dist_broker.bootstrap, topic, 2)
    produce(dist_broker.bootstrap, topic, [(str(i), {"id": i, "body": f"record {i}"}) for i in range(total)])
    with Cluster(tmp_path / "cluster", dist_broker.bootstrap) as cluster:
        cluster.start(2)
        leader = cluster.leader()
        leader.ok("POST", "/connectors", {"name": "lake", "config": {
            **sink(lake, topic, **JSON_PLAIN), "tasks.max": "1", "flush.size": "3000",
            "rotate.schedule.interval.ms": "2000",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter"}}, expect=201)
        st = cluster.wait_running("lake", 1, timeout=60)
        owner = cluster.by_id(st["tasks"][0]["worker_id"])
        # Kill the task's worker right after it logs the start of its third flush: Spark is writing.
        wait_for(lambda: flushes_started(owner.log_text()) >= 3, 120, 0.01, "the third flush to start",
                 cluster.logs)
        owner.kill()
        killed_log = owner.log_text()
        committed_before = len(re.findall(r"committed \S+ offsets", killed_log))
        survivor = next(w for w in cluster.live)
        cluster.wait_running("lake", 1, timeout=60, on=[survivor])
        ends = end_offsets(dist_broker.bootstrap, topic, 2)

        def done() -> bool:
            resp = survivor.call("GET", "/connectors/lake/tasks/0/metrics")
            got = resp.json["metrics"].get("committed", {}) if resp.status == 200 else {}
            return all(got.get(f"{topic}-{p}", -1) >= ends[p] for p in range(2))

        wait_for(done, 120, 0.5, "the survivor to commit every record", cluster.logs)
        survivor_log = survivor.log_text()
    ids = lake_ids(spark, lake / "topics" / topic)
    counts = Counter(ids)
    duplicates = len(ids) - len(counts)
    gaps = sorted(set(range(total)) - set(counts))
    print(f"\nexactly once: killed the task's worker mid-flush after {committed_before} commits; "
          f"{len(ids)} rows, {len(counts)} distinct, {duplicates} duplicates, {len(gaps)} missing")
    assert committed_before >= 1
    assert "seeking to the lake's commits" in survivor_log  # the survivor started where the lake says
    assert duplicates == 0 and not gaps
    rows = {r["id"]: r["body"] for r in spark.read.parquet(str(lake / "topics" / topic)).collect()}
    assert rows == {i: f"record {i}" for i in range(total)}
    # nothing staged is left behind once the partitions were recovered
    assert not any((lake / "_headwater" / "tmp").rglob("*.parquet"))


# -- upsert across crashes ------------------------------------------------------------------------------


def test_upsert_table_is_right_after_crashes_mid_flush(spark, tmp_path: Path) -> None:
    topic, name, lake = unique("items"), unique("upsert-crash"), tmp_path / "lake"
    stream, expected = change_stream(2000, 30_000, seed=11)
    with ConnectProcess(tmp_path / "up") as proc:
        create_topic(proc.bootstrap, topic, 2)
        produce(proc.bootstrap, topic, stream)
        ends = end_offsets(proc.bootstrap, topic, 2)
        proc.create(name, sink(lake, topic, **JSON_PLAIN, **{"cdc.mode": "upsert", "cdc.buckets": "4",
                                                             "flush.size": "2500",
                                                             "rotate.schedule.interval.ms": "1000"}))
        kills = 0
        for wanted in (2, 3):
            # SIGKILL right after a flush starts: Spark is reading and merging buckets
            wait_for(lambda w=wanted: flushes_started(proc.log_text(True)) >= w,  # type: ignore[misc]
                     120, 0.01, "flushes to start",
                     lambda: proc.log_text(True)[-4000:])
            proc.restart(kill=True)
            kills += 1

        def done() -> bool:
            resp = proc.call("GET", f"/connectors/{name}/tasks/0/metrics")
            got = resp.json["metrics"].get("committed", {}) if resp.status == 200 else {}
            return all(got.get(f"{topic}-{p}", -1) >= ends[p] for p in range(2))

        wait_for(done, 120, 0.5, "every change committed", lambda: proc.log_text(True)[-4000:])
    got = table_rows(spark, lake / "topics" / topic)
    print(f"\nupsert after {kills} SIGKILLs mid-flush: {len(got)} rows, expected {len(expected)}")
    assert got == expected


# -- a commit whose publishing was cut short --------------------------------------------------------------


def test_recovery_publishes_a_half_published_commit_and_drops_uncommitted_staging(spark, tmp_path: Path) -> None:
    from headwater.connectors.spark.lake import CommitEntry, Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    staging = lake.staging("t", 0)
    committed = f"{staging}/flush1"
    spark.range(0, 10).write.parquet(f"{committed}/a")
    spark.range(10, 20).write.parquet(f"{committed}/b")
    spark.range(100, 110).write.parquet(f"{staging}/flush2/c")  # staged, never committed
    entry = CommitEntry("t", 0, 0, 20, [(f"{committed}/a", lake.path("topics/t/a")),
                                        (f"{committed}/b", lake.path("topics/t/b"))], lake.path("topics/t"))
    folder = lake.path("_headwater/log/t+0")
    lake.write_bytes(f"{folder}/{entry.next:020d}.json", entry.to_json())
    lake.rename(f"{committed}/a", lake.path("topics/t/a"))  # the crash came after the first move
    recovered = lake.recover("t", 0)
    assert recovered is not None and recovered.next == 20
    ids = sorted(r[0] for r in spark.read.parquet(lake.path("topics/t/a"), lake.path("topics/t/b")).collect())
    assert ids == list(range(20))
    assert not (tmp_path / "lake" / "_headwater" / "tmp" / "t+0").exists()
    again = lake.recover("t", 0)
    assert again is not None and again.next == 20  # recovering again changes nothing
    assert lake.recover("t", 1) is None


def test_a_commit_entry_moving_files_out_of_the_lake_is_refused(spark, tmp_path: Path) -> None:
    """An entry this sink never writes (say a FileStreamSink aimed at the lake's log) cannot carry a staged
    file out of the lake, into plugin.path or anywhere: recovery fails naming the move, and moves nothing."""
    from headwater.connectors.spark.lake import CommitEntry, Lake

    plugins = tmp_path / "plugins"
    plugins.mkdir()
    lake = Lake(spark, str(tmp_path / "lake"))
    staged = f"{lake.staging('t', 0)}/flush1/evil.py"
    lake.write_bytes(staged, b"print('imported')")
    for i, dst in enumerate([f"file:{plugins}/evil.py", lake.path("topics/../../plugins/evil.py")]):
        entry = CommitEntry("t", 0, 0, 10 + i, [(staged, dst)], lake.path("topics/t"))
        lake.write_bytes(f"{lake.path('_headwater/log/t+0')}/{entry.next:020d}.json", entry.to_json())
        with pytest.raises(OSError, match=r"outside the lake .*: refused"):
            lake.recover("t", 0)
        assert list(plugins.iterdir()) == [] and lake.exists(staged)


# -- bad input -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory):
    with ConnectProcess(tmp_path_factory.mktemp("lake-errors")) as proc:
        yield proc


def task_trace(proc: ConnectProcess, name: str, timeout: float = 90) -> str:
    st = proc.wait_state(name, "RUNNING", tasks=1, task_state="FAILED", timeout=timeout)
    return st["tasks"][0]["trace"]


def test_an_unwritable_lake_path_fails_the_task_naming_it(up: ConnectProcess, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    name, topic = unique("bad-lake"), unique("t")
    up.create(name, sink(blocker / "lake", topic, **JSON_PLAIN))
    trace = task_trace(up, name)
    assert "lake.path" in trace and "is not writable" in trace and str(blocker) in trace
    up.ok("DELETE", f"/connectors/{name}")


def test_a_type_conflict_fails_the_task_and_leaves_the_lake_as_it_was(up: ConnectProcess, spark,
                                                                      tmp_path: Path) -> None:
    name, topic, lake = unique("conflict"), unique("t"), tmp_path / "lake"
    create_topic(up.bootstrap, topic)
    produce(up.bootstrap, topic, [(None, {"id": i, "price": i * 2}) for i in range(10)])
    up.create(name, sink(lake, topic, **JSON_PLAIN, **{"flush.size": "10"}))
    wait_for(lambda: (lake / "_headwater" / "log" / f"{topic}+0").exists(), 90, 0.2, "the first commit",
             lambda: up.log_text(True)[-4000:])
    produce(up.bootstrap, topic, [(None, {"id": 10, "price": "expensive"})] +
            [(None, {"id": i, "price": i * 2}) for i in range(11, 20)])
    trace = task_trace(up, name)
    assert f"{topic}-0@10" in trace and "'price'" in trace and "int64" in trace and "string" in trace
    wait_for(lambda: published_ids(spark, lake / "topics" / topic) == list(range(10)), 60, 0.2,
             "the first flush (ids 0-9) published", lambda: str(published_ids(spark, lake / "topics" / topic)))
    assert [p.name for p in (lake / "_headwater" / "log" / f"{topic}+0").iterdir()
            if not p.name.startswith(".")] == [f"{10:020d}.json"]
    up.ok("DELETE", f"/connectors/{name}")


def test_with_tolerance_all_conflicts_and_keyless_upserts_go_to_the_dlq(up: ConnectProcess, spark,
                                                                        tmp_path: Path) -> None:
    from support.connectproc import TopicReader

    name, topic, lake, dlq = unique("dlq"), unique("t"), tmp_path / "lake", unique("dlq")
    create_topic(up.bootstrap, topic)
    items: list[tuple[Any, Any]] = [({"id": i}, {"id": i, "qty": i}) for i in range(5)]
    items.append((None, {"id": 99, "qty": 1}))  # no key
    items.append(({"id": 5}, {"id": 5, "qty": "five"}))  # type conflict
    items += [({"id": i}, {"id": i, "qty": i}) for i in range(6, 10)]
    produce(up.bootstrap, topic, items)
    up.create(name, sink(lake, topic, **JSON_PLAIN, **{
        "cdc.mode": "upsert", "flush.size": "9", "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.context.headers.enable": "true"}))
    reader = TopicReader(up.bootstrap, dlq)
    dead = reader.read(2, 60)
    assert [json.loads(m.value or b"") for m in dead] == [{"id": 99, "qty": 1}, {"id": 5, "qty": "five"}]
    reasons = [dict(m.headers).get("__connect.errors.exception.message", b"").decode() for m in dead]
    assert "no key" in reasons[0] and "'qty'" in reasons[1]
    wait_for(lambda: (lake / "topics" / topic).exists(), 60, 0.2, "the table")
    # read once every record's flush is published: a reader that lists the lake mid-publish may see some of a
    # flush's buckets and not others (docs/SPARK_LAKE.md)
    wait_committed(up, name, topic, 0, end_offsets(up.bootstrap, topic, 1)[0], timeout=60)
    assert table_rows(spark, lake / "topics" / topic) == {i: {"id": i, "qty": i} for i in range(10) if i != 5}
    assert up.status(name)["tasks"][0]["state"] == "RUNNING"
    up.ok("DELETE", f"/connectors/{name}")


def test_a_spark_master_that_does_not_answer_fails_the_task_naming_it(tmp_path: Path) -> None:
    # A process of its own: the test process's JVM already has a local session.
    port = free_port()
    with ConnectProcess(tmp_path / "up") as proc:
        name = unique("no-master")
        proc.create(name, sink(tmp_path / "lake", unique("t"), **JSON_PLAIN,
                               **{"spark.master": f"spark://127.0.0.1:{port}"}))
        trace = task_trace(proc, name, timeout=60)  # at once, not after Spark's minute of registration retries
    assert f"spark.master=spark://127.0.0.1:{port}" in trace and "no master accepts a connection" in trace


# -- a real Spark standalone cluster ---------------------------------------------------------------------


def spark_class(*args: str, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    import pyspark

    script = Path(pyspark.__file__).parent / "bin" / "spark-class"
    return subprocess.Popen([str(script), *args], stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def test_the_sink_writes_through_a_spark_standalone_cluster(spark, tmp_path: Path) -> None:
    master_port, worker_port = free_port(), free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_HOME": str(Path(sys.executable).parent.parent),
           "PYSPARK_PYTHON": sys.executable}
    import pyspark

    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    master = spark_class("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(master_port),
                         "--webui-port", "0", log=tmp_path / "master.log", env=env)
    worker = None
    try:
        url = f"spark://127.0.0.1:{master_port}"
        wait_for(lambda: "I have been elected leader" in (tmp_path / "master.log").read_text(errors="replace"),
                 60, 0.2, "the Spark master", lambda: (tmp_path / "master.log").read_text(errors="replace"))
        worker = spark_class("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--port",
                             str(worker_port), "--webui-port", "0", "--cores", "2", "--memory", "1g",
                             "--work-dir", str(tmp_path / "work"), url, log=tmp_path / "worker.log", env=env)
        wait_for(lambda: "Successfully registered with master" in (tmp_path / "worker.log").read_text(
            errors="replace"), 60, 0.2, "the Spark worker", lambda: (tmp_path / "worker.log").read_text(
            errors="replace"))
        topic, name, lake = unique("clustered"), unique("lake-cluster"), tmp_path / "lake"
        with ConnectProcess(tmp_path / "up") as proc:
            create_topic(proc.bootstrap, topic)
            produce(proc.bootstrap, topic, [(None, {"id": i, "v": f"v{i}"}) for i in range(5000)])
            proc.create(name, sink(lake, topic, **JSON_PLAIN, **{
                "spark.master": url, "flush.size": "2500", "spark.conf.spark.executor.memory": "512m",
                "spark.conf.spark.cores.max": "2"}))

            def done() -> bool:
                resp = proc.call("GET", f"/connectors/{name}/tasks/0/metrics")
                return resp.status == 200 and resp.json["metrics"].get("committed", {}).get(f"{topic}-0") == 5000

            wait_for(done, 180, 0.5, "the records committed through the cluster", lambda: proc.log_text(True)[-4000:])
        assert sorted(lake_ids(spark, lake / "topics" / topic)) == list(range(5000))
        # the executor (on the Spark worker) ran the write, not a local session
        work = tmp_path / "work"
        assert any(work.rglob("stderr")), "no executor ran on the standalone worker"
        assert "headwater-spark" in (tmp_path / "master.log").read_text(errors="replace")
    finally:
        for p in (worker, master):
            if p is not None:
                os.killpg(p.pid, 9)
                p.wait(10)
        shutil.rmtree(tmp_path / "work", ignore_errors=True)
        time.sleep(0)


def test_shipped_spark_configs_validate(up: ConnectProcess) -> None:
    """configs/spark/*.json pass PUT /connector-plugins/{plugin}/config/validate with no error."""
    for path in sorted((Path(__file__).resolve().parents[2] / "configs" / "spark").glob("*.json")):
        body = json.loads(path.read_text())
        config = {**body["config"], "name": body["name"]}
        result = up.ok("PUT", f"/connector-plugins/{config['connector.class']}/config/validate", config, expect=200)
        errors = {c["value"]["name"]: c["value"]["errors"] for c in result["configs"] if c["value"]["errors"]}
        assert result["error_count"] == 0, f"{path.name}: {errors}"


def test_bad_sink_settings_are_refused_naming_the_key(up: ConnectProcess, tmp_path: Path) -> None:
    cases = {"partitioner.class": ("NoSuchPartitioner", "unknown partitioner"),
             "cdc.mode": ("merge", "cdc.mode"), "parquet.codec": ("lzo2", "unknown codec"),
             "timezone": ("Mars/Olympus", "unknown time zone"), "flush.size": ("0", "flush.size")}
    for key, (value, words) in cases.items():
        resp = up.call("POST", "/connectors", {"name": unique("bad"), "config": {
            **sink(tmp_path / "lake", "t", **JSON_PLAIN), key: value}})
        assert resp.status == 400 and key in resp.body.decode() and words in resp.body.decode(), (key, resp.body)
    resp = up.call("POST", "/connectors", {"name": unique("bad"), "config": {
        **sink(tmp_path / "lake", "t", **JSON_PLAIN), "partitioner.class": "TimeBasedPartitioner"}})
    assert resp.status == 400 and "path.format" in resp.body.decode()
