"""``format("headwater")``: Spark batch and streaming reads of topics on a real broker (local[2] session).

- readStream with trigger(availableNow=True) and maxOffsetsPerTrigger into Parquet: several
  micro-batches, every record with Spark's Kafka columns; a restart from the checkpoint reads only
  what was produced since;
- batch reads: per-partition JSON offsets (-2/-1 included) read exactly that range; earliest/latest;
  minPartitions splits ranges without changing the rows; an empty topic; LogAppendTime;
- subscribePattern picks up a new topic and a new partition in later micro-batches of a running
  query; assign reads only the partitions named;
- records deleted below the asked start are data loss (an error naming failOnDataLoss), skipped
  with failOnDataLoss=false;
- with real transactional producers, read_committed reads only committed records and stops at an open
  transaction, read_uncommitted reads them all, and markers (control batches) are gaps; the decoding
  rules for aborted transactions also on fetched bytes built with the codec;
- bad options fail with errors that name the option.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewPartitions
from support.txnmix import write_interleaved

import headwater.spark
from headwater.kafka.records import ATTR_CONTROL, ATTR_TRANSACTIONAL, Record, build_batch
from headwater.spark.decode import Columns, decode_fetched
from headwater.testing.names import unique

T0 = 1_700_000_000_000  # record timestamps, ms
COLUMNS = "topic, partition, offset, key, value, unix_millis(timestamp) AS ts, timestampType"


@pytest.fixture(scope="module")
def hw(spark):
    headwater.spark.register(spark)
    return spark


def create(bootstrap: str, topic: str, partitions: int, configs: dict[str, str] | None = None) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
    try:
        res = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1,
                                           "configs": configs or {}}})
        assert [t["error_code"] for t in res["topics"]] == [0], res
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, numbers: range, partitions: int, codec: str | None = None,
            partition_of=None) -> list[tuple]:
    """Records ``numbers`` (key None for every 10th, headers on every 3rd); returns the rows Spark
    should give for them: (topic, partition, offset, key, value, ts ms, timestampType, headers)."""
    prod = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=5, acks="all")
    try:
        sent = []
        for i in numbers:
            key = None if i % 10 == 0 else f"key-{i}".encode()
            value = json.dumps({"n": i, "pad": "x" * (i % 50)}).encode()
            headers = [("n", str(i).encode()), ("src", b"test")] if i % 3 == 0 else []
            partition = partition_of(i) if partition_of else i % partitions
            future = prod.send(topic, key=key, value=value, headers=headers, partition=partition,
                               timestamp_ms=T0 + i)
            sent.append((future, key, value, T0 + i, tuple(headers)))
        prod.flush(30)
        rows = []
        for future, key, value, ts, sent_headers in sent:
            meta = future.get(30)
            rows.append((topic, meta.partition, meta.offset, key, value, ts, 0, sent_headers))
        return sorted(rows)
    finally:
        prod.close(10)


def as_rows(df, headers: bool = True) -> list[tuple]:
    cols = COLUMNS + (", headers" if headers else "")
    out = []
    for r in df.selectExpr(*cols.split(", ")).collect():
        row: tuple[Any, ...] = (r.topic, r.partition, r.offset, _bytes(r.key), _bytes(r.value), r.ts, r.timestampType)
        if headers:
            row += (tuple((h.key, _bytes(h.value)) for h in r.headers),)
        out.append(row)
    return sorted(out)


def _bytes(v) -> bytes | None:
    return None if v is None else bytes(v)


def reader(spark, bootstrap: str, **options: str):
    r = spark.read.format("headwater").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        r = r.option(k, v)
    return r


def stream_to_parquet(spark, bootstrap: str, topic: str, out: Path, checkpoint: Path):
    query = (spark.readStream.format("headwater").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true")
             .option("maxOffsetsPerTrigger", "120").load()
             .writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(60), "the availableNow query did not finish in 60 s"
    assert query.exception() is None
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


# ------------------------------------------------------------------------------------------ streaming


def test_available_now_reads_in_micro_batches_and_a_restart_reads_only_new_records(hw, broker, tmp_path) -> None:
    topic = unique("spark-stream")
    create(broker.bootstrap, topic, 3)
    first = produce(broker.bootstrap, topic, range(300), 3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    batches = stream_to_parquet(hw, broker.bootstrap, topic, out, checkpoint)
    # availableNow honours maxOffsetsPerTrigger (it is not Trigger.Once): 300 records in batches of <= 120.
    assert sum(batches) == 300 and len(batches) >= 3 and max(batches) <= 120, batches
    assert as_rows(hw.read.parquet(str(out))) == first

    second = produce(broker.bootstrap, topic, range(300, 450), 3)
    batches = stream_to_parquet(hw, broker.bootstrap, topic, out, checkpoint)
    assert sum(batches) == 150, batches
    rows = as_rows(hw.read.parquet(str(out)))
    assert len({(r[1], r[2]) for r in rows}) == len(rows) == 450
    assert rows == sorted(first + second)


def test_subscribe_pattern_picks_up_new_topics_and_partitions_while_running(hw, broker) -> None:
    prefix = unique("spark-pattern")
    a, b, other = f"{prefix}-a", f"{prefix}-b", f"x{prefix}-a"  # other: a search would match, a full match not
    create(broker.bootstrap, a, 2)
    create(broker.bootstrap, other, 1)
    produce(broker.bootstrap, a, range(10), 2)
    produce(broker.bootstrap, other, range(5), 1)
    name = "pattern_" + prefix.rsplit("-", 1)[1]
    query = (hw.readStream.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
             .option("subscribePattern", f"{prefix}-.*").option("startingOffsets", "earliest").load()
             .writeStream.format("memory").queryName(name).trigger(processingTime="200 milliseconds").start())
    try:
        _wait_rows(hw, query, name, 10)
        create(broker.bootstrap, b, 1)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
        try:
            admin.create_partitions({a: NewPartitions(3)})
        finally:
            admin.close()
        produce(broker.bootstrap, a, range(10, 14), 3, partition_of=lambda i: 2)
        produce(broker.bootstrap, b, range(3), 1)
        _wait_rows(hw, query, name, 17)
    finally:
        query.stop()
    seen = hw.sql(f"SELECT topic, partition, count(*) AS n FROM {name} GROUP BY topic, partition").collect()
    assert sorted((r.topic, r.partition, r.n) for r in seen) == [(a, 0, 5), (a, 1, 5), (a, 2, 4), (b, 0, 3)]


def _wait_rows(spark, query, name: str, count: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert query.exception() is None, query.exception()
        n = spark.sql(f"SELECT count(*) AS n FROM {name}").collect()[0].n
        if n >= count:
            assert n == count
            return
        assert time.monotonic() < deadline, f"{n} of {count} rows after {timeout}s"
        time.sleep(0.2)


# ------------------------------------------------------------------------------------------ batch


def test_batch_reads_exactly_the_offset_range_asked_for(hw, broker) -> None:
    topic = unique("spark-batch")
    create(broker.bootstrap, topic, 3)
    rows = produce(broker.bootstrap, topic, range(60), 3, codec="gzip")
    load = lambda **o: as_rows(reader(hw, broker.bootstrap, subscribe=topic, **o).load(), headers=False)  # noqa: E731
    plain = [r[:7] for r in rows]

    assert load() == plain  # batch defaults: earliest .. latest
    assert load(startingOffsets="earliest", endingOffsets="latest") == plain
    start = {topic: {"0": 5, "1": -2, "2": 10}}
    end = {topic: {"0": 15, "1": -1, "2": 12}}
    want = {0: range(5, 15), 1: range(0, 20), 2: range(10, 12)}
    got = load(startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    assert got == [r for r in plain if r[2] in want[r[1]]]
    assert load(startingOffsets=json.dumps(start), endingOffsets=json.dumps(end), minPartitions="7") == got

    with_headers = as_rows(reader(hw, broker.bootstrap, subscribe=topic, includeHeaders="true").load())
    assert with_headers == rows
    assert "headers" not in reader(hw, broker.bootstrap, subscribe=topic).load().columns

    empty = unique("spark-empty")
    create(broker.bootstrap, empty, 2)
    assert reader(hw, broker.bootstrap, subscribe=empty).load().count() == 0


def test_assign_reads_only_the_partitions_named(hw, broker) -> None:
    topic = unique("spark-assign")
    create(broker.bootstrap, topic, 3)
    rows = produce(broker.bootstrap, topic, range(30), 3)
    got = as_rows(reader(hw, broker.bootstrap, assign=json.dumps({topic: [0, 2]})).load(), headers=False)
    assert got == [r[:7] for r in rows if r[1] in (0, 2)]


def test_log_append_time_topics_give_the_broker_time_and_type_1(hw, broker) -> None:
    topic = unique("spark-logtime")
    create(broker.bootstrap, topic, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(broker.bootstrap, topic, range(5), 1)
    got = as_rows(reader(hw, broker.bootstrap, subscribe=topic).load(), headers=False)
    assert [r[6] for r in got] == [1] * 5
    assert all(before - 1000 <= r[5] <= int(time.time() * 1000) for r in got), got


def test_deleted_records_are_data_loss_unless_fail_on_data_loss_is_false(hw, broker) -> None:
    topic = unique("spark-deleted")
    create(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, range(10), 1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        admin.delete_records({TopicPartition(topic, 0): 5})
    finally:
        admin.close()
    start = json.dumps({topic: {"0": 2}})
    with pytest.raises(Exception, match="records from offset 2 to 5 were deleted.*'failOnDataLoss'"):
        reader(hw, broker.bootstrap, subscribe=topic, startingOffsets=start).load().count()
    lenient = reader(hw, broker.bootstrap, subscribe=topic, startingOffsets=start, failOnDataLoss="false").load()
    assert sorted(r.offset for r in lenient.collect()) == [5, 6, 7, 8, 9]
    assert sorted(r.offset for r in reader(hw, broker.bootstrap, subscribe=topic).load().collect()) == [5, 6, 7, 8, 9]


def test_transactions_read_committed_and_uncommitted(hw, broker) -> None:
    """Committed and aborted transactions interleaved by real transactional producers, and one left open:
    kafka.isolation.level=read_committed reads the committed records and stops at the open transaction
    (the last stable offset); read_uncommitted reads every record. Markers never become rows (their
    offsets are gaps)."""
    topic = unique("spark-txn")
    create(broker.bootstrap, topic, 1)
    mix = write_interleaved(broker.bootstrap, topic)
    open_txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("spark-open")})
    open_txn.init_transactions(30)
    open_txn.begin_transaction()
    open_txn.produce(topic, value=b"open", partition=0)
    assert open_txn.flush(30) == 0
    try:
        committed = reader(hw, broker.bootstrap, subscribe=topic, **{"kafka.isolation.level": "read_committed"})
        rows = committed.load().selectExpr("offset", "value").collect()
        assert [bytes(r.value) for r in sorted(rows)] == [*mix.committed, mix.end]
        everything = reader(hw, broker.bootstrap, subscribe=topic).load().selectExpr("offset", "value").collect()
        assert sorted(bytes(r.value) for r in everything) == sorted([*mix.everything, b"open"])
        offsets = sorted(r.offset for r in everything)
        markers = 2 * 4  # a commit and an abort marker per round
        assert offsets[-1] == len(everything) + markers - 1 and len(set(offsets)) == len(offsets)
    finally:
        open_txn.abort_transaction(30)


def test_read_committed_drops_aborted_transactions() -> None:
    """The fetched bytes of a read_committed fetch: the broker lists producer 7's transaction from
    offset 0 as aborted; producer 8's commits. Control batches never become rows."""
    def txn(pid: int, base: int, n: int) -> bytes:
        return build_batch([Record(base + i, T0, None, b"p%d-%d" % (pid, base + i)) for i in range(n)],
                           base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=0,
                           attributes=ATTR_TRANSACTIONAL)

    def marker(pid: int, offset: int, kind: int) -> bytes:
        return build_batch([Record(offset, T0, struct.pack(">hh", 0, kind), b"\0\0\0\0\0\0")], base_offset=offset,
                           producer_id=pid, producer_epoch=0, attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL)

    fetched = (txn(7, 0, 3) + txn(8, 3, 2) + marker(7, 5, 0) + marker(8, 6, 1)
               + build_batch([Record(7, T0, None, b"plain")], base_offset=7))
    committed = Columns(False)
    assert decode_fetched(fetched, 0, 100, committed, aborted=[(7, 0)]) == 8
    assert [bytes(v or b"") for v in committed.values] == [b"p8-3", b"p8-4", b"plain"]
    assert committed.offsets == [3, 4, 7]
    everything = Columns(False)
    decode_fetched(fetched, 1, 4, everything)  # read_uncommitted, and a range that starts inside a batch
    assert everything.offsets == [1, 2, 3]


