"""Compaction, retention and the flush policy against a real broker process and real clients.

- cleanup.policy=compact: after the cleaner ran, a consumer reading from the beginning gets the
  latest value of every key and nothing of the deleted keys (tombstones gone after
  delete.retention.ms=0), from far fewer segments; the compacted log survives a restart.
- retention.ms / retention.bytes on delete topics: the log start moves (ListOffsets earliest),
  what is left reads back, and a fetch below the start is OFFSET_OUT_OF_RANGE.
- flush.messages=1 with acks=all: every acknowledgement comes after the recovery point (written
  once a flush's fsyncs completed) covers the record, also with 8 producers at once.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, TopicPartition
from kafka.protocol.consumer import FetchResponse
from support.confluent import position
from support.hwclients import (
    TIMEOUT,
    Rec,
    confluent_consumer,
    consume_confluent,
    create_topic,
    offset_reset_error,
    poll_messages,
    produce_confluent,
    unique,
)
from support.rawkafka import fetch_req, request

from headwater.testing.waiting import wait_until


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = confluent_consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def _read_all(bootstrap: str, topic: str) -> list:
    """Every record of partition 0 from the beginning, until end of partition (confluent)."""
    lo, hi = _watermarks(bootstrap, topic)
    c = confluent_consumer(bootstrap, **{"enable.partition.eof": True})
    out: list = []
    try:
        c.assign([TopicPartition(topic, 0, lo)])
        for m in poll_messages(c):
            if err := m.error():
                if err.code() == KafkaError._PARTITION_EOF and position(m)[1] >= hi:
                    return out
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"consumer error: {err}")
            out.append(m)
        raise AssertionError(f"did not reach the end offset {hi} in {TIMEOUT}s")
    finally:
        c.close()


def _read_kafka_python(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of partition 0 from the beginning until the consumer's position is ``end``."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", check_crcs=True, request_timeout_ms=15000)
    tp = KTP(topic, 0)
    out = []
    try:
        c.assign([tp])
        c.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"kafka-python stuck at {c.position(tp)} of {end}"
            for msgs in c.poll(timeout_ms=200).values():
                out += [(m.offset, m.key, m.value) for m in msgs]
    finally:
        c.close()
    return out


def _raw_fetch_error(bootstrap: str, topic: str, offset: int) -> int:
    """The error code of a raw Fetch v4 for partition 0 at ``offset``."""
    req = fetch_req(topic, offset, max_wait_ms=100, min_bytes=1, version=4, max_bytes=1 << 20,
                    partition_max_bytes=1 << 20)
    resp = request(int(bootstrap.split(":")[1]), req, FetchResponse, client_id="hw-test", timeout=10)
    [t] = resp.responses
    [p] = t.partitions
    assert p.partition_index == 0
    return p.error_code


# ---------------------------------------------------------------------------- compaction


def test_compacted_topic_keeps_latest_value_per_key_and_drops_tombstones(fresh_broker) -> None:
    fresh_broker.overrides += ["log.cleaner.backoff.ms=200"]
    b = fresh_broker.start()
    topic = unique("compact")
    create_topic("confluent", b.bootstrap, topic, 1, {
        "cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "500",
        "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.1",
    })
    keys = [b"key-%02d" % i for i in range(20)]
    deleted = set(keys[:5])
    updates = [Rec(0, keys[i % len(keys)], b"v%05d-" % i + b"x" * 60) for i in range(3000)]
    tombstones = [Rec(0, k, None) for k in sorted(deleted)]
    later = [Rec(0, keys[5 + i % 15], b"w%05d-" % i + b"y" * 60) for i in range(600)]
    # snappy: librdkafka sends raw snappy, rewritten batches come back xerial-framed.
    extra = {"linger.ms": 5, "batch.num.messages": 10}
    produce_confluent(b.bootstrap, topic, updates, "snappy", extra=extra)
    produce_confluent(b.bootstrap, topic, tombstones, "snappy", extra=extra)
    produce_confluent(b.bootstrap, topic, later, "snappy", extra=extra)
    total = len(updates) + len(tombstones) + len(later)
    expect = {r.key: r.value for r in updates + later if r.key not in deleted}

    pdir = Path(b.log_dir) / f"{topic}-0"
    deadline = time.monotonic() + 60
    while True:
        got = _read_all(b.bootstrap, topic)
        state = {m.key(): m.value() for m in got}
        if state == expect and not any(m.key() in deleted for m in got):
            break
        assert time.monotonic() < deadline, (
            f"not compacted in time: {len(got)} records, deleted keys seen: "
            f"{sorted({m.key() for m in got if m.key() in deleted})}\n{b.log_text()[-3000:]}"
        )
        time.sleep(0.5)
    offsets = [m.offset() for m in got]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    assert _watermarks(b.bootstrap, topic) == (0, total)  # compaction never moves the log start/end
    assert len(got) < total / 5
    # The cleaner ran (possibly several passes while producing) and merged small segments.
    passes = [line for line in b.log_text().splitlines() if f"cleaned {topic}-0 " in line]
    assert passes
    size = sum(p.stat().st_size for p in pdir.glob("*.log"))
    assert len(list(pdir.glob("*.log"))) <= size // 4096 + 3
    assert "log cleaner failed" not in b.log_text()
    # Other clients read the compacted log (gaps, xerial snappy) the same way.
    kp = _read_kafka_python(b.bootstrap, topic, total)
    assert kp == [(m.offset(), m.key(), m.value()) for m in got]

    # The compacted log survives a restart, and new appends continue at the old end.
    assert b.stop() == 0
    b.port = 0
    b.start()
    again = _read_all(b.bootstrap, topic)
    assert [(m.offset(), m.key(), m.value()) for m in again] == [(m.offset(), m.key(), m.value()) for m in got]
    acked = produce_confluent(b.bootstrap, topic, [Rec(0, b"key-05", b"after-restart")])
    assert acked[0].offset == total


# ---------------------------------------------------------------------------- retention


def test_retention_ms_moves_log_start_and_old_offsets_are_out_of_range(fresh_broker) -> None:
    fresh_broker.overrides += ["log.retention.check.interval.ms=200"]
    b = fresh_broker.start()
    topic = unique("retms")
    create_topic("confluent", b.bootstrap, topic, 1, {"segment.bytes": "4096", "retention.ms": "60000"})
    now = int(time.time() * 1000)
    old = [Rec(0, b"o%d" % i, b"old-%04d-" % i + b"r" * 100, (), now - 3_600_000 + i) for i in range(200)]
    new = [Rec(0, b"n%d" % i, b"new-%04d-" % i + b"s" * 100, (), now + i) for i in range(100)]
    extra = {"linger.ms": 0, "batch.num.messages": 5}
    produce_confluent(b.bootstrap, topic, old, "none", extra=extra)
    produce_confluent(b.bootstrap, topic, new, "none", extra=extra)

    # rounds run while the records are produced: wait for one that saw them all, not just the first
    wait_until(lambda: _watermarks(b.bootstrap, topic)[0] > 150, "retention.ms to delete the old segments", 60, 0.2,
               seen=lambda: f"log start and end {_watermarks(b.bootstrap, topic)}")
    time.sleep(0.5)  # let one more retention round pass: it must not delete newer segments
    start, end = _watermarks(b.bootstrap, topic)
    assert end == 300
    # Segments hold whole batches: the start is the first segment with a record newer than retention.
    assert 150 < start <= 200
    got = _read_all(b.bootstrap, topic)
    assert [m.offset() for m in got] == list(range(start, 300))
    assert [m.value() for m in got][-100:] == [r.value for r in new]
    assert _raw_fetch_error(b.bootstrap, topic, 0) == 1  # OFFSET_OUT_OF_RANGE
    assert _raw_fetch_error(b.bootstrap, topic, start - 1) == 1
    assert _raw_fetch_error(b.bootstrap, topic, start) == 0
    assert "Offset out of range" in str(offset_reset_error(b.bootstrap, topic, 0))


def test_retention_bytes_keeps_the_newest_bytes(fresh_broker) -> None:
    fresh_broker.overrides += ["log.retention.check.interval.ms=200"]
    b = fresh_broker.start()
    topic = unique("retbytes")
    create_topic("confluent", b.bootstrap, topic, 1, {"segment.bytes": "4096", "retention.bytes": "10000"})
    recs = [Rec(0, b"k%d" % i, b"val-%04d-" % i + b"b" * 100) for i in range(400)]
    produce_confluent(b.bootstrap, topic, recs, "none", extra={"linger.ms": 0, "batch.num.messages": 5})
    pdir = Path(b.log_dir) / f"{topic}-0"

    def size() -> int:
        return sum(p.stat().st_size for p in pdir.glob("*.log"))

    def settled() -> bool:
        """The round is over: removing the oldest segment too would go below retention.bytes. (A segment
        renamed .deleted between the listing and its stat is a FileNotFoundError: not yet.)"""
        sizes = [p.stat().st_size for p in sorted(pdir.glob("*.log"))]
        return sum(sizes) - sizes[0] < 10000

    wait_until(settled, "retention.bytes to delete the oldest segments", 60, 0.2, seen=lambda: f"{size()} bytes")
    start, end = _watermarks(b.bootstrap, topic)
    assert end == 400 and start > 0
    # Deleting one more (oldest) segment would go below retention.bytes.
    logs = sorted(pdir.glob("*.log"))
    assert size() - logs[0].stat().st_size < 10000 <= size()
    assert int(logs[0].stem) == start
    got = _read_all(b.bootstrap, topic)
    assert [m.value() for m in got] == [r.value for r in recs[start:]]
    assert _raw_fetch_error(b.bootstrap, topic, 0) == 1
    assert _raw_fetch_error(b.bootstrap, topic, start) == 0


# ---------------------------------------------------------------------------- flush policy


def _recovery_point(pdir: Path) -> int:
    try:
        return int((pdir / "recovery-point").read_text())
    except (OSError, ValueError):
        return -1


def _produce_sync(bootstrap: str, topic: str, n: int, tag: str, after_ack) -> list[int]:
    """``n`` records one at a time (each acknowledged before the next), acks=all."""
    recs = [Rec(0, f"{tag}-{i}".encode(), f"{tag}-{i}".encode() * 10) for i in range(n)]
    acked = produce_confluent(bootstrap, topic, recs, extra={"linger.ms": 0}, one_by_one=True,
                              on_ack=lambda a: after_ack(a.offset))
    return [a.offset for a in acked]


def test_flush_messages_1_acks_only_after_fsync(fresh_broker) -> None:
    b = fresh_broker.start()
    topic = unique("flush1")
    create_topic("confluent", b.bootstrap, topic, 1, {"flush.messages": "1"})
    pdir = Path(b.log_dir) / f"{topic}-0"
    lagging: list[tuple[int, int]] = []

    def check(offset: int) -> None:
        # Runs when the ack arrives: the flush that covers the record already wrote the recovery point.
        point = _recovery_point(pdir)
        if point < offset + 1:
            lagging.append((offset, point))

    offsets = _produce_sync(b.bootstrap, topic, 40, "one", check)
    assert offsets == list(range(40))
    assert not lagging, f"acks before the fsync (offset, recovery point): {lagging[:5]}"

    # 8 producers at once: every ack still comes after its flush; flushes can be shared.
    results: dict[int, list[int]] = {}
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = _produce_sync(b.bootstrap, topic, 25, f"p{i}", check)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(2 * TIMEOUT)
    assert not failures, failures[:1]
    acked = sorted(o for offs in results.values() for o in offs)
    assert acked == list(range(40, 240))
    assert not lagging, f"acks before the fsync (offset, recovery point): {lagging[:5]}"
    assert _recovery_point(pdir) == 240
    got = consume_confluent(b.bootstrap, topic, 1, 240)
    assert sorted(g.offset for g in got) == list(range(240))
    assert {g.key for g in got if g.offset >= 40} == {f"p{i}-{j}".encode() for i in range(8) for j in range(25)}

    # The check discriminates: without flush.messages the recovery point does not follow the acks.
    other = unique("noflush")
    create_topic("confluent", b.bootstrap, other, 1)
    _produce_sync(b.bootstrap, other, 10, "n", lambda offset: None)
    assert _recovery_point(Path(b.log_dir) / f"{other}-0") < 10


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_compaction_with_other_clients_batches(fresh_broker, codec: str) -> None:
    """kafka-python batches (idempotent producer: producer id, sequences) compact and read back."""
    from kafka import KafkaProducer

    fresh_broker.overrides += ["log.cleaner.backoff.ms=200"]
    b = fresh_broker.start()
    topic = unique("compact-kp")
    create_topic("confluent", b.bootstrap, topic, 1, {
        "cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.1",
    })
    prod = KafkaProducer(bootstrap_servers=b.bootstrap, linger_ms=5, acks="all",
                         compression_type=None if codec == "none" else codec)
    expect = {}
    try:
        for i in range(2000):
            key, value = b"k%d" % (i % 30), b"v%05d-" % i + b"z" * 50
            prod.send(topic, key=key, value=value, partition=0)
            expect[key] = value
        prod.flush(TIMEOUT)
        # Continue after compaction ran: the idempotent producer's sequence state must still agree.
        deadline = time.monotonic() + 30
        pdir = Path(b.log_dir) / f"{topic}-0"
        while not (pdir / "cleaner-checkpoint").exists():
            assert time.monotonic() < deadline, "the cleaner did not run"
            time.sleep(0.2)
        for i in range(200):
            key, value = b"k%d" % (i % 30), b"after-%05d" % i
            prod.send(topic, key=key, value=value, partition=0).get(TIMEOUT)
            expect[key] = value
    finally:
        prod.close(10)
    got = _read_all(b.bootstrap, topic)
    assert {m.key(): m.value() for m in got} == expect
    assert len(got) < 2200
    assert "log cleaner failed" not in b.log_text()
