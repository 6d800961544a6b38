"""SparkParquetSink through ``headwater up``: the real broker and worker, Spark in the worker process,
the lake read back with the test's own Spark session (``spark`` fixture)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from support.connectproc import ConnectProcess, create_topic, end_offsets, module_connect, unique, wait_for

pytestmark = pytest.mark.timeout(300)

connect = module_connect("spark-sink")

JSON_SCHEMAS = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "true",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "true"}
JSON_PLAIN = {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}

ORDER_SCHEMA = {"type": "struct", "name": "orders.Value", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "customer", "type": "string", "optional": True},
    {"field": "amount", "type": "double", "optional": True},
    {"field": "paid", "type": "boolean", "optional": True},
    {"field": "ts", "type": "int64", "optional": False, "name": "org.apache.kafka.connect.data.Timestamp",
     "version": 1},
]}
BASE_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def order(i: int) -> dict[str, Any]:
    return {"id": i, "customer": f"c{i % 97}", "amount": round(i * 1.25, 2), "paid": i % 3 == 0,
            "ts": BASE_MS + i * 60_000}


def _utc(t: dt.datetime) -> dt.datetime:
    """Spark hands timestamps back in the session's zone (UTC here), naive."""
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def produce(bootstrap: str, topic: str, items: list[tuple[Any, Any]], partition: int | None = None,
            timestamps: list[int] | None = None) -> None:
    """(key, value) JSON documents (None: a null key or a tombstone), acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                         "queue.buffering.max.messages": 1_000_000})
    for i, (key, value) in enumerate(items):
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamps is not None:
            kwargs["timestamp"] = timestamps[i]
        while True:
            try:
                producer.produce(topic, key=None if key is None else json.dumps(key).encode(),
                                 value=None if value is None else json.dumps(value).encode(), **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(60) == 0


def with_schema(schema: dict[str, Any], payload: Any) -> dict[str, Any]:
    return {"schema": schema, "payload": payload}


def sink(lake: Path, topics: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "SparkParquetSink", "topics": topics, "lake.path": str(lake),
            "flush.size": "1000", "offset.flush.interval.ms": "1000", **JSON_SCHEMAS, **extra}


def lake_rows(spark, path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    df = spark.read.option("mergeSchema", "true").parquet(str(path))
    if columns:
        df = df.select(*columns)
    return [r.asDict(recursive=True) for r in df.collect()]


def committed(connect: ConnectProcess, name: str) -> dict[str, int]:
    resp = connect.call("GET", f"/connectors/{name}/tasks/0/metrics")
    return resp.json["metrics"].get("committed", {}) if resp.status == 200 else {}


def wait_committed(connect: ConnectProcess, name: str, topic: str, partition: int, offset: int,
                   timeout: float = 120) -> None:
    wait_for(lambda: committed(connect, name).get(f"{topic}-{partition}", -1) >= offset, timeout, 0.5,
             f"{name} to commit {topic}-{partition} up to {offset}", lambda: connect.log_text(True)[-5000:])


def test_append_100k_records_with_schemas_equal_the_parquet(connect: ConnectProcess, spark, tmp_path: Path) -> None:
    topic, name, lake = unique("orders"), unique("lake-append"), tmp_path / "lake"
    create_topic(connect.bootstrap, topic)
    count = 100_000
    produce(connect.bootstrap, topic, [({"id": i}, with_schema(ORDER_SCHEMA, order(i))) for i in range(count)])
    connect.create(name, sink(lake, topic, **{"flush.size": "25000", "rotate.schedule.interval.ms": "-1",
                                              "key.converter.schemas.enable": "false"}))
    connect.wait_state(name, "RUNNING", tasks=1, timeout=60)
    wait_committed(connect, name, topic, 0, count)

    folder = lake / "topics" / topic / "partition=0"
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".parquet"))
    assert files == [f"{topic}+0+{a:010d}+{a + 24_999:010d}.snappy.parquet" for a in range(0, count, 25_000)]
    rows = lake_rows(spark, lake / "topics" / topic, ["id", "customer", "amount", "paid", "ts", "partition"])
    assert len(rows) == count
    got = sorted((r["id"], r["customer"], r["amount"], r["paid"], _utc(r["ts"]), r["partition"]) for r in rows)
    expected = [(o["id"], o["customer"], o["amount"], o["paid"], dt.datetime.fromtimestamp(o["ts"] / 1000, dt.UTC), 0)
                for o in map(order, range(count))]
    assert got == expected  # every record, field for field
    schema = {f.name: f.dataType.simpleString() for f in spark.read.parquet(str(folder)).schema.fields}
    assert schema == {"id": "bigint", "customer": "string", "amount": "double", "paid": "boolean", "ts": "timestamp"}
    # the consumer group follows the lake
    wait_for(lambda: connect.ok("GET", f"/connectors/{name}/offsets")["offsets"][0]["offset"]["kafka_offset"]
             == count, 30, 0.5, "the group offset to reach the lake's")
    connect.ok("DELETE", f"/connectors/{name}")


def test_append_files_written_by_spark_and_by_the_task_are_the_same(connect: ConnectProcess, spark,
                                                                    tmp_path: Path) -> None:
    """``lake.writer=spark`` (a Spark job per flush) and the default (the task writes a local lake's files with
    pyarrow) give the same file names, rows and column types."""
    topic, count = unique("orders"), 6_000
    create_topic(connect.bootstrap, topic)
    produce(connect.bootstrap, topic, [({"id": i}, with_schema(ORDER_SCHEMA, order(i))) for i in range(count)])
    names = {"spark": unique("lake-spark"), "auto": unique("lake-auto")}
    for writer, name in names.items():
        connect.create(name, sink(tmp_path / writer, topic, **{"flush.size": "2000", "lake.writer": writer,
                                                               "rotate.schedule.interval.ms": "-1",
                                                               "key.converter.schemas.enable": "false"}))
    for name in names.values():
        wait_committed(connect, name, topic, 0, count)
    seen = {}
    for writer in names:
        folder = tmp_path / writer / "topics" / topic / "partition=0"
        files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".parquet"))
        schema = {f.name: f.dataType.simpleString() for f in spark.read.parquet(str(folder)).schema.fields}
        rows = sorted((r["id"], r["customer"], r["amount"], r["paid"], _utc(r["ts"]))
                      for r in lake_rows(spark, tmp_path / writer / "topics" / topic))
        seen[writer] = (files, schema, rows)
    for name in names.values():
        connect.ok("DELETE", f"/connectors/{name}")
    assert seen["spark"][0] == [f"{topic}+0+{a:010d}+{a + 1_999:010d}.snappy.parquet" for a in range(0, count, 2_000)]
    assert seen["auto"] == seen["spark"]
    assert len(seen["auto"][2]) == count


def test_time_based_partitioner_writes_hourly_folders_by_record_field(connect: ConnectProcess, spark,
                                                                     tmp_path: Path) -> None:
    topic, name, lake = unique("events"), unique("lake-time"), tmp_path / "lake"
    create_topic(connect.bootstrap, topic)
    # 300 records one minute apart: five hours of data
    produce(connect.bootstrap, topic, [(None, order(i)) for i in range(300)])
    connect.create(name, sink(lake, topic, **JSON_PLAIN, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH", "partition.duration.ms": "3600000",
        "locale": "en-US", "timezone": "UTC", "timestamp.extractor": "RecordField", "timestamp.field": "ts",
        "flush.size": "300", "topics.dir": "raw"}))
    wait_committed(connect, name, topic, 0, 300)
    base = lake / "raw" / topic / "year=2026" / "month=01" / "day=01"
    hours = sorted(p.name for p in base.iterdir())
    assert hours == ["hour=00", "hour=01", "hour=02", "hour=03", "hour=04"]
    for h, folder in enumerate(hours):
        files = [p.name for p in (base / folder).iterdir() if p.name.endswith(".parquet")]
        assert files == [f"{topic}+0+{h * 60:010d}+{h * 60 + 59:010d}.snappy.parquet"]
    rows = lake_rows(spark, lake / "raw" / topic)
    assert sorted(r["id"] for r in rows) == list(range(300))
    assert {r["hour"] for r in rows if r["id"] == 61} == {1}
    connect.ok("DELETE", f"/connectors/{name}")


def test_schemaless_json_is_inferred_and_new_fields_merge(connect: ConnectProcess, spark, tmp_path: Path) -> None:
    topic, name, lake = unique("plain"), unique("lake-plain"), tmp_path / "lake"
    create_topic(connect.bootstrap, topic)
    first = [(None, {"id": i, "name": f"n{i}"}) for i in range(10)]
    later = [(None, {"id": i, "name": f"n{i}", "score": i / 2, "tags": ["a", "b"]}) for i in range(10, 20)]
    produce(connect.bootstrap, topic, first)
    connect.create(name, sink(lake, topic, **JSON_PLAIN, **{"flush.size": "10",
                                                          "partitioner.class": "FieldPartitioner",
                                                          "partition.field.name": "name"}))
    wait_committed(connect, name, topic, 0, 10)
    produce(connect.bootstrap, topic, later)
    wait_committed(connect, name, topic, 0, 20)
    rows = {r["id"]: r for r in lake_rows(spark, lake / "topics" / topic)}
    assert sorted(rows) == list(range(20))
    assert rows[3]["score"] is None and rows[3]["name"] == "n3"
    assert rows[15]["score"] == 7.5 and rows[15]["tags"] == ["a", "b"]
    assert (lake / "topics" / topic / "name=n15" / f"{topic}+0+0000000015+0000000015.snappy.parquet").exists()
    connect.ok("DELETE", f"/connectors/{name}")


def test_scheduled_rotation_commits_a_trickle(connect: ConnectProcess, spark, tmp_path: Path) -> None:
    topic, name, lake = unique("trickle"), unique("lake-sched"), tmp_path / "lake"
    create_topic(connect.bootstrap, topic)
    connect.create(name, sink(lake, topic, **JSON_PLAIN, **{"flush.size": "100000",
                                                          "rotate.schedule.interval.ms": "2000"}))
    connect.wait_state(name, "RUNNING", tasks=1, timeout=60)
    produce(connect.bootstrap, topic, [(None, {"n": i}) for i in range(5)])
    wait_committed(connect, name, topic, 0, 5, timeout=60)  # five records never reach flush.size: only the schedule
    assert sorted(r["n"] for r in lake_rows(spark, lake / "topics" / topic)) == list(range(5))
    connect.ok("DELETE", f"/connectors/{name}")


def test_scheduled_rotation_commits_without_new_records_or_an_offset_commit(spark, tmp_path: Path) -> None:
    """The worker calls put only when records come and commits offsets every offset.flush.interval.ms (60 s
    here, Kafka's default): the rotation that is due must wait for neither."""
    topic, name, lake = unique("quiet"), unique("lake-quiet"), tmp_path / "lake"
    with ConnectProcess(tmp_path / "up", settings={"offset.flush.interval.ms": "60000"}) as proc:
        create_topic(proc.bootstrap, topic)
        proc.create(name, sink(lake, topic, **JSON_PLAIN, **{"flush.size": "100000",
                                                            "rotate.schedule.interval.ms": "1000"}))
        proc.wait_state(name, "RUNNING", tasks=1, timeout=60)
        produce(proc.bootstrap, topic, [(None, {"n": i}) for i in range(5)])
        wait_committed(proc, name, topic, 0, 5, timeout=30)
    assert sorted(r["n"] for r in lake_rows(spark, lake / "topics" / topic)) == list(range(5))


# -- upsert: changes merged into the current-state table ---------------------------------------------------


def change_stream(keys: int, changes: int, seed: int = 7) -> tuple[list[tuple[Any, Any]], dict[int, dict[str, Any]]]:
    """Debezium-shaped changes (schemaless JSON) over ``keys`` ids: creates, updates, deletes (with their
    tombstones) and primary-key changes (delete + tombstone + create); and the table they leave."""
    import random

    rnd = random.Random(seed)
    table: dict[int, dict[str, Any]] = {}
    out: list[tuple[Any, Any]] = []
    lsn = 1000
    next_id = keys

    def event(op: str, before: Any, after: Any) -> dict[str, Any]:
        nonlocal lsn
        lsn += 8
        return {"before": before, "after": after, "op": op, "ts_ms": 1_767_225_600_000 + lsn,
                "source": {"connector": "postgresql", "db": "shop", "schema": "public", "table": "items",
                           "lsn": lsn, "txId": lsn // 8}}

    for i in range(keys):
        row = {"id": i, "name": f"item{i}", "qty": 0}
        table[i] = row
        out.append(({"id": i}, event("r", None, row)))
    while len(out) < changes:
        roll = rnd.random()
        if not table or roll < 0.1:
            row = {"id": next_id, "name": f"item{next_id}", "qty": 1}
            table[next_id] = row
            out.append(({"id": next_id}, event("c", None, row)))
            next_id += 1
            continue
        k = rnd.choice(list(table))
        old = table[k]
        if roll < 0.75:
            row = {**old, "qty": old["qty"] + rnd.randint(1, 9), "name": f"item{k}-v{len(out)}"}
            table[k] = row
            out.append(({"id": k}, event("u", old, row)))
        elif roll < 0.9:
            del table[k]
            out.append(({"id": k}, event("d", old, None)))
            out.append(({"id": k}, None))
        else:  # the primary key changes: Debezium's delete + tombstone + create
            new_id = next_id
            next_id += 1
            del table[k]
            row = {**old, "id": new_id}
            table[new_id] = row
            out.append(({"id": k}, event("d", old, None)))
            out.append(({"id": k}, None))
            out.append(({"id": new_id}, event("c", None, row)))
    return out, table


def table_rows(spark, path: Path) -> dict[int, dict[str, Any]]:
    df = spark.read.option("mergeSchema", "true").parquet(str(path)).drop("_bucket")
    rows = [r.asDict() for r in df.collect()]
    by_id = {r["id"]: r for r in rows}
    assert len(by_id) == len(rows), "a key appears twice in the table"
    return by_id


def test_upsert_merges_creates_updates_deletes_and_key_changes(connect: ConnectProcess, spark,
                                                              tmp_path: Path) -> None:
    topic, name, lake = unique("items"), unique("lake-upsert"), tmp_path / "lake"
    create_topic(connect.bootstrap, topic, 2)
    stream, expected = change_stream(300, 3000)
    produce(connect.bootstrap, topic, stream)
    connect.create(name, sink(lake, topic, **JSON_PLAIN, **{
        "cdc.mode": "upsert", "cdc.buckets": "4", "flush.size": "400", "rotate.schedule.interval.ms": "1000",
        "table.name.format": "shop_${topic}"}))
    ends = {p: n for p, n in enumerate(end_offsets(connect.bootstrap, topic, 2))}
    for p, end in ends.items():
        wait_committed(connect, name, topic, p, end)
    table = lake / "topics" / f"shop_{topic}"
    got = table_rows(spark, table)
    assert got == expected
    buckets = sorted(int(p.name.split("=")[1]) for p in table.iterdir() if p.name.startswith("_bucket="))
    assert set(buckets) <= set(range(8)) and len(buckets) >= 6  # 2 partitions x 4 buckets
    connect.ok("DELETE", f"/connectors/{name}")


def test_rotate_interval_by_record_time_daily_folders_and_zstd(connect: ConnectProcess, spark, tmp_path: Path) -> None:
    topic, name, lake = unique("ticks"), unique("lake-rotate"), tmp_path / "lake"
    create_topic(connect.bootstrap, topic)
    # 30 records one minute apart (Kafka timestamps), then one a day later
    stamps = [BASE_MS + i * 60_000 for i in range(30)] + [BASE_MS + 86_400_000]
    produce(connect.bootstrap, topic, [(None, {"n": i}) for i in range(31)], timestamps=stamps)
    connect.create(name, sink(lake, topic, **JSON_PLAIN, **{
        "partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner",
        "timestamp.extractor": "Record", "rotate.interval.ms": "600000", "flush.size": "1000",
        "parquet.codec": "zstd", "rotate.schedule.interval.ms": "3000"}))
    wait_committed(connect, name, topic, 0, 31)
    day1 = lake / "topics" / topic / "year=2026" / "month=01" / "day=01"
    day2 = lake / "topics" / topic / "year=2026" / "month=01" / "day=02"
    # a record 10 minutes past the file's first one starts the next file
    assert sorted(p.name for p in day1.iterdir() if p.name.endswith(".parquet")) == [
        f"{topic}+0+{a:010d}+{a + 9:010d}.zstd.parquet" for a in (0, 10, 20)]
    assert [p.name for p in day2.iterdir() if p.name.endswith(".parquet")] == [
        f"{topic}+0+{30:010d}+{30:010d}.zstd.parquet"]
    assert sorted(r["n"] for r in lake_rows(spark, lake / "topics" / topic)) == list(range(31))
    connect.ok("DELETE", f"/connectors/{name}")


def test_a_worker_stopping_leaves_a_pinned_session_running(spark) -> None:
    """The test session's Spark session is pinned: the hook every worker of the process calls when it stops
    (an in-process worker of the plugin kit, say) must leave it running for the tests after it."""
    from headwater.connectors.spark import headwater_worker_stopped

    headwater_worker_stopped()
    assert spark.range(3).count() == 3
