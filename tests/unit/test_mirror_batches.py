"""How the mirror's source task turns fetched bytes into batches to send: whole when it can, rebuilt when
it cannot (the fetch began inside a batch, compaction left gaps, LogAppendTime), small ones merged,
control batches dropped; the records and their upstream offsets always those of the source."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from aiokafka import TopicPartition

from headwater.connectors.mirror.source import MirrorSourceTask
from headwater.kafka.compression import LZ4
from headwater.kafka.records import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    parse_header,
)

TP = TopicPartition("orders", 0)


class Fetched:
    """What the task reads from its fetcher: the bytes of one fetch, positions it advances."""

    def __init__(self, data: bytes, position: int) -> None:
        self.data, self.positions, self.highwater = data, {TP: position}, {TP: 10_000}
        self.prefetched = 0

    async def fetch(self) -> dict[TopicPartition, bytes]:
        return {TP: self.data}

    def advance(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def prefetch(self) -> None:
        self.prefetched += 1


def records(offsets: list[int], ts: int = 1_000) -> list[Record]:
    # incompressible values of 10 kB: ten records make a batch too big to merge, even compressed
    return [Record(o, ts + o, f"k{o}".encode(), random.Random(o).randbytes(10_000), [("h", str(o).encode())])
            for o in offsets]


def task_over(data: bytes, position: int) -> MirrorSourceTask:
    task = MirrorSourceTask()
    task.cluster, task.targets, task.partitions = "A", {"orders": "A.orders"}, [("orders", 0)]
    task.fetcher = Fetched(data, position)  # type: ignore[assignment]
    task.poll_timeout = 100
    return task


def sent(task: MirrorSourceTask, data: bytes, position: int) -> tuple[list[Any], list[list[int]]]:
    """Each batch the task hands over decoded, with the upstream offsets it recorded for it."""
    out = asyncio.run(task.poll_encoded())
    assert out is not None and len(out) == 1
    rb = out[0]
    assert (rb.topic, rb.kafka_partition) == ("A.orders", 0)
    _, upstream, _ = task._raw[id(rb)]
    decoded = []
    for batch, count in zip(rb.batches, rb.counts, strict=True):
        header, recs = decode_batch_records(batch)
        assert header.producer_id == -1 and header.base_offset == 0 and header.record_count == count
        assert not header.attributes & ATTR_LOG_APPEND_TIME
        decoded.append(recs)
    return decoded, [list(u) for u in upstream]


def test_big_batches_go_whole_and_the_partial_first_one_is_cut() -> None:
    data = build_batch(records(list(range(0, 10))), codec=LZ4) + build_batch(records(list(range(10, 20))),
                                                                                  base_offset=10, codec=LZ4)
    assert all(h.size > 64 << 10 and h.codec == LZ4 for _, h in iter_batches(data))
    task = task_over(data, 4)  # the fetch began inside the first batch
    decoded, upstream = sent(task, data, 4)
    assert upstream == [list(range(4, 10)), list(range(10, 20))]
    assert [r.value for r in decoded[0]] == [r.value for r in records(list(range(4, 10)))]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded[1]] == \
        [(r.key, r.value, r.headers, r.timestamp) for r in records(list(range(10, 20)))]
    assert task.fetcher.positions[TP] == 20 and task.fetcher.prefetched == 1  # type: ignore[union-attr]
    assert (task.batches_rebuilt, task.batches_whole) == (1, 1)  # the second went as it was, compressed


def test_gaps_log_append_time_and_control_batches() -> None:
    gapped = build_batch(records([30, 31, 35, 36]), base_offset=30)  # compaction left a gap
    appended = bytearray(build_batch(records([40, 41]), base_offset=40, attributes=ATTR_LOG_APPEND_TIME))
    control = build_batch([Record(42, 0, b"\x00\x00\x00\x00", b"")], base_offset=42, attributes=ATTR_CONTROL)
    data = gapped + bytes(appended) + control
    task = task_over(data, 30)
    decoded, upstream = sent(task, data, 30)
    assert [u for run in upstream for u in run] == [30, 31, 35, 36, 40, 41]  # the control record is not copied
    flat = [r for batch in decoded for r in batch]
    append_time = parse_header(bytes(appended)).max_timestamp
    assert [r.timestamp for r in flat[4:]] == [append_time, append_time]  # as consumers saw them on the source
    assert [r.value for r in flat] == [r.value for r in records([30, 31, 35, 36, 40, 41])]
    assert task.fetcher.positions[TP] == 43  # type: ignore[union-attr]


def test_small_batches_are_merged_into_one() -> None:
    small = [Record(o, 5 + o, b"k", b"v%d" % o, []) for o in range(100)]
    data = b"".join(build_batch(small[i:i + 5], base_offset=i) for i in range(0, 100, 5))
    task = task_over(data, 0)
    decoded, upstream = sent(task, data, 0)
    assert len(decoded) == 1 and upstream == [list(range(100))]
    assert [(r.value, r.timestamp) for r in decoded[0]] == [(r.value, r.timestamp) for r in small]
