"""Every private aiokafka entry point the worker uses, against the real broker.

``headwater.connect.kafka`` is the only code that touches aiokafka's internals. Each test here
names one of them, so an aiokafka release that changes it fails a test that says which, instead
of a worker at run time. (The sink's batch fetcher has its own module: test_record_fetcher.py.)
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import aiokafka
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from hwclients import unique

from headwater.connect import kafka as adapter
from headwater.connect.kafka import GroupClient, RecordFetcher, fill_batch, murmur2
from headwater.connect.kafka.partitioner import partition_for_key
from headwater.kafka.errors import ErrorCode

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
    values = [f"line-{i}".encode() for i in range(2000)]

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
