"""Real clients against a real broker: every client x every codec, cross-client, acks,
timestamps, watermarks and the long-polling fetch."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import OFFSET_END, KafkaError, Producer, TopicPartition
from support.hwclients import (
    CLIENTS,
    CODECS,
    Rec,
    check_consumed,
    check_stored,
    confluent_consumer,
    consume,
    consume_confluent,
    consume_kafka_python,
    counts_of,
    create_topic,
    make_records,
    offset_reset_error,
    poll_messages,
    produce,
    produce_confluent,
    produce_kafka_python,
    unique,
)

N = 500
PARTITIONS = 3


def _broker_for(client: str, broker, broker3):
    # kcat cannot create topics: it relies on auto-creation, so it needs num.partitions=3.
    return broker3 if client == "kcat" else broker


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", CLIENTS)
def test_roundtrip_same_client(client: str, codec: str, broker, broker3) -> None:
    b = _broker_for(client, broker, broker3)
    topic = unique(f"rt-{client}-{codec}")
    create_topic(client, b.bootstrap, topic, PARTITIONS)
    recs = make_records(N, PARTITIONS, f"{client}-{codec}", headers="constant" if client == "kcat" else "per-record")
    acks = produce(client, b.bootstrap, topic, recs, codec)
    if acks:  # every client but kcat reports offsets: offset i of partition p is its i-th record there
        per_p: dict[int, list[tuple[int, bytes | None]]] = {}
        for a in acks:
            per_p.setdefault(a.partition, []).append((a.offset, a.value))
        for p, items in per_p.items():
            assert sorted(items) == [(i, r.value) for i, r in enumerate(x for x in recs if x.partition == p)]
    got = consume(client, b.bootstrap, topic, PARTITIONS, N)
    check_consumed(got, recs, PARTITIONS)
    check_stored(b.log_dir, topic, counts_of(recs), codec)


# Every client produces for, and consumes from, every other client (codecs rotate).
CROSS = [(p, c, CODECS[(i + j) % len(CODECS)]) for i, p in enumerate(CLIENTS) for j, c in enumerate(CLIENTS) if p != c]


@pytest.mark.parametrize(("producer", "consumer", "codec"), CROSS)
def test_cross_client(producer: str, consumer: str, codec: str, broker3) -> None:
    topic = unique(f"x-{producer}-{consumer}")
    create_topic(producer, broker3.bootstrap, topic, PARTITIONS)
    recs = make_records(200, PARTITIONS, f"{producer}>{consumer}",
                        headers="constant" if producer == "kcat" else "per-record")
    produce(producer, broker3.bootstrap, topic, recs, codec)
    got = consume(consumer, broker3.bootstrap, topic, PARTITIONS, len(recs))
    check_consumed(got, recs, PARTITIONS)
    check_stored(broker3.log_dir, topic, counts_of(recs), codec)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_acks(client: str, acks: str, broker) -> None:
    topic = unique(f"acks{acks}-{client}")
    create_topic(client, broker.bootstrap, topic, PARTITIONS)
    recs = make_records(300, PARTITIONS, f"acks{acks}")
    if client == "confluent":
        acked = produce_confluent(broker.bootstrap, topic, recs, "none", acks)
    else:
        acked = produce_kafka_python(broker.bootstrap, topic, recs, "none", acks)
    assert len(acked) == len(recs)
    got = consume_confluent(broker.bootstrap, topic, PARTITIONS, len(recs))
    check_consumed(got, recs, PARTITIONS)
    if acks != "0":  # acks=0 gets no answer, so no offsets; otherwise each ack names where the record is
        where = {(g.partition, g.offset): g.value for g in got}
        assert {(a.partition, a.offset): a.value for a in acked} == where
    check_stored(broker.log_dir, topic, counts_of(recs), "none")


def _timestamped(topic_tag: str, n: int, t0: int, step: int) -> list[Rec]:
    return [Rec(0, f"k{i}".encode(), f"{topic_tag}-{i:04d}-".encode() + b"x" * 200, (), t0 + i * step)
            for i in range(n)]


def test_offsets_for_times_and_watermarks(broker) -> None:
    """ListOffsets by timestamp (through the time index: many small batches) and earliest/latest."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = unique("ts")
    create_topic("confluent", broker.bootstrap, topic, 1)
    t0 = int(time.time() * 1000) - 3_600_000
    n, step = 400, 1000
    recs = _timestamped("ts", n, t0, step)
    # Many batches of a few records each, so the broker's sparse time index has entries.
    for i in range(0, n, 10):
        produce_confluent(broker.bootstrap, topic, recs[i : i + 10], "none", extra={"linger.ms": 0})
    got = consume_confluent(broker.bootstrap, topic, 1, n)
    assert [g.timestamp for g in got] == [r.timestamp for r in recs]

    probes = {
        t0 - 5: 0,  # before everything: the first record
        t0: 0,
        t0 + 1: 1,  # between records: the next one
        t0 + 137 * step: 137,
        t0 + 137 * step + 500: 138,
        t0 + (n - 1) * step: n - 1,
    }
    c = confluent_consumer(broker.bootstrap)
    try:
        for ts, want in probes.items():
            [res] = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=10)
            assert res.error is None and res.offset == want, (ts, res)
        [res] = c.offsets_for_times([TopicPartition(topic, 0, t0 + n * step)], timeout=10)
        assert res.offset in (-1, OFFSET_END)  # nothing at or after it: librdkafka reports the end (-1)
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, n)
    finally:
        c.close()

    k = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                      request_timeout_ms=15000)
    try:
        tp = KTP(topic, 0)
        for ts, want in probes.items():
            found = k.offsets_for_times({tp: ts})[tp]
            assert found is not None and found.offset == want, (ts, found)
            assert found.timestamp == recs[want].timestamp
        assert k.offsets_for_times({tp: t0 + n * step})[tp] is None
        assert k.beginning_offsets([tp]) == {tp: 0}
        assert k.end_offsets([tp]) == {tp: n}
    finally:
        k.close()


