"""Thin, uniform wrappers around the four real clients used by the integration tests.

Every producer takes a list of ``Rec`` (explicit partition, key, value, headers) and
returns what the client acknowledged; every consumer uses manual assignment from offset 0
(no consumer groups: the broker has none yet) and returns ``Got`` records.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import NewTopic as CNewTopic

from headwater.kafka.records import iter_batches
from headwater.testing.names import unique

from .confluent import headers_of, position

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CLIENTS = ["confluent", "kafka-python", "aiokafka", "kcat"]
KCAT = "/usr/bin/kcat"
TIMEOUT = 30.0  # seconds any single produce/consume may take


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int | None = None  # ms; None = the client's clock


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int = -1


@dataclass(frozen=True)
class Ack:
    partition: int
    offset: int
    value: bytes | None


def make_records(n: int, partitions: int, tag: str, *, headers: str = "per-record") -> list[Rec]:
    """``n`` keyed, compressible records, round-robin over ``partitions``.

    headers: "per-record" (two headers, one varying), "constant" (one fixed header, what kcat
    can send) or "none".
    """
    filler = "the quick brown fox jumps over the lazy dog " * 4
    out = []
    for i in range(n):
        if headers == "per-record":
            hdrs: tuple[tuple[str, bytes], ...] = (("idx", str(i).encode()), ("src", tag.encode()))
        elif headers == "constant":
            hdrs = (("src", tag.encode()),)
        else:
            hdrs = ()
        out.append(Rec(i % partitions, f"key-{i:05d}".encode(), f"{tag}-{i:05d}-{filler}".encode(), hdrs))
    return out


# --------------------------------------------------------------------------- checks
def by_partition(items):
    out = defaultdict(list)
    for it in items:
        out[it.partition].append(it)
    return out


def check_consumed(got: list[Got], recs: list[Rec], partitions: int, *, headers: bool = True) -> None:
    """Exactly the produced records, per partition in produce order, at offsets 0..n-1."""
    want = by_partition(recs)
    have = by_partition(got)
    assert sorted(have) == sorted(p for p in range(partitions) if want[p]), f"partitions {sorted(have)}"
    for p in range(partitions):
        w, h = want[p], have[p]
        assert [g.offset for g in h] == list(range(len(w))), f"partition {p}: offsets not contiguous from 0"
        assert [(g.key, g.value) for g in h] == [(r.key, r.value) for r in w], f"partition {p}: records differ"
        if headers:
            assert [tuple(g.headers) for g in h] == [r.headers for r in w], f"partition {p}: headers differ"


def segment_batches(log_dir: Path, topic: str, partition: int):
    path = Path(log_dir) / f"{topic}-{partition}" / "00000000000000000000.log"
    data = path.read_bytes()
    batches = [h for _, h in iter_batches(data)]
    assert sum(h.size for h in batches) == len(data), f"{path}: trailing bytes after the last whole batch"
    return batches


def check_stored(log_dir: Path, topic: str, counts: dict[int, int], codec: str | None) -> None:
    """The broker's first segment of each partition holds exactly ``counts[p]`` records in
    contiguous v2 batches, every one compressed with ``codec`` (None: don't check the codec)."""
    for p, n in counts.items():
        batches = segment_batches(log_dir, topic, p)
        assert sum(h.record_count for h in batches) == n, f"partition {p}: stored record count"
        expected_base = 0
        for h in batches:
            assert h.magic == 2
            assert h.base_offset == expected_base, f"partition {p}: batch base offsets not contiguous"
            expected_base = h.last_offset + 1
        if codec is not None:
            codecs = sorted({h.codec for h in batches})
            assert codecs == [CODEC_IDS[codec]], f"partition {p}: stored codecs {codecs}, wanted {codec}"


def counts_of(recs: list[Rec]) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for r in recs:
        out[r.partition] += 1
    return dict(out)


def _run(coro, timeout: float = 2 * TIMEOUT):
    return asyncio.run(asyncio.wait_for(coro, timeout))


# --------------------------------------------------------------------------- topic creation
def create_topic(client: str, bootstrap: str, topic: str, partitions: int = 3, configs: dict | None = None) -> None:
    """Create through the client's admin API; kcat has none (its produce auto-creates)."""
    configs = configs or {}
    if client == "confluent":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        fs = admin.create_topics([CNewTopic(topic, num_partitions=partitions, replication_factor=1, config=configs)],
                                 operation_timeout=10, request_timeout=15)
        fs[topic].result(timeout=TIMEOUT)
    elif client == "kafka-python":
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
        try:
            res = admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1,
                                               "configs": configs}})
            assert [t["error_code"] for t in res["topics"]] == [0], res
        finally:
            admin.close()
    elif client == "aiokafka":
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        async def go():
            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15000)
            await admin.start()
            try:
                resp = await admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
                errors = [t[1] for t in resp.topic_errors]
                assert errors == [0], resp
            finally:
                await admin.close()

        _run(go())
    elif client == "kcat":
        pass
    else:
        raise ValueError(client)


