"""Spark lake benchmark (prints figures; not a test).

1. **append**: N JSON records with schemas (10 fields) in a 2-partition topic -> SparkParquetSink
   (``headwater up``: broker and worker in one process, Spark's JVM beside it) -> Parquet. Timed from
   the connector's creation until the lake's commit log covers every record (the task's metrics).
   Side by side, in this process, a **direct Spark write of the same rows**: the rows as a pyarrow
   table -> ``createDataFrame`` -> ``write.parquet`` (the cost of Spark alone, no Kafka, no JSON).
2. **upsert**: M Debezium-shaped changes (schemaless JSON) over K keys -> ``cdc.mode=upsert``;
   rows/s and the final table's row count checked against the expected one.
3. **Spark source**: ``readStream.format("headwater") ... trigger(availableNow=True)`` of the append
   topic into Parquet (bench/spark_source.py's ``run``).

    .venv/bin/python bench/lake_sink.py                    # 1M records, 1M changes over 100k keys
    .venv/bin/python bench/lake_sink.py --records 200000 --changes 200000 --keys 20000
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from support.connectproc import ConnectProcess, create_topic, end_offsets, unique  # noqa: E402

SCHEMA = {"type": "struct", "name": "bench.Value", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "city", "type": "string", "optional": True},
    {"field": "amount", "type": "double", "optional": True},
    {"field": "qty", "type": "int32", "optional": True},
    {"field": "paid", "type": "boolean", "optional": True},
    {"field": "score", "type": "float", "optional": True},
    {"field": "note", "type": "string", "optional": True},
    {"field": "ts", "type": "int64", "optional": True},
    {"field": "code", "type": "string", "optional": True},
]}


def row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"name-{i}", "city": f"city-{i % 500}", "amount": i * 0.5, "qty": i % 1000,
            "paid": i % 2 == 0, "score": float(i % 100), "note": "n" * 20, "ts": 1_767_225_600_000 + i,
            "code": f"C{i % 37:03d}"}


def produce(bootstrap: str, topic: str, items: Any) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 2_000_000, "compression.type": "lz4"})
    for key, value in items:
        while True:
            try:
                p.produce(topic, key=key, value=value)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def wait_committed(up: ConnectProcess, name: str, topic: str, targets: list[int], timeout: float = 1800) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = up.call("GET", f"/connectors/{name}/tasks/0/metrics")
        got = resp.json["metrics"].get("committed", {}) if resp.status == 200 else {}
        if all(got.get(f"{topic}-{p}", -1) >= end for p, end in enumerate(targets)):
            return time.monotonic()
        time.sleep(0.05)
    raise TimeoutError(f"{name} did not commit {targets}: {up.log_text(True)[-3000:]}")


SCHEDULE_MS = 500


def machine_cpu() -> tuple[float, float]:
    """(busy, all) CPU seconds of the machine since boot, summed over its cores."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / 100, sum(fields) / 100


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants (the worker and its Spark JVM)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / 100
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, p in parents.items():
            if p == parent and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(times.get(p, 0.0) for p in tree)


class Meter:
    """The machine's load while a phase runs: the worker's CPU seconds, and everything else's."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.busy, self.all = machine_cpu()
        self.worker = tree_cpu(pid)

    def read(self) -> dict[str, float]:
        busy, all_ = machine_cpu()
        worker = tree_cpu(self.pid) - self.worker
        return {"worker_cpu_s": round(worker, 1), "other_cpu_s": round(busy - self.busy - worker, 1),
                "machine_busy": round((busy - self.busy) / max(all_ - self.all, 1e-9), 2),
                "load1": round(os.getloadavg()[0], 2)}


def sink_config(lake: Path, topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": "SparkParquetSink", "topics": topic, "lake.path": str(lake),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter", "consumer.override.max.poll.records":
            "20000", "offset.flush.interval.ms": "500", "rotate.schedule.interval.ms": str(SCHEDULE_MS), **extra}


def timeline(up: ConnectProcess, name: str, started_wall: float) -> str:
    """When the task's first flush started and its last commit ended, from its log lines."""
    import datetime as dt
    import re

    stamps = [dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
              for m in re.finditer(rf"^(\S+ \S+) INFO \S+: {re.escape(name)}: (?:flushing|committed)",
                                   up.log_text(True), re.M)]
    if not stamps:
        return "no flush logged"
    first, last = stamps[0] - started_wall, stamps[-1] - started_wall
    return f"first flush {first:.1f}s after creation, last commit at {last:.1f}s"


def warm_up(up: ConnectProcess, topic: str, lake: Path, **extra: str) -> None:
    """A small connector that starts the worker's Spark session before the clock runs."""
    warm = unique("warm")
    up.create(warm, sink_config(lake, topic, **{"flush.size": "1000", "consumer.override.max.poll.records": "1000",
                                                **extra}))
    wait_committed(up, warm, topic, [1, 1])
    up.ok("DELETE", f"/connectors/{warm}")


