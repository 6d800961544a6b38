"""SparkParquetSink's upsert mode through its encoded path (Debezium envelopes parsed straight into Arrow,
buckets rewritten with pyarrow) against its record path (a transform keeps the worker from handing the
task encoded batches), on the same topic through ``headwater up``: the same table, row for row."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from support.connectproc import ConnectProcess, create_topic, end_offsets, module_connect, unique
from test_spark_sink import JSON_PLAIN, JSON_SCHEMAS, change_stream, produce, sink, table_rows, wait_committed

pytestmark = pytest.mark.timeout(300)

connect = module_connect("spark-upsert-encoded")

UNAVAILABLE = "__debezium_unavailable_value"
# a transform that changes nothing: with it the worker delivers records, not the encoded form
RECORD_PATH = {"transforms": "keep", "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
               "transforms.keep.predicate": "never", "predicates": "never",
               "predicates.never.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
               "predicates.never.name": "no-such-header"}

ROW = {"type": "struct", "optional": True, "name": "shop.public.items.Value", "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "qty", "type": "int32", "optional": True}]}
ENVELOPE = {"type": "struct", "optional": False, "name": "shop.public.items.Envelope", "fields": [
    {**ROW, "field": "before"}, {**ROW, "field": "after"},
    {"field": "source", "type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source",
     "fields": [{"field": "connector", "type": "string", "optional": False},
                {"field": "db", "type": "string", "optional": False},
                {"field": "schema", "type": "string", "optional": False},
                {"field": "table", "type": "string", "optional": False},
                {"field": "lsn", "type": "int64", "optional": True},
                {"field": "txId", "type": "int64", "optional": True}]},
    {"field": "op", "type": "string", "optional": False},
    {"field": "ts_ms", "type": "int64", "optional": True}]}
KEY = {"type": "struct", "optional": False, "name": "shop.public.items.Key",
       "fields": [{"field": "id", "type": "int64", "optional": False}]}


def cdc_stream(seed: int) -> tuple[list[tuple[Any, Any]], dict[int, dict[str, Any]]]:
    """change_stream's creates, updates, deletes, tombstones and key changes, plus truncate events (no row:
    nothing changes) and, in one stretch, updates whose ``name`` is Debezium's placeholder (an unchanged
    TOAST value: the table keeps the name it had; those batches go the record path's way)."""
    stream, _ = change_stream(300, 3000, seed=seed)
    rnd = random.Random(seed)
    out: list[tuple[Any, Any]] = []
    table: dict[int, dict[str, Any]] = {}
    for i, (key, value) in enumerate(stream):
        if value is not None and value["op"] == "u" and 1500 <= i < 1800 and rnd.random() < 0.2:
            value = {**value, "after": {**value["after"], "name": UNAVAILABLE}}
        if value is not None and rnd.random() < 0.01:
            out.append((key, {**value, "op": "t", "before": None, "after": None}))
        out.append((key, value))
        if value is None or value["op"] == "d":
            table.pop(key["id"], None)
        else:
            row = dict(value["after"])
            if row["name"] == UNAVAILABLE:
                row["name"] = table[key["id"]]["name"]
            table[key["id"]] = row
    return out, table


def with_schemas(stream: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    return [({"schema": KEY, "payload": key}, None if value is None else {"schema": ENVELOPE, "payload": value})
            for key, value in stream]


def metric(connect: ConnectProcess, name: str, figure: str) -> int:
    return int(connect.call("GET", f"/connectors/{name}/tasks/0/metrics").json["metrics"][figure])


@pytest.mark.parametrize("converters", ["schemaless", "schemas"])
def test_encoded_upsert_makes_the_table_the_record_path_makes(connect: ConnectProcess, spark, tmp_path: Path,
                                                              converters: str) -> None:
    stream, expected = cdc_stream(seed=5)
    settings = JSON_PLAIN if converters == "schemaless" else JSON_SCHEMAS
    topic = unique("items")
    create_topic(connect.bootstrap, topic, 2)
    names = {"encoded": unique("lake-encoded"), "records": unique("lake-records"), "spark": unique("lake-spark")}
    upsert = {"cdc.mode": "upsert", "cdc.buckets": "4", "flush.size": "700", "rotate.schedule.interval.ms": "500",
              **settings}
    connect.create(names["encoded"], sink(tmp_path / "encoded", topic, **upsert))
    connect.create(names["records"], sink(tmp_path / "records", topic, **upsert, **RECORD_PATH))
    # the same encoded path with every bucket merged by Spark jobs instead of the task's pyarrow rewrite
    connect.create(names["spark"], sink(tmp_path / "spark", topic, **upsert, **{"lake.writer": "spark"}))
    # the stretch with placeholders on its own: the batches before and after it hold none
    stretch = [i for i, (_, v) in enumerate(stream) if v is not None and v["after"]
               and v["after"]["name"] == UNAVAILABLE]
    parts = [stream[:stretch[0]], stream[stretch[0]:stretch[-1] + 1], stream[stretch[-1] + 1:]]
    for part in parts:
        produce(connect.bootstrap, topic, with_schemas(part) if converters == "schemas" else part)
        ends = end_offsets(connect.bootstrap, topic, 2)
        for name in names.values():
            for p, end in enumerate(ends):
                wait_committed(connect, name, topic, p, end)
    encoded = metric(connect, names["encoded"], "records.encoded")
    recorded = metric(connect, names["records"], "records.encoded")
    assert metric(connect, names["spark"], "records.encoded") == encoded
    got = {path: table_rows(spark, tmp_path / path / "topics" / topic) for path in names}
    for name in names.values():
        connect.ok("DELETE", f"/connectors/{name}")
    # every batch without a placeholder took the encoded path; those with one went the record path's way
    assert len(parts[0]) + len(parts[2]) <= encoded < len(stream) and recorded == 0, (encoded, recorded)
    assert got["encoded"] == got["records"] == got["spark"]
    assert got["encoded"] == expected
