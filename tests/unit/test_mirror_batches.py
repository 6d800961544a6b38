"""How the mirror's source task turns fetched bytes into batches to send: whole when it can, rebuilt when
it cannot (the fetch began inside a batch, compaction left gaps, LogAppendTime), small ones merged,
control batches dropped, and with read_committed the batches of aborted transactions; the records and their
upstream offsets always those of the source."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from aiokafka import TopicPartition

from headwater.connect.api import RecordBatches
from headwater.connect.kafka import raw_fetch
from headwater.connectors.mirror.source import MERGE_MAX, MirrorSourceTask
from headwater.kafka.aborted import AbortedTransactions
from headwater.kafka.compression import LZ4
from headwater.kafka.records import (
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    Record,
    build_batch,
    decode_batch_records,
    iter_batches,
    parse_header,
)

TP = TopicPartition("orders", 0)


class Fetched:
    """What the task reads from its fetcher: the bytes of one fetch, positions it advances."""

    def __init__(self, data: bytes, position: int, aborted: list[tuple[int, int]] | None = None) -> None:
        self.data, self.positions, self.highwater = data, {TP: position}, {TP: 10_000}
        self.aborted = aborted  # read_committed: the answer's (producer id, first offset) pairs
        self.prefetched = 0

    async def fetch(self) -> dict[TopicPartition, raw_fetch.Fetched]:
        return {TP: raw_fetch.Fetched(self.data, None if self.aborted is None else AbortedTransactions(self.aborted))}

    def advance(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    def prefetch(self) -> None:
        self.prefetched += 1


def records(offsets: list[int], ts: int = 1_000) -> list[Record]:
    # incompressible values of 10 kB: ten records make a batch too big to merge, even compressed
    return [Record(o, ts + o, f"k{o}".encode(), random.Random(o).randbytes(10_000), [("h", str(o).encode())])
            for o in offsets]


def task_over(data: bytes, position: int, aborted: list[tuple[int, int]] | None = None) -> MirrorSourceTask:
    task = MirrorSourceTask()
    task.cluster, task.targets, task.partitions = "A", {"orders": "A.orders"}, [("orders", 0)]
    task.fetcher = Fetched(data, position, aborted)  # type: ignore[assignment]
    task.poll_timeout = 100
    return task


def sent(task: MirrorSourceTask, data: bytes, position: int) -> tuple[list[Any], list[list[int]]]:
    """Each batch the task hands over decoded, with the upstream offsets it recorded for it."""
    out = asyncio.run(task.poll_encoded())
    assert out is not None and len(out) == 1
    rb = out[0]
    assert isinstance(rb, RecordBatches)
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


def marker(offset: int, producer_id: int, commit: bool) -> bytes:
    key = b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00"
    return build_batch([Record(offset, 0, key, b"")], base_offset=offset, producer_id=producer_id,
                       producer_epoch=0, attributes=ATTR_CONTROL | ATTR_TRANSACTIONAL)


def transactional(offsets: list[int], producer_id: int) -> bytes:
    return build_batch(records(offsets), base_offset=offsets[0], producer_id=producer_id, producer_epoch=0,
                       base_sequence=0, attributes=ATTR_TRANSACTIONAL)


def test_read_committed_drops_aborted_transactions() -> None:
    """Producers 7 and 8 interleaved: 7 aborts (offsets 0-1, marker 4), 8 commits (2-3, marker 5); then 7
    commits a second transaction (6, marker 7), which its earlier abort must not hide."""
    data = (transactional([0, 1], 7) + transactional([2, 3], 8) + marker(4, 7, False) + marker(5, 8, True)
            + transactional([6], 7) + marker(7, 7, True))
    _, upstream = sent(task_over(data, 0, aborted=[(7, 0)]), data, 0)
    assert [u for run in upstream for u in run] == [2, 3, 6]
    _, upstream = sent(task_over(data, 0), data, 0)  # read_uncommitted: everything but the markers
    assert [u for run in upstream for u in run] == [0, 1, 2, 3, 6]


def test_isolation_level_setting() -> None:
    assert raw_fetch.isolation_level({}) == raw_fetch.READ_UNCOMMITTED
    assert raw_fetch.isolation_level({"isolation.level": "read_committed"}) == raw_fetch.READ_COMMITTED
    with pytest.raises(ValueError, match="isolation.level must be read_uncommitted or read_committed, not 'committed'"):
        raw_fetch.isolation_level({"isolation.level": "committed"})


def test_small_batches_are_merged_into_one() -> None:
    small = [Record(o, 5 + o, b"k", b"v%d" % o, []) for o in range(100)]
    data = b"".join(build_batch(small[i:i + 5], base_offset=i) for i in range(0, 100, 5))
    task = task_over(data, 0)
    decoded, upstream = sent(task, data, 0)
    assert len(decoded) == 1 and upstream == [list(range(100))]
    assert [(r.value, r.timestamp) for r in decoded[0]] == [(r.value, r.timestamp) for r in small]


def test_merged_batches_stay_within_merge_max() -> None:
    """A backlog of small batches (a restart after a crash fetches megabytes of them): merged records take
    more bytes than in their own batches (longer offset and timestamp deltas), so merges are bounded by the
    batch that comes out. It used to be bounded by the batches that went in: 1 MiB of them became one batch
    of over 1,048,588 bytes, Kafka's max.message.bytes, and the target refused it."""
    small = [Record(o, 1_700_000_000_000 + 8 * o, b"k%d" % (o % 50), b"v%d" % o * 3, [("n", b"%d" % o)])
             for o in range(80_000)]
    data = b"".join(build_batch(small[i:i + 40], base_offset=i) for i in range(0, len(small), 40))
    task = task_over(data, 0)
    out = asyncio.run(task.poll_encoded())
    assert out is not None and len(out) == 1
    rb = out[0]
    assert isinstance(rb, RecordBatches)
    assert len(rb.batches) > 1 and all(len(b) <= MERGE_MAX for b in rb.batches)
    assert all(len(b) > MERGE_MAX * 0.9 for b in rb.batches[:-1])  # as few batches as fit
    _, upstream, _ = task._raw[id(rb)]
    assert [u for run in upstream for u in run] == list(range(80_000))
    assert [r.value for b in rb.batches for r in decode_batch_records(b)[1]] == [r.value for r in small]