# --------------------------------------------------------------------------- producers
def produce(client: str, bootstrap: str, topic: str, recs: list[Rec], codec: str = "none",
            acks: str = "all") -> list[Ack]:
    return {"confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka,
            "kcat": produce_kcat}[client](bootstrap, topic, recs, codec, acks)


def produce_confluent(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none", acks: str = "all",
                      extra: dict | None = None, *, one_by_one: bool = False,
                      on_ack: Callable[[Ack], None] | None = None, timeout: float = TIMEOUT) -> list[Ack]:
    """one_by_one: flush after every record (each acknowledged before the next is sent); on_ack: called
    with each Ack as its delivery report arrives; timeout: how long a flush may take."""
    prod = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "acks": acks, "linger.ms": 20,
                     "message.timeout.ms": int(TIMEOUT * 1000), **(extra or {})})
    acked: list[Ack] = []
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(Ack(msg.partition(), msg.offset(), msg.value()))
            if on_ack is not None:
                on_ack(acked[-1])

    for r in recs:
        prod.produce(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers) or None,
                     on_delivery=on_delivery, timestamp=r.timestamp if r.timestamp is not None else 0)  # 0: now
        if one_by_one:
            assert prod.flush(timeout) == 0, f"record not acknowledged within {timeout}s"
        else:
            prod.poll(0)
    left = prod.flush(timeout)
    assert left == 0, f"{left} messages still queued after {timeout}s"
    assert not errors, errors[:5]
    assert len(acked) == len(recs)
    return acked


def produce_kafka_python(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none",
                         acks: str = "all") -> list[Ack]:
    from kafka import KafkaProducer

    kw = {} if acks == "all" else {"enable_idempotence": False}
    prod = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                         acks={"all": "all", "1": 1, "0": 0}[str(acks)], linger_ms=20, max_block_ms=int(TIMEOUT * 1000),
                         request_timeout_ms=15000, **kw)
    try:
        futs = [prod.send(topic, value=r.value, key=r.key, partition=r.partition, headers=list(r.headers),
                          timestamp_ms=r.timestamp) for r in recs]
        prod.flush(timeout=TIMEOUT)
        metas = [f.get(timeout=TIMEOUT) for f in futs]
    finally:
        prod.close(timeout=10)
    return [Ack(m.partition, m.offset, r.value) for m, r in zip(metas, recs, strict=True)]


def produce_aiokafka(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none", acks: str = "all") -> list[Ack]:
    from aiokafka import AIOKafkaProducer

    async def go():
        prod = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                                acks={"all": "all", "1": 1, "0": 0}[str(acks)], linger_ms=20,
                                request_timeout_ms=15000)
        await prod.start()
        try:
            futs = [await prod.send(topic, value=r.value, key=r.key, partition=r.partition,
                                    headers=list(r.headers), timestamp_ms=r.timestamp) for r in recs]
            metas = await asyncio.gather(*futs)
        finally:
            await prod.stop()
        return [Ack(m.partition, m.offset, r.value) for m, r in zip(metas, recs, strict=True)]

    return _run(go())


def produce_kcat(bootstrap: str, topic: str, recs: list[Rec], codec: str = "none", acks: str = "all") -> list[Ack]:
    """One kcat run per partition (-p), keys after a '|' delimiter; kcat headers (-H) are per run."""
    for p, prs in sorted(by_partition(recs).items()):
        hdrs = {h for r in prs for h in r.headers}
        assert all(r.headers == prs[0].headers for r in prs), "kcat can only send the same headers on every record"
        lines = b"".join(r.key + b"|" + r.value + b"\n" for r in prs)
        assert all(b"|" not in (r.key or b"") and b"\n" not in r.value for r in prs)
        cmd = [KCAT, "-P", "-b", bootstrap, "-t", topic, "-p", str(p), "-K", "|", "-z", codec,
               "-X", f"acks={ {'all': -1}.get(str(acks), acks) }", "-X", "linger.ms=20"]
        for k, v in sorted(hdrs):
            cmd += ["-H", f"{k}={v.decode()}"]
        res = subprocess.run(cmd, input=lines, capture_output=True, timeout=TIMEOUT)
        assert res.returncode == 0, f"kcat produce failed ({res.returncode}): {res.stderr.decode(errors='replace')}"
        assert b"Delivery failed" not in res.stderr and b"ERROR" not in res.stderr, res.stderr.decode(errors="replace")
    return []  # kcat reports no offsets


