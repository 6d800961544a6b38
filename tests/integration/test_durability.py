"""Durability: clean restart, SIGKILL while producing, a damaged segment tail, retention and
DeleteRecords across segments (both persisted), and a clean shutdown under connection churn."""

from __future__ import annotations

import re
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
from support.hwclients import (
    TIMEOUT,
    Ack,
    Rec,
    check_consumed,
    confluent_consumer,
    consume_confluent,
    create_topic,
    make_records,
    produce_confluent,
    unique,
)

from headwater.kafka.records import iter_batches
from headwater.testing.waiting import wait_until


def _restart_on_new_port(b):
    """SIGTERM (must exit 0), then start again on a fresh ephemeral port."""
    assert b.stop() == 0
    b.port = 0
    return b.start()


def _watermarks(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    c = confluent_consumer(bootstrap)
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(partitions)]
    finally:
        c.close()


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, str]:
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res], request_timeout=15)[res].result(timeout=TIMEOUT)
    return {k: e.value for k, e in entries.items() if not e.is_default}


def test_clean_restart_keeps_everything(fresh_broker) -> None:
    b = fresh_broker.start()
    big, small = unique("dur-big"), unique("dur-small")
    # Small segments so that several closed segments (and their indexes) must be reopened.
    create_topic("confluent", b.bootstrap, big, 4, {"segment.bytes": "262144", "retention.ms": "86400000"})
    create_topic("kafka-python", b.bootstrap, small, 2, {"cleanup.policy": "compact"})
    recs = make_records(10_000, 4, "big")
    produce_confluent(b.bootstrap, big, recs[:5000], "zstd")
    produce_confluent(b.bootstrap, big, recs[5000:], "none")
    small_recs = make_records(50, 2, "small", headers="none")
    produce_confluent(b.bootstrap, small, small_recs)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    tp = TopicPartition(small, 0, 10)
    assert admin.delete_records([tp], request_timeout=15)[tp].result(timeout=TIMEOUT).low_watermark == 10
    assert len(list((Path(b.log_dir) / f"{big}-0").glob("*.log"))) > 1, "expected several segments"
    configs_before = {t: _topic_configs(admin, t) for t in (big, small)}
    marks_before = {t: _watermarks(b.bootstrap, t, n) for t, n in ((big, 4), (small, 2))}
    assert marks_before[big] == [(0, 2500)] * 4
    assert marks_before[small] == [(10, 25), (0, 25)]

    assert b.stop() == 0, "SIGTERM should be a clean exit"
    assert "broker stopped; all logs flushed" in b.log_text()
    _restart_on_new_port(b)

    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    md = admin.list_topics(timeout=10).topics
    assert {big, small} <= set(md)
    assert sorted(md[big].partitions) == [0, 1, 2, 3]
    assert sorted(md[small].partitions) == [0, 1]
    assert {t: _topic_configs(admin, t) for t in (big, small)} == configs_before
    assert configs_before[big] == {"segment.bytes": "262144", "retention.ms": "86400000"}
    assert configs_before[small] == {"cleanup.policy": "compact"}
    assert {t: _watermarks(b.bootstrap, t, n) for t, n in ((big, 4), (small, 2))} == marks_before

    got = consume_confluent(b.bootstrap, big, 4, len(recs))
    check_consumed(got, recs, 4)
    got_small = consume_confluent(b.bootstrap, small, 2, 40)
    assert sorted((g.partition, g.offset, g.value) for g in got_small) == sorted(
        [(r.partition, i // 2, r.value) for i, r in enumerate(small_recs) if not (r.partition == 0 and i // 2 < 10)])

    # Appends continue where the logs ended.
    acked = produce_confluent(b.bootstrap, big, [Rec(p, b"after", b"after-restart") for p in range(4)])
    assert sorted((a.partition, a.offset) for a in acked) == [(p, 2500) for p in range(4)]


def _background_producer(bootstrap: str, topic: str, partitions: int, stop: threading.Event,
                         acked: list[Ack], failed: list[str], codec: str) -> threading.Thread:
    def run() -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "message.timeout.ms": 2000,
                      "retries": 0, "reconnect.backoff.max.ms": 200, "compression.type": codec})

        def on_delivery(err, msg) -> None:
            if err is None:
                acked.append(Ack(msg.partition(), msg.offset(), msg.value()))
            else:
                failed.append(str(err))

        seq = 0
        while not stop.is_set():
            for _ in range(50):
                try:
                    p.produce(topic, value=b"val-%08d" % seq + b"." * (seq % 97), key=b"k%d" % seq,
                              partition=seq % partitions, on_delivery=on_delivery)
                except BufferError:
                    break
                seq += 1
            p.poll(0.001)
        p.flush(10)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("variant", ["one-segment", "rolling-after-restart"])
def test_sigkill_mid_produce_keeps_acknowledged(fresh_broker, capsys, variant: str) -> None:
    b = fresh_broker.start()
    topic = unique("kill")
    partitions = 4
    acked: list[Ack] = []
    if variant == "one-segment":
        create_topic("confluent", b.bootstrap, topic, partitions)
    else:
        # Small segments that keep rolling while the broker dies, after a clean restart wrote a
        # recovery point: recovery must rescan every segment past it.
        create_topic("confluent", b.bootstrap, topic, partitions, {"segment.bytes": "16384"})
        first = [Rec(i % partitions, b"k", b"pre-restart-%06d" % i) for i in range(2000)]
        acked += produce_confluent(b.bootstrap, topic, first, "none")
        _restart_on_new_port(b)
    failed: list[str] = []
    stop = threading.Event()
    codec = "lz4" if variant == "one-segment" else "none"
    t = _background_producer(b.bootstrap, topic, partitions, stop, acked, failed, codec)
    target = len(acked) + 5000
    deadline = time.monotonic() + 30
    while len(acked) < target and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(acked) >= target, f"only {len(acked)} acknowledged before the kill"
    fresh_broker.kill()  # SIGKILL while the producer is still sending
    killed_at = len(acked)
    stop.set()
    t.join(20)
    assert not t.is_alive()
    with capsys.disabled():
        print(f"\n[sigkill {variant}] {len(acked)} records acknowledged ({killed_at} when killed), "
              f"{len(failed)} failed")

    b.port = 0
    b.start()
    if variant != "one-segment":
        assert len(list((Path(b.log_dir) / f"{topic}-0").glob("*.log"))) > 2
    marks = _watermarks(b.bootstrap, topic, partitions)
    assert all(lo == 0 for lo, _ in marks)
    total = sum(hi for _, hi in marks)
    assert total >= len(acked)
    got = consume_confluent(b.bootstrap, topic, partitions, total)
    stored = {(g.partition, g.offset): g.value for g in got}
    assert len(stored) == total
    for p in range(partitions):
        assert sorted(o for (q, o) in stored if q == p) == list(range(marks[p][1]))
    lost = [a for a in acked if stored.get((a.partition, a.offset)) != a.value]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost or changed, e.g. {lost[:3]}"
    for p in range(partitions):  # nothing acknowledged lies beyond the recovered log end
        assert max((a.offset for a in acked if a.partition == p), default=-1) < marks[p][1]

    # Writing after the restart continues at the recovered log end.
    after = produce_confluent(b.bootstrap, topic, [Rec(p, b"k", b"after-kill-%d" % p) for p in range(partitions)])
    assert sorted((a.partition, a.offset) for a in after) == [(p, marks[p][1]) for p in range(partitions)]


def _valid_batch_with_bad_crc(seg: Path) -> bytes:
    """A copy of the segment's last batch, offset after it, with a payload byte flipped (CRC mismatch)."""
    data = seg.read_bytes()
    pos, header = list(iter_batches(data))[-1]
    batch = bytearray(data[pos:])
    struct.pack_into(">q", batch, 0, header.last_offset + 1)
    batch[-1] ^= 0xFF
    return bytes(batch)


GARBAGE = {
    "zeros": lambda seg: b"\x00" * 100,
    "random": lambda seg: bytes((i * 73 + 19) % 256 for i in range(333)),
    "torn-header": lambda seg: struct.pack(">qi", 10_000, 5000) + b"\x00\x00\x00\x00\x02" + b"\x11" * 40,
    "bad-crc-batch": _valid_batch_with_bad_crc,
}


@pytest.mark.parametrize("kind", list(GARBAGE))
def test_garbage_tail_is_truncated(fresh_broker, kind: str) -> None:
    b = fresh_broker.start()
    topic = unique(f"tail-{kind}")
    create_topic("confluent", b.bootstrap, topic, 1)
    recs = make_records(100, 1, "tail")
    produce_confluent(b.bootstrap, topic, recs[:60], "gzip")
    produce_confluent(b.bootstrap, topic, recs[60:], "none")
    assert b.stop() == 0

    seg = Path(b.log_dir) / f"{topic}-0" / "00000000000000000000.log"
    good = seg.read_bytes()
    junk = GARBAGE[kind](seg)
    with open(seg, "ab") as f:
        f.write(junk)
    log_before = len(b.log_text())
    b.start()
    new_log = b.log_text()[log_before:].replace(str(Path(b.log_dir).parent), "<tmp>")  # the path says "truncated"
    assert seg.read_bytes() == good, "recovery should cut exactly the appended bytes"

    assert _watermarks(b.bootstrap, topic, 1) == [(0, 100)]
    got = consume_confluent(b.bootstrap, topic, 1, 100)
    check_consumed(got, recs, 1)
    acked = produce_confluent(b.bootstrap, topic, [Rec(0, b"k", b"after-repair")])
    assert [(a.partition, a.offset) for a in acked] == [(0, 100)]
    got = consume_confluent(b.bootstrap, topic, 1, 101)
    assert [(g.offset, g.value) for g in got[-2:]] == [(99, recs[-1].value), (100, b"after-repair")]
    # Last, so that the data checks above run even if this fails: the operator must be told.
    assert re.search(r"truncat", new_log, re.IGNORECASE), f"no truncation logged:\n{new_log}"


def test_retention_deletes_old_segments(fresh_broker) -> None:
    fresh_broker.overrides.append("log.retention.check.interval.ms=200")
    b = fresh_broker.start()
    topic = unique("ret")
    create_topic("confluent", b.bootstrap, topic, 1, {"segment.bytes": "16384", "retention.ms": "1000"})
    old = int(time.time() * 1000) - 3_600_000
    recs = [Rec(0, b"k%d" % i, b"old-%04d-" % i + b"r" * 200, (), old + i) for i in range(400)]
    produce_confluent(b.bootstrap, topic, recs, "none", extra={"linger.ms": 0, "batch.num.messages": 5})
    pdir = Path(b.log_dir) / f"{topic}-0"

    def one_segment() -> list[Path]:
        logs = sorted(pdir.glob("*.log"))
        assert len(logs) == 1, f"closed segments past retention.ms were not deleted: {[p.name for p in logs]}"
        return logs

    logs = wait_until(one_segment, "the closed segments past retention.ms deleted", 15, interval=0.1)
    active_base = int(logs[0].stem)
    assert 0 < active_base < 400
    assert _watermarks(b.bootstrap, topic, 1) == [(active_base, 400)]
    got = consume_confluent(b.bootstrap, topic, 1, 400 - active_base)
    assert [(g.offset, g.value) for g in got] == [(o, recs[o].value) for o in range(active_base, 400)]
    # The new log start survives a restart.
    _restart_on_new_port(b)
    assert _watermarks(b.bootstrap, topic, 1) == [(active_base, 400)]


def test_delete_records_across_segments_survives_restart(fresh_broker) -> None:
    b = fresh_broker.start()
    topic = unique("drseg")
    create_topic("confluent", b.bootstrap, topic, 1, {"segment.bytes": "16384"})
    recs = [Rec(0, b"k%d" % i, b"v-%04d-" % i + b"d" * 200) for i in range(400)]
    produce_confluent(b.bootstrap, topic, recs, "none", extra={"linger.ms": 0, "batch.num.messages": 5})
    pdir = Path(b.log_dir) / f"{topic}-0"
    bases = sorted(int(p.stem) for p in pdir.glob("*.log"))
    assert len(bases) > 3
    cut = bases[2] + 3  # inside the third segment
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    tp = TopicPartition(topic, 0, cut)
    assert admin.delete_records([tp], request_timeout=15)[tp].result(timeout=TIMEOUT).low_watermark == cut
    # The two segments wholly below the cut are gone from disk; the one holding it stays.
    assert sorted(int(p.stem) for p in pdir.glob("*.log")) == bases[2:]
    assert _watermarks(b.bootstrap, topic, 1) == [(cut, 400)]

    _restart_on_new_port(b)
    assert _watermarks(b.bootstrap, topic, 1) == [(cut, 400)]
    earliest: dict[str, Any] = {"auto.offset.reset": "earliest"}
    got = consume_confluent(b.bootstrap, topic, 1, 400 - cut, start=0, **earliest)
    assert [(g.offset, g.value) for g in got] == [(o, recs[o].value) for o in range(cut, 400)]
    acked = produce_confluent(b.bootstrap, topic, [Rec(0, b"k", b"next")])
    assert [(a.partition, a.offset) for a in acked] == [(0, 400)]


_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 1, 1) + b"x"


def test_sigterm_with_busy_connections_logs_no_errors(fresh_broker) -> None:
    """Clients connecting and disconnecting while the broker shuts down must not make it log errors
    (a few stop/start cycles: the race is timing-dependent)."""
    import socket

    b = fresh_broker.start()
    frame = struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0

    def churn(stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", b.port), timeout=1) as s:
                    s.sendall(frame)
                    s.recv(4096)
            except OSError:
                pass

    for cycle in range(3):
        if cycle:
            b.start()
        stop = threading.Event()
        threads = [threading.Thread(target=churn, args=(stop,), daemon=True) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        log_before = len(b.log_text())
        try:
            assert b.stop() == 0
        finally:
            stop.set()
            for t in threads:
                t.join(5)
        text = b.log_text()[log_before:]
        assert "broker stopped; all logs flushed" in text
        assert "Traceback" not in text and " ERROR " not in text, f"cycle {cycle}:\n{text}"
