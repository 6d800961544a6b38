"""Spark source benchmark (not a test): ``format("headwater")`` reading a topic into Parquet.

Starts a broker (tests/support/brokerproc.py, temp log dir), produces N records (~100-byte JSON values,
keyed) to a 2-partition topic with aiokafka, then on a local[2] Spark session times:

- ``stream``: ``spark.readStream.format("headwater") ... .trigger(availableNow=True)`` into Parquet
  with a checkpoint, from ``start()`` until the query ends;
- ``batch-count``: ``spark.read.format("headwater") ... .count()``;
- ``batch-write``: ``spark.read.format("headwater") ... .write.parquet(...)``.

Rows/s is N divided by wall time; the Parquet output is read back and counted. The first run's
queries are the first of a new session: they also pay for Spark's one-off start-up work (Python
worker processes, class loading, JIT), several seconds whatever the source; later runs (``--repeat``,
default 2) show the source's steady rate.

    .venv/bin/python bench/spark_source.py [--records 1000000] [--value-bytes 100] [--repeat 2]
                                           [--max-offsets-per-trigger N] [--compression lz4]

``run(bootstrap, topic, spark)`` is the measuring part alone, for other benchmarks to call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def run(bootstrap: str, topic: str, spark: Any, *, max_offsets_per_trigger: int | None = None,
        work: Path | None = None) -> dict[str, Any]:
    """Time the streaming (availableNow) and batch reads of ``topic`` (every record in it) with ``spark``.

    Returns {"records": N, "<phase>": {"seconds": s, "rows_per_s": r, ...}} for the phases
    stream, batch-count and batch-write.
    """
    import headwater.spark

    headwater.spark.register(spark)
    own_work = work is None
    work = Path(tempfile.mkdtemp(prefix="hw-spark-bench-")) if work is None else work
    try:
        reader = (spark.read.format("headwater").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic))
        out: dict[str, Any] = {}

        stream = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", topic).option("startingOffsets", "earliest"))
        if max_offsets_per_trigger:
            stream = stream.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        sink = work / "stream"
        started = time.monotonic()
        query = (stream.load().writeStream.format("parquet").option("path", str(sink))
                 .option("checkpointLocation", str(work / "checkpoint")).trigger(availableNow=True).start())
        query.awaitTermination()
        took = time.monotonic() - started
        rows = spark.read.parquet(str(sink)).count()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        out["stream"] = {"seconds": took, "rows": rows, "rows_per_s": rows / took, "micro_batches": len(batches)}

        started = time.monotonic()
        rows = reader.load().count()
        took = time.monotonic() - started
        out["batch-count"] = {"seconds": took, "rows": rows, "rows_per_s": rows / took}

        started = time.monotonic()
        reader.load().write.parquet(str(work / "batch"))
        took = time.monotonic() - started
        rows = spark.read.parquet(str(work / "batch")).count()
        out["batch-write"] = {"seconds": took, "rows": rows, "rows_per_s": rows / took}
        out["records"] = rows
        return out
    finally:
        if own_work:
            shutil.rmtree(work, ignore_errors=True)


async def produce(bootstrap: str, topic: str, records: int, partitions: int, value_bytes: int,
                  compression: str | None) -> float:
    """``records`` keyed JSON records spread evenly over ``partitions``; returns records/s."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, compression_type=compression,
                                max_batch_size=1 << 20, max_request_size=8 << 20)
    await producer.start()
    filler = "x" * max(value_bytes - 60, 1)
    started = time.monotonic()
    try:
        pending = []
        n = 0
        per_batch = 2000
        while n < records:
            for partition in range(partitions):
                batch = producer.create_batch()
                for _ in range(min(per_batch, records - n)):
                    value = json.dumps({"id": n, "user": f"u{n % 977}", "amount": n % 10_000, "note": filler})
                    batch.append(key=f"key-{n}".encode(), value=value.encode(), timestamp=None)
                    n += 1
                pending.append(await producer.send_batch(batch, topic, partition=partition))
            if len(pending) >= 16:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return records / (time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--compression", choices=["gzip", "snappy", "lz4", "zstd"], default=None)
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from kafka.admin import KafkaAdminClient, NewTopic
    from support.brokerproc import BrokerProcess

    from headwater.connectors.spark.session import shared_session, stop_shared_session

    tmp = Path(tempfile.mkdtemp(prefix="hw-spark-bench-"))
    topic = "spark-bench"
    try:
        with BrokerProcess(tmp / "data", log_file=tmp / "broker.log") as broker:
            admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
            admin.create_topics([NewTopic(topic, args.partitions, 1)])
            admin.close()
            rate = asyncio.run(produce(broker.bootstrap, topic, args.records, args.partitions, args.value_bytes,
                                       args.compression))
            print(f"produced {args.records:,} records ({args.value_bytes}-byte values, {args.partitions} partitions, "
                  f"compression {args.compression or 'none'}) at {rate:,.0f} records/s")
            started = time.monotonic()
            spark = shared_session(args.master, {"spark.driver.memory": "2g"})
            print(f"Spark {spark.version} session ({args.master}) started in {time.monotonic() - started:.1f}s")
            for i in range(args.repeat):
                result = run(broker.bootstrap, topic, spark, max_offsets_per_trigger=args.max_offsets_per_trigger,
                             work=tmp / f"run{i}")
                print(f"run {i + 1} ({'first queries of the session' if i == 0 else 'warm session'}):")
                for phase in ("stream", "batch-count", "batch-write"):
                    r = result[phase]
                    extra = f", {r['micro_batches']} micro-batch(es)" if "micro_batches" in r else ""
                    print(f"  {phase:12} {r['rows']:>10,} rows in {r['seconds']:6.2f}s: {r['rows_per_s']:>10,.0f} "
                          f"rows/s{extra}")
                    if r["rows"] != args.records:
                        print(f"  !! {phase} read {r['rows']:,} rows, expected {args.records:,}")
            stop_shared_session()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