# ------------------------------------------------------------------------------------------ bad options


@pytest.mark.parametrize(("options", "message"), [
    ({}, "'subscribe', 'subscribePattern' or 'assign' must be set"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "only one of the options"),
    ({"assign": "[0, 1]"}, "option 'assign' must be JSON"),
    ({"subscribe": "a", "startingOffsets": "{nope"}, "option 'startingOffsets'"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "option 'maxOffsetsPerTrigger'"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "'kafka.auto.offset.reset' is not supported"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "option 'startingOffsets' cannot be latest"),
    ({"subscribe": "a", "startingTimestamp": "1700000000000"}, "option 'startingTimestamp' .* not supported"),
])
def test_bad_options_fail_naming_the_option(hw, broker, options: dict[str, str], message: str) -> None:
    with pytest.raises(Exception, match=message):
        reader(hw, broker.bootstrap, **options).load().count()


def test_unknown_topics_and_partitions_fail_naming_the_option(hw, broker) -> None:
    missing = unique("spark-missing")
    with pytest.raises(Exception, match=f"option 'assign' names topic '{missing}', which does not exist"):
        reader(hw, broker.bootstrap, assign=json.dumps({missing: [0]})).load().count()
    topic = unique("spark-known")
    create(broker.bootstrap, topic, 2)
    with pytest.raises(Exception, match=r"option 'assign' names partitions \[5\]"):
        reader(hw, broker.bootstrap, assign=json.dumps({topic: [0, 5]})).load().count()
    with pytest.raises(Exception, match=rf"option 'startingOffsets' .* Missing: {topic}-1"):
        reader(hw, broker.bootstrap, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}})).load().count()
    with pytest.raises(Exception, match="kafka.bootstrap.servers"):
        hw.read.format("headwater").option("subscribe", topic).load()
    with pytest.raises(Exception, match="option 'endingOffsets' is for batch queries only"):
        (hw.readStream.format("headwater").option("kafka.bootstrap.servers", broker.bootstrap)
         .option("subscribe", topic).option("endingOffsets", "latest").load()
         .writeStream.format("memory").queryName("never_started").start().awaitTermination(30))