def direct_write(spark: Any, records: int, out: Path) -> float:
    import pyarrow as pa

    rows = [row(i) for i in range(records)]
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("id", pa.int64()), ("name", pa.string()), ("city", pa.string()), ("amount", pa.float64()),
        ("qty", pa.int32()), ("paid", pa.bool_()), ("score", pa.float32()), ("note", pa.string()),
        ("ts", pa.timestamp("ms", tz="UTC")), ("code", pa.string())]))
    spark.createDataFrame(table.slice(0, 1000)).write.mode("overwrite").parquet(str(out / "warm"))  # warm up
    started = time.monotonic()
    spark.createDataFrame(table).write.mode("overwrite").parquet(str(out / "direct"))
    return time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--changes", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--flush-size", type=int, default=100_000)
    ap.add_argument("--schedule-ms", type=int, default=500,
                    help="rotate.schedule.interval.ms: commits the last partial buffer of each partition")
    ap.add_argument("--defaults", action="store_true",
                    help="append with the connector's and the worker's defaults (no flush.size, rotation or poll size)")
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (logs, lake)")
    ap.add_argument("--skip", default="", help="comma list of phases to skip: append,upsert,source")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    global SCHEDULE_MS
    SCHEDULE_MS = args.schedule_ms
    base = Path(tempfile.mkdtemp(prefix="hw-lake-bench-"))
    from headwater.connectors.spark.session import shared_session

    spark = shared_session("local[2]", {"spark.driver.memory": "2g"})
    results: dict[str, Any] = {}
    try:
        with ConnectProcess(base / "up") as up:
            topic = unique("lake")
            create_topic(up.bootstrap, topic, 2)
            if "append" not in skip:
                t0 = time.monotonic()
                produce(up.bootstrap, topic, ((str(i).encode(), json.dumps({"schema": SCHEMA, "payload": row(i)})
                                               .encode()) for i in range(args.records)))
                print(f"produced {args.records:,} records in {time.monotonic() - t0:.1f}s", flush=True)
                targets = end_offsets(up.bootstrap, topic, 2)
                warm_up(up, topic, base / "warm-lake")
                name = unique("append")
                assert up.proc is not None
                meter = Meter(up.proc.pid)
                started, started_wall = time.monotonic(), time.time()
                if args.defaults:
                    config = {"connector.class": "SparkParquetSink", "topics": topic, "lake.path": str(base / "lake"),
                              "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                              "value.converter": "org.apache.kafka.connect.json.JsonConverter"}
                else:
                    config = sink_config(base / "lake", topic, **{"flush.size": str(args.flush_size)})
                up.create(name, config)
                elapsed = wait_committed(up, name, topic, targets) - started
                load = meter.read()
                print(f"append: {timeline(up, name, started_wall)}; {load}", flush=True)
                rate = args.records / elapsed
                direct = direct_write(spark, args.records, base)
                direct_rate = args.records / direct
                count = spark.read.parquet(str(base / "lake" / "topics" / topic)).count()
                results["append"] = {"rows": count, "seconds": round(elapsed, 2), "rows_per_s": round(rate),
                                     "direct_seconds": round(direct, 2), "direct_rows_per_s": round(direct_rate),
                                     "ratio": round(rate / direct_rate, 2), **load}
                print(f"append: {count:,} rows in {elapsed:.1f}s = {rate:,.0f} rows/s; direct Spark write "
                      f"{direct:.1f}s = {direct_rate:,.0f} rows/s; ratio {rate / direct_rate:.2f}", flush=True)
                up.ok("DELETE", f"/connectors/{name}")
            if "upsert" not in skip:
                ctopic = unique("changes")
                create_topic(up.bootstrap, ctopic, 2)
                rnd = random.Random(3)
                lsn = 0

                def changes() -> Any:
                    nonlocal lsn
                    for i in range(args.changes):
                        k = i if i < args.keys else rnd.randrange(args.keys)
                        lsn += 1
                        after = {"id": k, "name": f"item{k}", "qty": i, "price": i * 0.25}
                        value = {"before": None, "after": after, "op": "c" if i < args.keys else "u",
                                 "ts_ms": lsn, "source": {"lsn": lsn, "table": "items"}}
                        yield json.dumps({"id": k}).encode(), json.dumps(value).encode()

                produce(up.bootstrap, ctopic, changes())
                targets = end_offsets(up.bootstrap, ctopic, 2)
                upsert = {"cdc.mode": "upsert", "cdc.buckets": "8",
                          "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                          "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}
                if "append" in skip:
                    warm_up(up, ctopic, base / "warm-ulake", **upsert)
                name = unique("upsert")
                assert up.proc is not None
                meter = Meter(up.proc.pid)
                started = time.monotonic()
                up.create(name, sink_config(base / "ulake", ctopic, **{"flush.size": str(args.flush_size), **upsert}))
                print(f"upsert: {name} created (headwater up pid {up.proc.pid})", flush=True)
                elapsed = wait_committed(up, name, ctopic, targets) - started
                load = meter.read()
                table = str(base / "ulake" / "topics" / ctopic)
                count = spark.read.option("mergeSchema", "true").parquet(table).count()
                results["upsert"] = {"changes": args.changes, "keys": args.keys, "table_rows": count,
                                     "seconds": round(elapsed, 2), "changes_per_s": round(args.changes / elapsed),
                                     **load}
                print(f"upsert: {args.changes:,} changes over {args.keys:,} keys in {elapsed:.1f}s = "
                      f"{args.changes / elapsed:,.0f} changes/s; table has {count:,} rows; {load}", flush=True)
                assert count == args.keys, f"the table has {count} rows, expected {args.keys}"
            if "source" not in skip:
                import spark_source

                import headwater.spark

                headwater.spark.register(spark)
                results["source"] = spark_source.run(up.bootstrap, topic, spark)
                print(f"spark source: {results['source']}", flush=True)
    finally:
        spark.stop()
        if args.keep:
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
