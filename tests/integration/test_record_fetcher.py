"""RecordFetcher (the sink tasks' fetch path) against the real broker (3-partition topics): the same records as
aiokafka's getmany, positions honoured after a seek into a batch, max_records, pause."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from support.hwclients import unique

from headwater.connect.kafka import RecordFetcher


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _produce(bootstrap: str, topic: str, batches: int, per_batch: int, partitions: int = 1,
                   compression: str | None = None) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type=compression)
    await producer.start()
    try:
        n = 0
        for b in range(batches):
            partition = b % partitions
            builder = producer.create_batch()
            for _ in range(per_batch):
                headers = [("h", str(n).encode())] if n % 7 == 0 else []
                key = None if n % 5 == 0 else f"k{n}".encode()
                value = None if n % 11 == 0 else f"value-{n}".encode()
                builder.append(timestamp=1_700_000_000_000 + n, key=key, value=value, headers=headers)
                n += 1
            await (await producer.send_batch(builder, topic, partition=partition))
    finally:
        await producer.stop()


def _consumer(bootstrap: str, **kw) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **kw)


@contextlib.asynccontextmanager
async def _assigned(bootstrap: str, tps: list[TopicPartition], position: int | None = None):
    """A started consumer assigned ``tps`` (each sought to ``position`` if given); stopped after."""
    consumer = _consumer(bootstrap)
    await consumer.start()
    try:
        consumer.assign(tps)
        for tp in tps if position is not None else []:
            consumer.seek(tp, position)
        yield consumer
    finally:
        await consumer.stop()


def _row(tp: TopicPartition, m) -> tuple:
    return (tp.partition, m.offset, m.timestamp, m.timestamp_type, m.key, m.value, tuple(m.headers))


async def _drain(get, total: int) -> list[tuple]:
    rows: list[tuple] = []
    while len(rows) < total:
        got = await get()
        for tp, msgs in got.items():
            rows.extend(_row(tp, m) for m in msgs)
    return rows


def test_same_records_as_getmany(broker3) -> None:
    topic = unique("fetcher")

    async def go():
        await _produce(broker3.bootstrap, topic, batches=12, per_batch=250, partitions=2)
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        async with _assigned(broker3.bootstrap, tps) as plain, _assigned(broker3.bootstrap, tps) as lean:
            fetcher = RecordFetcher(lean)
            assert fetcher.fast, "aiokafka internals not recognised: the fast path would never run"
            expected = await _drain(lambda: plain.getmany(timeout_ms=500), 3000)
            got = await _drain(lambda: fetcher.getmany(500, 10000), 3000)
            assert sorted(got) == sorted(expected)
            assert len(got) == 3000
            # Positions moved exactly as getmany moves them, and nothing more arrives.
            for tp in tps:
                assert await lean.position(tp) == await plain.position(tp) == 1500
            assert await fetcher.getmany(200, 10000) == {}

    _run(go())


def test_seek_into_a_batch_and_max_records(broker) -> None:
    topic = unique("fetcher-seek")

    async def go():
        await _produce(broker.bootstrap, topic, batches=10, per_batch=100)
        tp = TopicPartition(topic, 0)
        async with _assigned(broker.bootstrap, [tp], 137) as consumer:  # 137: inside the second batch
            fetcher = RecordFetcher(consumer)
            offsets: list[int] = []
            calls = []
            while len(offsets) < 1000 - 137:
                got = await fetcher.getmany(500, 150)
                batch = [m.offset for m in got.get(tp, [])]
                calls.append(len(batch))
                offsets.extend(batch)
            assert offsets == list(range(137, 1000))  # no record before the position, none twice
            # max_records is honoured in whole batches: never more than one batch beyond it.
            assert max(calls) < 150 + 100
            assert len([c for c in calls if c]) > 1

    _run(go())


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches(broker3, compression: str) -> None:
    """Compressed batches: the same records as getmany, also from a position inside a batch."""
    topic = unique(f"fetcher-{compression}")

    async def go():
        await _produce(broker3.bootstrap, topic, batches=4, per_batch=200, compression=compression)
        tps = [TopicPartition(topic, 0)]
        # 333 lies inside the second batch (200-399)
        async with (_assigned(broker3.bootstrap, tps, 333) as plain,
                    _assigned(broker3.bootstrap, tps, 333) as lean):
            fetcher = RecordFetcher(lean)
            expected = await _drain(lambda: plain.getmany(timeout_ms=500), 800 - 333)
            got = await _drain(lambda: fetcher.getmany(500, 10000), 800 - 333)
            assert got == expected
            assert [row[1] for row in got] == list(range(333, 800))

    _run(go())


def test_paused_partition_returns_nothing(broker3) -> None:
    topic = unique("fetcher-pause")

    async def go():
        await _produce(broker3.bootstrap, topic, batches=2, per_batch=50, partitions=2)
        tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
        async with _assigned(broker3.bootstrap, [tp0, tp1]) as consumer:
            consumer.pause(tp1)
            fetcher = RecordFetcher(consumer)
            seen: dict[int, int] = {0: 0, 1: 0}
            for _ in range(6):
                for tp, msgs in (await fetcher.getmany(200, 10000)).items():
                    seen[tp.partition] += len(msgs)
            assert seen == {0: 50, 1: 0}
            consumer.resume(tp1)
            for _ in range(10):
                for tp, msgs in (await fetcher.getmany(200, 10000)).items():
                    seen[tp.partition] += len(msgs)
                if seen[1] == 50:
                    break
            assert seen == {0: 50, 1: 50}

    _run(go())


def test_drained_fetch_is_freed_without_garbage_collection(broker3) -> None:
    """The fetch buffer goes as soon as its records are drained (a reference cycle would keep it until
    the next collection: +100 MiB of RSS in a fast sink)."""
    topic = unique("fetcher-free")

    async def go():
        await _produce(broker3.bootstrap, topic, batches=1, per_batch=100)
        tp = TopicPartition(topic, 0)
        async with _assigned(broker3.bootstrap, [tp]) as consumer:
            fetcher = RecordFetcher(consumer)
            for _ in range(200):  # wait for the prefetch to land
                if tp in consumer._fetcher._records:
                    break
                await asyncio.sleep(0.02)
            ref = weakref.ref(consumer._fetcher._records[tp]._partition_records)
            gc.disable()
            try:
                got = await fetcher.getmany(500, 10000)
                assert len(got[tp]) == 100
                assert ref() is None, "drained PartitionRecords still alive: it is in a reference cycle"
            finally:
                gc.enable()

    _run(go())


def _corrupt_value(log_dir, topic: str, value: bytes) -> None:
    """Flip one byte of ``value`` where it lies in the partition's segment file (the broker reads fetches
    from the file, so the next fetch carries a batch whose CRC no longer matches)."""
    segment = log_dir / f"{topic}-0" / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    at = data.index(value)
    data[at] ^= 0x01
    segment.write_bytes(bytes(data))


def test_a_corrupted_batch_is_refused_unless_check_crcs_is_false(broker) -> None:
    """The sink's fetch checks each batch's CRC-32C with the fetched bytes (``CheckedRecords``); Kafka's
    consumer property ``check.crcs=false`` turns the check off."""
    from aiokafka.consumer import fetcher as aiokafka_fetcher
    from aiokafka.errors import CorruptRecordException

    from headwater.connect.kafka import consumer as make_consumer
    from headwater.connect.kafka.fetch import CheckedRecords

    assert aiokafka_fetcher.MemoryRecords is CheckedRecords  # fetched bytes kept for the check below
    topic = unique("fetcher-crc")

    async def fetch_all(props: dict[str, str]) -> list[bytes | None]:
        consumer = make_consumer(broker.bootstrap, props, enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            fetcher = RecordFetcher(consumer)
            values: list[bytes | None] = []
            while len(values) < 3:
                for msgs in (await fetcher.getmany(500, 10000)).values():
                    values += [m.value for m in msgs]
            return values
        finally:
            await consumer.stop()

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
        await producer.start()
        try:
            builder = producer.create_batch()
            for value in (b"first", b"second-value", b"third"):
                builder.append(timestamp=None, key=None, value=value, headers=[])
            await (await producer.send_batch(builder, topic, partition=0))
        finally:
            await producer.stop()
        assert await fetch_all({}) == [b"first", b"second-value", b"third"]  # intact: the check passes
        _corrupt_value(broker.log_dir, topic, b"second-value")
        with pytest.raises(CorruptRecordException):
            await fetch_all({})
        with pytest.raises(CorruptRecordException):
            await fetch_all({"check.crcs": "true"})
        assert await fetch_all({"check.crcs": "false"}) == [b"first", b"recond-value", b"third"]
        assert await fetch_all({"check.crcs": " FALSE "}) == [b"first", b"recond-value", b"third"]
        with pytest.raises(ValueError, match="check.crcs must be true or false, got 'flase'"):
            make_consumer(broker.bootstrap, {"check.crcs": "flase"})

    _run(go())


def test_checked_records_find_a_wrong_crc_in_any_batch_of_a_fetch() -> None:
    """``_drain``'s CRC check follows the batches through the fetched buffer: a wrong byte in the third of
    four batches is found there, and the batches before it are delivered first."""
    from aiokafka.producer.message_accumulator import BatchBuilder
    from aiokafka.record.memory_records import MemoryRecords

    from headwater.connect.kafka.fetch import CheckedRecords, _checked_end

    batches = []
    for b in range(4):
        builder = BatchBuilder(1 << 16, 0)
        for i in range(1 + b * 3):
            builder.append(timestamp=1_700_000_000_000, key=None, value=f"v{b}-{i}".encode() * (i + 1), headers=[])
        batches.append(bytes(builder._build()))
    data = b"".join(batches)
    records = CheckedRecords(data)
    plain = MemoryRecords(data)
    at = 0
    while records.has_next():
        batch, same = records.next_batch(), plain.next_batch()
        assert [r.value for r in batch] == [r.value for r in same]
        at = _checked_end(data, at, batch)
        assert at > 0
    assert at == len(data) and not plain.has_next()
    wrong = bytearray(data)
    wrong[len(batches[0]) + len(batches[1]) + 70] ^= 0x20  # inside the third batch's records
    records, at, ends = CheckedRecords(bytes(wrong)), 0, []
    while records.has_next():
        at = _checked_end(records.data, at, records.next_batch())
        ends.append(at)
        if at < 0:
            break
    assert ends == [len(batches[0]), len(batches[0]) + len(batches[1]), -1]
