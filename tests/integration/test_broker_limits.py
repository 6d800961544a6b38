"""Limits no client can break (issue 26, point 6): each test tries to break one and then shows the broker
still serving other clients.

- a compression bomb (1 MB of zstd or gzip holding a gigabyte of zeros; lz4 too) on a topic whose
  records the broker reads is MESSAGE_TOO_LARGE, without the broker's memory growing by the expansion;
- ``fetch.max.bytes`` bounds a Fetch answer whatever it asks (v2 has no max_bytes and asks 2^31-1 bytes per
  partition);
- ``max.connections``, ``max.connections.per.ip(.overrides)``: the connection over the limit is closed, a new
  one is served once another closed; ``connections.max.idle.ms`` closes an idle connection, not a busy one;
- at most 10000 new partitions per CreateTopics or CreatePartitions request (POLICY_VIOLATION);
- a client pipelining thousands of requests without reading the answers holds at most MAX_IN_FLIGHT of them.
"""

from __future__ import annotations

import socket
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from crc32c import crc32c
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from support import rawkafka
from support.brokerproc import BrokerProcess

from headwater.broker.server.broker_server import MAX_IN_FLIGHT
from headwater.kafka.compression import GZIP, LZ4, SNAPPY, ZSTD, compress
from headwater.kafka.records import Record, build_batch
from headwater.testing import unique
from headwater.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

MESSAGE_TOO_LARGE = 10
POLICY_VIOLATION = 44
GIB = 1 << 30


def _status_kb(proc: BrokerProcess, field: str) -> int:
    """A field of the broker process's /proc status (VmRSS, VmHWM), in kB."""
    assert proc.proc is not None
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{proc.proc.pid}/status")


def _served(bootstrap: str) -> None:
    """A new producer and consumer are served: a record produced is read back."""
    topic = unique("still-served")
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, key=b"k", value=b"after")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        msg = wait_until(lambda: consumer.poll(0.5), f"a record of {topic}", timeout=60)
        assert msg.error() is None and msg.value() == b"after"
    finally:
        consumer.close()


# -- decompression ------------------------------------------------------------------------------------------