class Syncs:
    """What the task hands its offset sync writer: (upstream run, start, end, downstream) per call."""

    def __init__(self) -> None:
        self.runs: list[tuple[list[int], int, int, int]] = []

    def run(self, tp: tuple[str, int], upstream: list[int], start: int, end: int, downstream: int) -> None:
        self.runs.append((list(upstream[start:end]), start, end, downstream))

    def flush(self) -> None:
        pass

    async def send(self) -> None:
        pass


def test_offset_syncs_follow_batches_the_worker_split() -> None:
    """The worker splits a batch the target would not take whole: ``placed`` then has an entry for each
    piece, inside the task's batches; each piece's records are synced to where that piece landed."""
    big = build_batch(records(list(range(0, 10))))  # whole, uncompressed, over 100 kB
    data = big + build_batch(records(list(range(10, 20))), base_offset=10)
    task = task_over(data, 0)
    syncs = task.syncs = Syncs()
    task._acked = lambda *args: None  # type: ignore[method-assign]
    out = asyncio.run(task.poll_encoded())
    assert out is not None
    rb = out[0]
    assert isinstance(rb, RecordBatches)
    assert rb.counts == [10, 10]
    # the first batch went as pieces of 4, 4 and 2 records to 100, 104, 108; the second whole to 110
    asyncio.run(task.commit_encoded(rb, [(0, 100), (4, 104), (8, 108), (10, 110)]))
    assert syncs.runs == [([0, 1, 2, 3], 0, 4, 100), ([4, 5, 6, 7], 4, 8, 104), ([8, 9], 8, 10, 108),
                          (list(range(10, 20)), 0, 10, 110)]