# --------------------------------------------------------------------------- consumers
def consume(client: str, bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    return {"confluent": consume_confluent, "kafka-python": consume_kafka_python, "aiokafka": consume_aiokafka,
            "kcat": consume_kcat}[client](bootstrap, topic, partitions, expected)


def confluent_consumer(bootstrap: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": unique("hw-test"), "enable.auto.commit": False,
                     "enable.auto.offset.store": False, "check.crcs": True, **extra})


def poll_messages(c: Consumer, timeout: float = TIMEOUT) -> Iterator[Message]:
    """What ``c`` polls (records and errors, never None) until ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None:
            yield m


def consume_confluent(bootstrap: str, topic: str, partitions: int, expected: int, start: int = OFFSET_BEGINNING,
                      *, timeout: float = TIMEOUT, **extra) -> list[Got]:
    c = confluent_consumer(bootstrap, **{"enable.partition.eof": True, **extra})
    got: list[Got] = []
    try:
        c.assign([TopicPartition(topic, p, start) for p in range(partitions)])
        eof: set[int] = set()
        for m in poll_messages(c, timeout):
            err = m.error()
            if err:
                if err.code() == KafkaError._PARTITION_EOF:
                    eof.add(position(m)[0])
                    if len(eof) == partitions and len(got) >= expected:
                        break
                    continue
                raise AssertionError(f"consumer error: {err}")
            partition, offset = position(m)
            eof.discard(partition)
            got.append(Got(partition, offset, m.key(), m.value(), headers_of(m), m.timestamp()[1]))
        else:
            raise AssertionError(f"confluent consumer got {len(got)} of {expected} records in {timeout}s")
    finally:
        c.close()
    return got


def offset_reset_error(bootstrap: str, topic: str, offset: int, timeout: float = TIMEOUT) -> KafkaError:
    """What a consumer with auto.offset.reset=error reports when it starts partition 0 at ``offset``
    (an offset outside the log): an error, and no record before it."""
    c = confluent_consumer(bootstrap, **{"auto.offset.reset": "error"})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        for m in poll_messages(c, timeout):
            err = m.error()
            assert err is not None, f"got a record at offset {m.offset()}, outside the log"
            return err
        raise AssertionError(f"no error within {timeout}s from a fetch at {offset}, outside the log")
    finally:
        c.close()


def consume_kafka_python(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", check_crcs=True, request_timeout_ms=15000)
    got: list[Got] = []
    try:
        tps = [KTP(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        deadline = time.monotonic() + TIMEOUT
        while len(got) < expected and time.monotonic() < deadline:
            for _tp, msgs in c.poll(timeout_ms=200).items():
                got += [Got(m.partition, m.offset, m.key, m.value, tuple((k, v) for k, v in m.headers or ()),
                            m.timestamp) for m in msgs]
        assert len(got) >= expected, f"kafka-python consumer got {len(got)} of {expected} records in {TIMEOUT}s"
        ends = c.end_offsets(tps)
        assert sum(ends.values()) == len(got), f"end offsets {ends} but {len(got)} records consumed"
    finally:
        c.close()
    return got


def consume_aiokafka(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATP

    async def go():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", check_crcs=True, request_timeout_ms=15000)
        await c.start()
        got: list[Got] = []
        try:
            tps = [ATP(topic, p) for p in range(partitions)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            deadline = time.monotonic() + TIMEOUT
            while len(got) < expected and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=200)
                for _tp, msgs in batch.items():
                    got.extend(Got(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), m.timestamp)
                               for m in msgs)
            assert len(got) >= expected, f"aiokafka consumer got {len(got)} of {expected} records in {TIMEOUT}s"
            ends = await c.end_offsets(tps)
            assert sum(ends.values()) == len(got), f"end offsets {ends} but {len(got)} records consumed"
        finally:
            await c.stop()
        return got

    return _run(go())


def consume_kcat(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Got]:
    cmd = [KCAT, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-J", "-q", "-X", "check.crcs=true"]
    res = subprocess.run(cmd, capture_output=True, timeout=TIMEOUT)
    assert res.returncode == 0, f"kcat consume failed ({res.returncode}): {res.stderr.decode(errors='replace')}"
    got = []
    for line in res.stdout.decode().splitlines():
        j = json.loads(line)
        hdrs = j.get("headers") or []
        pairs = tuple((hdrs[i], hdrs[i + 1].encode()) for i in range(0, len(hdrs), 2))
        key = None if j["key"] is None else j["key"].encode()
        got.append(Got(j["partition"], j["offset"], key, j["payload"].encode(), pairs, j.get("ts", -1)))
    assert len(got) == expected, f"kcat consumed {len(got)} of {expected}: {res.stderr.decode(errors='replace')}"
    got.sort(key=lambda g: (g.partition, g.offset))
    return got
