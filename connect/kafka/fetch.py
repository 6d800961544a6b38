"""Sink fetching without a ConsumerRecord per record.

aiokafka's ``getmany`` turns every fetched record into a 12-field ConsumerRecord through a
generator: about 1.5 us a record, most of a file sink's CPU. ``RecordFetcher.getmany``
does what ``AIOKafkaConsumer.getmany`` does (same waiting, positions, errors, wake-ups of
the prefetch task, control batches and aborted transactions) but takes each fetched
record batch whole, giving aiokafka's own record objects (``offset``, ``timestamp``,
``timestamp_type``, ``key``, ``value``, ``headers``). It relies on aiokafka's fetcher
internals; when they are not what it expects it uses ``getmany`` itself, whose records
have the same attributes.

Record batches' CRC-32C: aiokafka's ``validate_crc`` runs a table-driven CRC (about 1.7 GB/s here,
0.1 us a 160-byte record); the ``crc32c`` package (hardware CRC, over 20 GB/s) checks the same bytes
when the fetched buffer is at hand. ``CheckedRecords`` (aiokafka's ``MemoryRecords`` keeping its
buffer, put in the fetcher's place when this module loads) gives ``_drain`` that buffer. Checked only
when the consumer's ``check_crcs`` is set (Kafka's ``check.crcs``, default true).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any

import aiokafka
from aiokafka import TopicPartition
from aiokafka import errors as kafka_errors
from aiokafka.consumer import fetcher as _fetcher
from aiokafka.record.memory_records import MemoryRecords
from crc32c import crc32c

__all__ = ["CheckedRecords", "RecordFetcher"]

log = logging.getLogger(__name__)

_READ_COMMITTED = getattr(_fetcher, "READ_COMMITTED", 1)
_INTERNALS = (
    all(hasattr(_fetcher.FetchResult, a) for a in ("check_assignment", "has_more", "_update_position", "getall"))
    and all(hasattr(_fetcher.Fetcher, a) for a in ("fetched_records", "_create_fetch_waiter", "_notify"))
    and all(hasattr(_fetcher.PartitionRecords, a) for a in ("_consume_aborted_up_to", "_contains_abort_marker"))
)
_PARTITION_RECORDS_ATTRS = ("_records", "_check_crcs", "_isolation_level", "_aborted_producers", "next_fetch_offset")
# a record batch: base offset (8), length of the rest (4), partition leader epoch (4), magic (1), CRC (4), then the
# bytes the CRC covers (v2)
_LOG_OVERHEAD, _MAGIC_AT, _CRC_AT, _CRC_FROM = 12, 16, 17, 21


class CheckedRecords(MemoryRecords):
    """aiokafka's MemoryRecords (the batches of one partition's fetched bytes, read in order) that keeps
    its buffer, and ``at``, where the next batch ``_drain`` takes starts in it."""

    __slots__ = ("data", "at")

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.data = data
        self.at = 0


def _checked_end(data: bytes, at: int, batch: Any) -> int:
    """Where the next batch starts after the one at ``at`` in ``data`` (``batch``, aiokafka's object for it),
    or -1 when its CRC is not the one its header says."""
    end = at + _LOG_OVERHEAD + int.from_bytes(data[at + 8:at + _LOG_OVERHEAD], "big")
    if data[at + _MAGIC_AT] >= 2:
        ok = crc32c(memoryview(data)[at + _CRC_FROM:end]) == int.from_bytes(data[at + _CRC_AT:at + _CRC_FROM], "big")
    else:  # a legacy message set: its own CRC-32 layout
        ok = batch.validate_crc()
    return end if ok else -1


if _fetcher.MemoryRecords is MemoryRecords:  # the fetcher builds its fetched records with the name it imported
    _fetcher.MemoryRecords = CheckedRecords


class RecordFetcher:
    """``getmany`` for one started AIOKafkaConsumer, record batches taken whole."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        fetcher = getattr(consumer, "_fetcher", None)
        self.fast = (_INTERNALS and fetcher is not None
                     and all(hasattr(consumer, a) for a in ("_closed", "_coordinator", "_subscription"))
                     and hasattr(consumer._subscription, "fetch_context")
                     and all(hasattr(fetcher, a) for a in ("_records", "_subscriptions", "_wait_consume_future",
                                                           "_closed")))
        if not self.fast:
            log.warning("aiokafka %s: fetcher internals differ, sink fetches use getmany (slower)",
                        aiokafka.__version__)

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        consumer = self.consumer
        if not self.fast:
            return await consumer.getmany(timeout_ms=timeout_ms, max_records=max_records)
        if consumer._closed:
            raise kafka_errors.ConsumerStoppedError()
        consumer._coordinator.check_errors()
        with consumer._subscription.fetch_context():
            return await self._fetched(consumer._fetcher, timeout_ms / 1000, max_records)

    async def _fetched(self, fetcher: Any, timeout: float, max_records: int) -> dict[TopicPartition, list[Any]]:
        # Fetcher.fetched_records, with _drain in place of FetchResult.getall.
        while True:
            if fetcher._subscriptions.reassignment_in_progress:
                await fetcher._subscriptions.wait_for_assignment()
            start = time.monotonic()
            drained: dict[TopicPartition, list[Any]] = {}
            for tp in list(fetcher._records):
                result = fetcher._records[tp]
                if type(result) is _fetcher.FetchResult:
                    records = _drain(result, tp, max_records)
                    if not result.has_more():
                        del fetcher._records[tp]
                        fetcher._notify(fetcher._wait_consume_future)
                    if not records:
                        continue
                    drained[tp] = records
                    max_records -= len(records)
                    if max_records <= 0:
                        break
                elif drained:
                    return drained  # the error is raised on the next call
                else:
                    del fetcher._records[tp]
                    fetcher._notify(fetcher._wait_consume_future)
                    result.check_raise()
            if drained or not timeout:
                return drained
            waiter = fetcher._create_fetch_waiter()
            done, pending = await asyncio.wait([waiter], timeout=timeout)
            if not done or fetcher._closed:
                for fut in pending:
                    fut.cancel()
                return {}
            if waiter.done():
                waiter.result()
            timeout = max(0.0, timeout - (time.monotonic() - start))


def _drain(result: Any, tp: TopicPartition, max_records: int) -> list[Any]:
    """Whole record batches of one fetch result, until at least ``max_records`` (PartitionRecords'
    own rules: skip control batches, aborted transactions and records before the position)."""
    if not result.check_assignment(tp) or not result.has_more():
        return []
    part = result._partition_records
    iterator = getattr(part, "_records_iterator", None)
    if (iterator is None or inspect.getgeneratorstate(iterator) != inspect.GEN_CREATED
            or not all(hasattr(part, a) for a in _PARTITION_RECORDS_ATTRS)):
        return result.getall(max_records)  # aiokafka already started on it (or is not as expected)
    batches = part._records
    check = part._check_crcs
    data = batches.data if check and type(batches) is CheckedRecords else None
    out: list[Any] = []
    while len(out) < max_records and batches.has_next():
        batch = batches.next_batch()
        if data is not None:
            at = _checked_end(data, batches.at, batch)
            if at < 0:
                raise kafka_errors.CorruptRecordException(f"Invalid CRC - {tp}")
            batches.at = at
        elif check and not batch.validate_crc():
            raise kafka_errors.CorruptRecordException(f"Invalid CRC - {tp}")
        if part._isolation_level == _READ_COMMITTED and batch.producer_id is not None:
            part._consume_aborted_up_to(batch.base_offset)
            if batch.is_control_batch and part._contains_abort_marker(batch):
                part._aborted_producers.discard(batch.producer_id)
            if batch.is_transactional and batch.producer_id in part._aborted_producers:
                part.next_fetch_offset = batch.next_offset
                continue
        if not batch.is_control_batch:
            records = list(batch)
            position = part.next_fetch_offset
            if records and records[0].offset < position:  # the fetch began inside this batch
                records = [r for r in records if r.offset >= position]
            out += records
        part.next_fetch_offset = batch.next_offset
    result._update_position()
    if not batches.has_next():
        # The unstarted generator and its PartitionRecords refer to each other: break the cycle so
        # the fetch buffer is freed now, not at the next garbage collection (+100 MiB RSS otherwise).
        part._records_iterator = None
        result._partition_records = None
    return out