def _zeros(codec: int, size: int) -> bytes:
    """A payload of ``codec`` expanding to ``size`` zero bytes, made without holding them."""
    chunk = 1 << 24
    if codec == ZSTD:  # a streamed frame: no content size in its header, as Java producers write it
        zc = zstandard.ZstdCompressor().compressobj()
        return b"".join([zc.compress(bytes(chunk)) for _ in range(size // chunk)] + [zc.flush()])
    if codec == GZIP:  # gzip members one after another form one gzip stream
        return zlib.compress(bytes(chunk), 9, wbits=31) * (size // chunk)
    return compress(codec, bytes(size))


def _batch(payload: bytes, codec: int) -> bytes:
    """One v2 batch of one record claimed, whose records are ``payload`` (as compressed by ``codec``)."""
    head = bytearray(build_batch([Record(key=b"k", value=b"v")])[:61])
    struct.pack_into(">i", head, 8, len(head) + len(payload) - 12)
    struct.pack_into(">h", head, 21, codec)
    body = bytes(head[21:]) + payload
    struct.pack_into(">I", head, 17, crc32c(body))
    return bytes(head[:21]) + body


@pytest.fixture(scope="module")
def bomb_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path_factory.mktemp("bombs") / "data") as proc:
        yield proc


# snappy expands at most about 21-fold, below the 64-fold limit: tests/unit/test_decompression_limits.py has it
@pytest.mark.parametrize(("codec", "expanded"), [(ZSTD, GIB), (GZIP, GIB), (LZ4, 128 << 20)],
                         ids=["zstd", "gzip", "lz4"])
def test_a_compression_bomb_is_refused_without_expanding_it(bomb_broker: BrokerProcess, codec: int,
                                                              expanded: int) -> None:
    # compacted: the broker reads its records (null keys), so it must decompress what it is sent;
    # max.message.bytes 1 MiB: a batch may expand to 64 MiB
    topic = unique("bombed")
    rawkafka.create_topic(bomb_broker.port, topic, 1, {"cleanup.policy": "compact", "max.message.bytes": "1048576"})
    batch = _batch(_zeros(codec, expanded), codec)
    assert len(batch) <= 1048576
    hwm_before = _status_kb(bomb_broker, "VmHWM")
    started = time.monotonic()
    with rawkafka.Conn(bomb_broker.port) as conn:
        answer = conn.produce(topic, batch)
    took = time.monotonic() - started
    assert answer.error_code == MESSAGE_TOO_LARGE, answer
    assert "expands to more than 67108864 bytes" in answer.error_message
    grown_mb = (_status_kb(bomb_broker, "VmHWM") - hwm_before) / 1024
    assert grown_mb < 300, f"the broker's peak memory grew by {grown_mb:.0f} MB for a refused batch"
    print(f"{len(batch)} bytes expanding to {expanded} refused in {took:.2f}s, peak memory +{grown_mb:.0f} MB")
    assert rawkafka.end_offset(bomb_broker.port, topic) == 0
    _served(bomb_broker.bootstrap)


def test_a_real_compressed_batch_still_passes_the_checks(bomb_broker: BrokerProcess) -> None:
    """Below the limit nothing changes: a compressed batch of each codec on a compacted topic is stored."""
    topic = unique("compressed-ok")
    rawkafka.create_topic(bomb_broker.port, topic, 1, {"cleanup.policy": "compact"})
    records = [Record(offset=i, key=b"key-%d" % i, value=bytes(1000)) for i in range(200)]
    with rawkafka.Conn(bomb_broker.port) as conn:
        for codec in (GZIP, SNAPPY, LZ4, ZSTD):
            assert conn.produce(topic, build_batch(records, codec=codec)).error_code == 0
    assert rawkafka.end_offset(bomb_broker.port, topic) == 800


# -- fetch.max.bytes ----------------------------------------------------------------------------------------


def test_fetch_answers_are_bounded_by_fetch_max_bytes(tmp_path: Path) -> None:
    cap = 100_000
    with BrokerProcess(tmp_path / "data", f"fetch.max.bytes={cap}") as proc:
        topic = unique("big")
        rawkafka.create_topic(proc.port, topic, 3)
        with rawkafka.Conn(proc.port) as conn:
            for p in range(3):
                for i in range(6):  # 6 batches of about 30 kB per partition: 540 kB in all
                    batch = build_batch([Record(offset=j, value=bytes([i]) * 3000) for j in range(10)])
                    assert conn.produce(topic, batch, partition=p).error_code == 0
            T = FetchRequest.FetchTopic
            everything = 2**31 - 1
            v2 = FetchRequest[2](replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
                T(topic=topic, partitions=[T.FetchPartition(partition=p, fetch_offset=0, partition_max_bytes=everything)
                                           for p in range(3)])])
            answers = [conn.call(v2, FetchResponse),
                       conn.call(rawkafka.fetch_req(topic, max_bytes=everything, partition_max_bytes=everything),
                                 FetchResponse)]
        for answer in answers:
            sizes = [len(p.records or b"") for t in answer.responses for p in t.partitions]
            assert 0 < sum(sizes) <= cap, sizes
        # a consumer still reads all of it, an answer at a time
        consumer = Consumer({"bootstrap.servers": proc.bootstrap, "group.id": unique("g"),
                             "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            seen: list[int] = []

            def all_read() -> bool:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    seen.append(1)
                return len(seen) == 180

            wait_until(all_read, "the 180 records", timeout=60, seen=lambda: len(seen))
        finally:
            consumer.close()


# -- connections --------------------------------------------------------------------------------------------


def _open(port: int) -> rawkafka.Conn:
    """A connection that was answered (so the broker admitted it)."""
    conn = rawkafka.Conn(port, timeout=15)
    conn.call(ApiVersionsRequest[0](), ApiVersionsResponse)
    return conn


def _answered(port: int) -> bool:
    try:
        _open(port).close()
        return True
    except (AssertionError, OSError):
        return False


@pytest.mark.parametrize("limit", ["max.connections=3", "max.connections.per.ip.overrides=127.0.0.1:3"])
def test_a_connection_over_the_limit_is_closed(tmp_path: Path, limit: str) -> None:
    with BrokerProcess(tmp_path / "data", limit, "max.connections.per.ip=100") as proc:
        held = [_open(proc.port) for _ in range(3)]
        extra = rawkafka.Conn(proc.port, timeout=15)
        extra.assert_closed(timeout=15)
        extra.close()
        assert limit.split("=")[0].removesuffix(".overrides") in proc.log_text(since_start=True)
        for conn in held:  # those admitted are still served
            conn.call(ApiVersionsRequest[0](), ApiVersionsResponse)
        held.pop().close()
        wait_until(lambda: _answered(proc.port), "a new connection served once one closed", timeout=30)
        for conn in held:
            conn.close()


def test_an_idle_connection_is_closed_and_a_busy_one_is_not(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data", "connections.max.idle.ms=1000") as proc:
        opened = time.monotonic()  # the idle connection's last answer comes after this
        idle, busy = _open(proc.port), _open(proc.port)
        closed_at: list[float] = []

        def idle_closed() -> bool:
            busy.call(ApiVersionsRequest[0](), ApiVersionsResponse)  # keeps the busy one busy
            closed, _ = idle.wait_closed(timeout=0.2)
            if closed:
                closed_at.append(time.monotonic())
            return closed

        wait_until(idle_closed, "the idle connection closed", timeout=60, interval=0.1)
        assert closed_at[0] - opened >= 1.0
        busy.call(ApiVersionsRequest[0](), ApiVersionsResponse)
        assert "connections.max.idle.ms" in proc.log_text(since_start=True)
        idle.close()
        busy.close()


# -- partitions per request ---------------------------------------------------------------------------------


def test_partitions_per_request_are_bounded(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    huge, fine = unique("huge"), unique("fine")
    futures = admin.create_topics([NewTopic(huge, 10_001), NewTopic(fine, 1)])
    for name in (huge, fine):  # refused whole, as Kafka's controller refuses it
        with pytest.raises(KafkaException) as refused:
            futures[name].result(30)
        assert refused.value.args[0].code() == POLICY_VIOLATION
        assert refused.value.args[0].str() == "Excessively large number of partitions per request."
    admin.create_topics([NewTopic(fine, 2)])[fine].result(30)
    with pytest.raises(KafkaException) as grown:
        admin.create_partitions([NewPartitions(fine, 10_003)])[fine].result(30)
    assert grown.value.args[0].code() == POLICY_VIOLATION
    admin.create_partitions([NewPartitions(fine, 4)])[fine].result(30)
    metadata = admin.list_topics(timeout=30).topics
    assert huge not in metadata and len(metadata[fine].partitions) == 4


# -- pipelined requests -------------------------------------------------------------------------------------


def test_pipelined_requests_are_bounded_per_connection(tmp_path: Path) -> None:
    """Thousands of fetches (2 MB answers each) pipelined without reading an answer: the broker reads at most
    MAX_IN_FLIGHT requests ahead and starts a fetch only once the earlier answers are written, so it holds
    one fetch answer (not 64: 128 MB here, 3.5 GB at the default fetch.max.bytes), and serves others."""
    answer_mb = 2
    with BrokerProcess(tmp_path / "data") as proc:
        topic = unique("pipelined")
        rawkafka.create_topic(proc.port, topic, 1)
        with rawkafka.Conn(proc.port) as conn:
            for i in range(8 * answer_mb):
                assert conn.produce(topic, build_batch([Record(offset=j, value=bytes([i]) * 1000)
                                                       for j in range(128)])).error_code == 0
        request = rawkafka.frame(rawkafka.fetch_req(topic, partition_max_bytes=answer_mb << 20), 1)
        rss_before = _status_kb(proc, "VmRSS")
        flood = socket.create_connection(("127.0.0.1", proc.port))
        flood.setblocking(False)
        sent, deadline = 0, time.monotonic() + 10
        while sent < 5000 * len(request) and time.monotonic() < deadline:
            try:
                sent += flood.send(request[sent % len(request):])
            except BlockingIOError:
                time.sleep(0.01)
        requests = sent // len(request)
        assert requests > 4 * MAX_IN_FLIGHT, f"only {requests} requests could be sent"
        time.sleep(1)  # let the broker read what it will
        assert _answered(proc.port) and rawkafka.end_offset(proc.port, topic) == 128 * 8 * answer_mb
        grown_mb = (_status_kb(proc, "VmRSS") - rss_before) / 1024
        print(f"{requests} fetches of {answer_mb} MB pipelined; broker memory +{grown_mb:.0f} MB")
        assert grown_mb < MAX_IN_FLIGHT * answer_mb / 4, f"broker memory grew by {grown_mb:.0f} MB"
        flood.close()
        _served(proc.bootstrap)


def test_pipelined_fetches_are_all_answered_in_order(broker: BrokerProcess) -> None:
    """Fetches pipelined with other requests are answered, in order, by a client that reads."""
    topic = unique("pipelined-ok")
    rawkafka.create_topic(broker.port, topic, 1)
    with rawkafka.Conn(broker.port) as conn:
        assert conn.produce(topic, build_batch([Record(value=b"x")])).error_code == 0
        requests = [rawkafka.fetch_req(topic) if i % 2 else ApiVersionsRequest[0]() for i in range(200)]
        conn.send_raw(b"".join(rawkafka.frame(r, cid) for cid, r in enumerate(requests, 1)))
        for cid, r in enumerate(requests, 1):
            got, answer = conn.recv(FetchResponse if cid % 2 == 0 else ApiVersionsResponse, r.API_VERSION)
            assert got == cid
            if cid % 2 == 0:
                assert answer.responses[0].partitions[0].records