def test_watermarks_several_partitions(broker) -> None:
    topic = unique("wm")
    create_topic("kafka-python", broker.bootstrap, topic, 3)
    recs = [Rec(p, b"k", b"v%d" % i) for p, count in ((0, 5), (1, 0), (2, 17)) for i in range(count)]
    produce_kafka_python(broker.bootstrap, topic, recs)
    c = confluent_consumer(broker.bootstrap)
    try:
        marks = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(3)]
    finally:
        c.close()
    assert marks == [(0, 5), (0, 0), (0, 17)]
    got = consume_kafka_python(broker.bootstrap, topic, 3, len(recs))
    check_consumed(got, recs, 3, headers=False)


def _produce_later(bootstrap: str, topic: str, value: bytes, delay: float, when: list[float]) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        when.append(time.monotonic())
        p.produce(topic, value=value, key=b"late", partition=0)
        assert p.flush(10) == 0

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_fetch_long_poll_confluent(broker) -> None:
    """A consumer waiting at the log end gets a record produced 1 s later, with no error."""
    topic = unique("lp-c")
    create_topic("confluent", broker.bootstrap, topic, 1)
    c = confluent_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 10000, "enable.partition.eof": False})
    when: list[float] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        assert c.poll(0.5) is None  # nothing yet: the fetch is parked at the log end
        t = _produce_later(broker.bootstrap, topic, b"hello-long-poll", 1.0, when)
        deadline = time.monotonic() + 15
        msg = None
        while msg is None and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                assert m.error() is None, m.error()
                msg = m
        t.join(5)
    finally:
        c.close()
    assert msg is not None, "record produced during the long poll never arrived"
    assert (msg.partition(), msg.offset(), msg.key(), msg.value()) == (0, 0, b"late", b"hello-long-poll")


def test_fetch_long_poll_wakes_on_append(broker) -> None:
    """kafka-python with fetch_max_wait_ms=10 s: the parked fetch must answer soon after the append,
    not when max wait expires."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = unique("lp-k")
    create_topic("kafka-python", broker.bootstrap, topic, 1)
    k = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=10000, request_timeout_ms=30000)
    when: list[float] = []
    try:
        tp = KTP(topic, 0)
        k.assign([tp])
        k.seek(tp, 0)
        assert k.poll(timeout_ms=500) == {}
        t = _produce_later(broker.bootstrap, topic, b"wake-up", 1.0, when)
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while not got and time.monotonic() < deadline:
            for msgs in k.poll(timeout_ms=200).values():
                got += msgs
        arrived = time.monotonic()
        t.join(5)
    finally:
        k.close()
    assert [(m.offset, m.key, m.value) for m in got] == [(0, b"late", b"wake-up")]
    assert when and arrived - when[0] < 5, f"record arrived {arrived - when[0]:.1f}s after produce: fetch not woken"


def test_consume_from_end_then_new_records(broker) -> None:
    """OFFSET_END assignment sees only what is produced afterwards, at the right offsets."""
    topic = unique("end")
    create_topic("confluent", broker.bootstrap, topic, 1)
    first = make_records(20, 1, "before", headers="none")
    produce_confluent(broker.bootstrap, topic, first)
    c = confluent_consumer(broker.bootstrap, **{"enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # wait until positioned at the end
            m = c.poll(0.2)
            if m is not None and (err := m.error()) and err.code() == KafkaError._PARTITION_EOF:
                break
        second = make_records(5, 1, "after", headers="none")
        produce_confluent(broker.bootstrap, topic, second)
        got: list[tuple[int | None, bytes | None]] = []
        while len(got) < 5 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append((m.offset(), m.value()))
    finally:
        c.close()
    assert got == [(20 + i, r.value) for i, r in enumerate(second)]


def test_log_append_time(broker) -> None:
    """message.timestamp.type=LogAppendTime: the broker stamps every batch (compressed too) and the
    rewritten batches still pass the clients' CRC checks."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    topic = unique("lat")
    create_topic("confluent", broker.bootstrap, topic, 2, {"message.timestamp.type": "LogAppendTime"})
    old = int(time.time() * 1000) - 86_400_000
    recs = [Rec(i % 2, b"k%d" % i, b"lat-%d-" % i + b"z" * 100, (), old) for i in range(100)]
    before = int(time.time() * 1000)
    produce_confluent(broker.bootstrap, topic, recs[:50], "gzip")
    produce_kafka_python(broker.bootstrap, topic, recs[50:], "zstd")
    after = int(time.time() * 1000)
    c = confluent_consumer(broker.bootstrap, **{"enable.partition.eof": True})
    seen = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(2)])
        for m in poll_messages(c, 15):
            if not m.error():
                seen.append(m.timestamp())
            if len(seen) == 100:
                break
    finally:
        c.close()
    assert len(seen) == 100
    assert {t for t, _ in seen} == {TIMESTAMP_LOG_APPEND_TIME}
    assert all(before <= ts <= after for _, ts in seen), (before, after, sorted({ts for _, ts in seen}))
    got = consume_kafka_python(broker.bootstrap, topic, 2, 100)  # kafka-python verifies CRCs too
    assert all(before <= g.timestamp <= after for g in got)
    check_consumed(got, recs, 2, headers=False)


