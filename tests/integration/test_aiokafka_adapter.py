"""Every private aiokafka entry point the worker uses, against the real broker.

``headwater.connect.kafka`` is the only code that touches aiokafka's internals. Each test here
names one of them, so an aiokafka release that changes it fails a test that says which, instead
of a worker at run time. (The sink's batch fetcher has its own module: test_record_fetcher.py.)
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from typing import Any

import aiokafka
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from support.hwclients import unique

from headwater.connect import kafka as adapter
from headwater.connect.kafka import GroupClient, RecordFetcher, fill_batch, murmur2
from headwater.connect.kafka.partitioner import partition_for_key
from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import BatchHeader

ROOT = Path(__file__).resolve().parents[2]
PRIVATE = ("aiokafka.consumer", "aiokafka.producer", "aiokafka.client", "aiokafka.protocol", "aiokafka.partitioner",
           "aiokafka.record", "aiokafka.conn", "aiokafka.cluster", "aiokafka.coordinator", "aiokafka.util")


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_installed_aiokafka_is_in_the_supported_range() -> None:
    low, high = adapter.SUPPORTED_AIOKAFKA
    assert adapter.supported(), f"aiokafka {aiokafka.__version__} is outside [{low}, {high})"
    assert not adapter.supported(high) and adapter.supported(low)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'"aiokafka>={low[0]}.{low[1]},<{high[0]}.{high[1]}"' in pyproject, "pyproject pins another range"


def test_private_modules_are_imported_by_the_adapter_only() -> None:
    offenders = []
    for folder in ("headwater", "broker", "connect", "connectors"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.is_relative_to(ROOT / "connect" / "kafka"):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith(PRIVATE)]
    assert offenders == []


def test_murmur2_partitioner_matches_kafka() -> None:
    # Kafka's own vectors (UtilsTest.testMurmur2): Java's signed 32-bit results.
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
               b"a-little-bit-longer-string": -1486304829,
               b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}
    for key, expected in vectors.items():
        assert murmur2(key) == expected, key
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7


def test_batch_builder_fill_batch(broker) -> None:
    """fill_batch writes values through the producer's record builder, stops when the batch is full,
    and the broker stores exactly those records."""
    topic = unique("adapter-fill")
    values: list[bytes | None] = [f"line-{i}".encode() for i in range(2000)]

    async def go() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", max_batch_size=16384)
        await producer.start()
        try:
            done = 0
            batches = 0
            while done < len(values):
                builder = producer.create_batch()
                stopped = fill_batch(builder, b"k", values, done, 1_700_000_000_000)
                assert done < stopped <= len(values)
                if stopped < len(values):
                    assert builder.record_count() == stopped - done  # full: the rest goes in the next batch
                done = stopped
                batches += 1
                await (await producer.send_batch(builder, topic, partition=0))
            assert batches > 1, "a 16 KiB batch should not hold 2000 records"
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < len(values):
                for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                    got += [m.value for m in msgs if m.key == b"k" and m.timestamp == 1_700_000_000_000]
        finally:
            await consumer.stop()
        return got

    assert _run(go()) == values


def test_record_fetcher_recognises_the_fetcher_internals(broker) -> None:
    topic = unique("adapter-fetch")

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"one", partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            fetcher = RecordFetcher(consumer)
            assert fetcher.fast, "aiokafka.consumer.fetcher internals changed: the sink would fall back to getmany"
            got: dict = {}
            while not got:
                got = await fetcher.getmany(1000, 10)
            assert [m.value for m in got[tp]] == [b"one"]
        finally:
            await consumer.stop()

    _run(go())


def test_group_client_join_sync_heartbeat_leave(broker) -> None:
    """The low-level client and group request classes: a one-member ``connect`` group."""
    group = unique("adapter-group")

    async def go() -> None:
        client = GroupClient(broker.bootstrap, "adapter-test", request_timeout_ms=30000)
        await client.bootstrap()
        try:
            coordinator = await client.find_coordinator(group)
            joined = await client.join(coordinator, group, 10000, 10000, "", "connect", [("sessioned", b"meta")])
            if joined.error == ErrorCode.MEMBER_ID_REQUIRED:  # newer JoinGroup versions ask for a second join
                joined = await client.join(coordinator, group, 10000, 10000, joined.member_id, "connect",
                                           [("sessioned", b"meta")])
            assert joined.error == ErrorCode.NONE
            assert joined.leader_id == joined.member_id and joined.protocol == "sessioned"
            assert joined.members == [(joined.member_id, b"meta")]
            synced = await client.sync(coordinator, group, joined.generation, joined.member_id,
                                       [(joined.member_id, b"assignment")])
            assert synced.error == ErrorCode.NONE and synced.assignment == b"assignment"
            assert await client.heartbeat(coordinator, group, joined.generation, joined.member_id) == ErrorCode.NONE
            assert await client.leave(coordinator, group, joined.member_id) == ErrorCode.NONE
            assert (await client.heartbeat(coordinator, group, joined.generation, joined.member_id)
                    == ErrorCode.UNKNOWN_MEMBER_ID)
        finally:
            await client.close()

    _run(go())


def test_prebuilt_batches_and_batch_fetcher_copy_bytes_exactly(broker) -> None:
    """BatchFetcher returns the broker's batch bytes (over the consumer's client); PrebuiltBatch sends a
    copied batch through ``send_batch``, idempotent or not: the copy holds the same records, and the
    fetcher resumes at its advanced position and reports the high watermark."""
    from headwater.connect.kafka import PrebuiltBatch
    from headwater.connect.kafka.raw_fetch import BatchFetcher
    from headwater.kafka.records import copy_batch, decode_batch_records, iter_batches

    source, target = unique("adapter-raw-src"), unique("adapter-raw-dst")

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=20)
        await producer.start()
        try:
            futures = [await producer.send(source, value=f"v{i}".encode(), key=b"k", partition=0,
                                           headers=[("h", b"x")]) for i in range(300)]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
        await consumer.start()
        tp = TopicPartition(source, 0)
        fetcher = BatchFetcher(consumer, {tp: 0}, max_wait_ms=200)
        try:
            got: list[tuple[int, BatchHeader, bytes]] = []
            while sum(h.record_count for _, h, _ in got) < 300:
                answer = (await fetcher.fetch()).get(tp)
                data = answer.data if answer is not None else b""
                assert answer is None or answer.aborted is None  # read_uncommitted: no aborted list kept
                for pos, header in iter_batches(data):
                    got.append((pos, header, data))
                    fetcher.advance(tp, header.last_offset + 1)
            assert fetcher.highwater[tp] == 300 and fetcher.positions[tp] == 300
            assert (await fetcher.fetch()).get(tp) is None  # nothing past the end
        finally:
            await fetcher.close()
            await consumer.stop()
        for idempotent in (False, True):
            out = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=idempotent)
            await out.start()
            try:
                for pos, header, data in got:
                    copied = copy_batch(data, pos, header)
                    ack = await (await out.send_batch(PrebuiltBatch(copied, header.record_count), target,
                                                      partition=0))
                    assert ack.offset >= 0
            finally:
                await out.stop()
        reader = AIOKafkaConsumer(target, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                                  enable_auto_commit=False)
        await reader.start()
        copied_records: list[Any] = []
        try:
            while len(copied_records) < 600:
                for msgs in (await reader.getmany(timeout_ms=1000)).values():
                    copied_records += [(m.key, m.value, list(m.headers)) for m in msgs]
        finally:
            await reader.stop()
        originals = [(r.key, r.value, [(k, v) for k, v in r.headers]) for pos, _, data in got
                     for r in decode_batch_records(data, pos)[1]]
        assert copied_records == originals * 2

    _run(go())


def test_admin_partition_counts_and_group_offset_commit(broker) -> None:
    """partition_counts reads one Metadata response; commit_group_offsets commits for an empty group
    outside any generation, as AdminClient.alterConsumerGroupOffsets does."""
    from headwater.connect.kafka.admin import commit_group_offsets, partition_counts

    topic, group = unique("adapter-admin"), unique("adapter-group")

    async def go() -> None:
        admin = adapter.admin_client(broker.bootstrap)
        await admin.start()
        try:
            from aiokafka.admin import NewTopic
            await admin.create_topics([NewTopic(topic, 3, 1)])
            assert (await partition_counts(admin))[topic] == 3
            await commit_group_offsets(admin, group, {(topic, 0): 5, (topic, 2): 7})
            committed = await admin.list_consumer_group_offsets(group)
            assert {tp.partition: m.offset for tp, m in committed.items() if tp.topic == topic} == {0: 5, 2: 7}
        finally:
            await admin.close()

    _run(go())


def test_fence_producers_bumps_each_ids_epoch(broker) -> None:
    """fence_producers sends InitProducerId (aiokafka.protocol.transaction) through the admin client's
    _send_request_to_node to each id's transaction coordinator: a producer with an open transaction is
    fenced at its commit; an id the coordinator cannot take is named in the error."""
    from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

    from headwater.connect.kafka.fencing import FencingFailed, fence_producers

    topic, tid = unique("adapter-fence"), unique("adapter-tid")

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=tid)
        await producer.start()
        try:
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"zombie", partition=0)
            await fence_producers(broker.bootstrap, {}, [tid, unique("adapter-unused")], 30000)
            with pytest.raises((ProducerFenced, InvalidProducerEpoch)):
                await producer.commit_transaction()
        finally:
            try:
                await producer.stop()
            except (ProducerFenced, InvalidProducerEpoch):
                pass
        # above transaction.max.timeout.ms (15 min by default): refused, not retried
        with pytest.raises(FencingFailed, match=f"{tid}.*error code 50"):
            await fence_producers(broker.bootstrap, {}, [tid], 3_600_000)

    _run(go())


@pytest.mark.slow
def test_delivery_timeout_outlasts_request_timeout_and_stop_producer_aborts(fresh_broker) -> None:
    """``delivery.timeout.ms`` sets the accumulator's batch TTL: a batch is retried (aiokafka re-queues it at the
    head of its partition) through a broker outage longer than request.timeout.ms, where aiokafka alone gives
    up after request.timeout.ms; ``stop_producer`` fails what is still undelivered at its timeout instead of
    waiting for the TTL."""
    fresh_broker.start()
    topic = unique("adapter-delivery")

    async def go() -> None:
        settings = {"request.timeout.ms": "1500", "retry.backoff.ms": "100", "metadata.max.age.ms": "1000"}
        patient = adapter.producer(fresh_broker.bootstrap, {**settings, "delivery.timeout.ms": "60000"}, acks="all")
        hasty = adapter.producer(fresh_broker.bootstrap, settings, acks="all")
        for p in (patient, hasty):
            await p.start()
            await (await p.send(topic, b"before", partition=0))
        try:
            await asyncio.to_thread(fresh_broker.stop)
            acks = [await p.send(topic, b"during", partition=0) for p in (patient, hasty)]
            await asyncio.sleep(4)  # past request.timeout.ms
            await asyncio.to_thread(fresh_broker.start)
            assert (await asyncio.wait_for(acks[0], 30)).offset >= 1  # delivered after the outage
            await asyncio.wait([acks[1]], timeout=30)
            assert acks[1].done() and acks[1].exception() is not None  # given up after request.timeout.ms
            await asyncio.to_thread(fresh_broker.stop)
            late = await patient.send(topic, b"never", partition=0)
            started = asyncio.get_running_loop().time()
            await adapter.stop_producer(patient, 1.0)  # returns: the batch failed rather than retried for 60 s
            assert asyncio.get_running_loop().time() - started < 10
            assert late.done() and late.exception() is not None
        finally:
            await hasty.stop()
            await patient.stop()

    _run(go())


def test_produce_requests_stay_within_max_request_size(tmp_path) -> None:
    """Batches for four partitions queued at once, 200 kB each: aiokafka alone sends them in one request of
    800 kB, which a broker with socket.request.max.bytes=500000 answers by closing the connection (again
    at every retry); the adapter's producer (max.request.size 300000) sends them a request each."""
    from support.brokerproc import BrokerProcess

    from headwater.connect.kafka import PrebuiltBatch
    from headwater.kafka.records import Record, build_batch

    topic = unique("adapter-request-size")
    batches = [build_batch([Record(i, 1_700_000_000_000, b"k", bytes([p]) * 2000, []) for i in range(100)])
               for p in range(4)]
    assert all(180_000 < len(b) < 300_000 for b in batches)

    async def go(bootstrap: str) -> None:
        admin = adapter.admin_client(bootstrap)
        await admin.start()
        try:
            from aiokafka.admin import NewTopic
            await admin.create_topics([NewTopic(topic, 4, 1)])
        finally:
            await admin.close()
        producer = adapter.producer(bootstrap, {"max.request.size": "300000", "delivery.timeout.ms": "20000",
                                                "request.timeout.ms": "5000"}, acks="all")
        await producer.start()
        try:
            await producer.partitions_for(topic)
            acks = [await producer.send_batch(PrebuiltBatch(b, 100), topic, partition=p) for p, b in enumerate(batches)]
            results = await asyncio.wait_for(asyncio.gather(*acks), 30)
            assert [r.offset for r in results] == [0, 0, 0, 0]
        finally:
            await adapter.stop_producer(producer, 5)

    with BrokerProcess(tmp_path / "data", "socket.request.max.bytes=500000") as broker:
        _run(go(broker.bootstrap))


def test_a_failed_bootstrap_says_why() -> None:
    # aiokafka's bootstrap only logs each server's error; bootstrap_failure (aiokafka.conn.create_conn with the
    # client's private settings) puts it in the exception the task's trace shows
    import socket

    from aiokafka.errors import KafkaConnectionError

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def go() -> str:
        producer = adapter.producer(f"127.0.0.1:{port}", {}, request_timeout_ms=5000)
        try:
            await producer.start()
        except KafkaConnectionError as exc:
            return str(exc)
        finally:
            await producer.stop()
        return "started"

    message = _run(go())
    assert f"127.0.0.1:{port} (PLAINTEXT): " in message and "Unable to bootstrap" in message, message