def test_message_too_large(broker) -> None:
    from kafka.errors import MessageSizeTooLargeError

    topic = unique("big")
    create_topic("kafka-python", broker.bootstrap, topic, 1, {"max.message.bytes": "5000"})
    with pytest.raises(MessageSizeTooLargeError):
        produce_kafka_python(broker.bootstrap, topic, [Rec(0, b"k", b"x" * 20_000)])
    with pytest.raises(AssertionError, match="MSG_SIZE_TOO_LARGE|too large"):
        produce_confluent(broker.bootstrap, topic, [Rec(0, b"k", bytes(range(256)) * 80)],
                          extra={"retries": 0})
    ok = produce_confluent(broker.bootstrap, topic, [Rec(0, b"k", b"small")])
    assert [(a.partition, a.offset) for a in ok] == [(0, 0)]  # the rejected batches took no offsets


def test_large_records_and_small_fetch_sizes(broker) -> None:
    """Records bigger than the consumer's per-partition fetch size still arrive (first batch whole)."""
    topic = unique("large")
    create_topic("confluent", broker.bootstrap, topic, 1)
    recs = [Rec(0, b"k%d" % i, bytes([65 + i]) * (300_000 + i)) for i in range(6)]
    recs += make_records(200, 1, "small", headers="none")
    produce_confluent(broker.bootstrap, topic, recs, "none")
    got = consume_confluent(broker.bootstrap, topic, 1, len(recs),
                            **{"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 4096,
                               "message.max.bytes": 4096})
    check_consumed(got, recs, 1, headers=False)
    got = consume_kafka_python(broker.bootstrap, topic, 1, len(recs))
    check_consumed(got, recs, 1, headers=False)


def test_idempotent_confluent_producer(broker) -> None:
    topic = unique("idem")
    create_topic("confluent", broker.bootstrap, topic, 3)
    recs = make_records(600, 3, "idem")
    acked = produce_confluent(broker.bootstrap, topic, recs, "snappy",
                              extra={"enable.idempotence": True, "max.in.flight.requests.per.connection": 5,
                                     "linger.ms": 1, "batch.num.messages": 20})
    got = consume_confluent(broker.bootstrap, topic, 3, len(recs))
    check_consumed(got, recs, 3)
    assert {(a.partition, a.offset, a.value) for a in acked} == {(g.partition, g.offset, g.value) for g in got}
    for p in range(3):  # one producer id on every batch, sequences contiguous per partition
        from support.hwclients import segment_batches

        batches = segment_batches(broker.log_dir, topic, p)
        assert len({(h.producer_id, h.producer_epoch) for h in batches}) == 1
        assert batches[0].producer_id >= 0
        seq = 0
        for h in batches:
            assert h.base_sequence == seq
            seq += h.record_count


def test_consume_past_end_is_out_of_range(broker) -> None:
    topic = unique("oor")
    create_topic("confluent", broker.bootstrap, topic, 1)
    produce_confluent(broker.bootstrap, topic, make_records(10, 1, "oor"))
    err = offset_reset_error(broker.bootstrap, topic, 50, timeout=15)
    assert err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE), err
