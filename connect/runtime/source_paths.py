"""A source task's send path, chosen once when the task starts (``choose_send_path``).

- ``RecordPath``: ``poll`` -> transforms -> converters, record by record (always possible);
- ``BatchPath``: ``poll_batch`` -> one SourceBatch, its values converted as one list (no transforms,
  no ``commit_record``);
- ``EncodedPath``: ``poll_encoded`` -> bytes the task wrote in the converters' wire form itself
  (``encode_with`` said yes; no transforms, errors.tolerance=none), appended as they are (one topic's
  ``EncodedValues`` as one run through ``append_run``, as the batch path appends its converted values).

Each path polls and appends into the producer's batch builders through its ``WorkerSourceTask``,
which sends the builders and keeps the poll's offsets until they are acknowledged.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from headwater.kafka.records import RecordTooLarge, parse_header, split_batch

from .. import kafka as clients
from ..api import (
    ConnectException,
    EncodedValues,
    RecordBatches,
    RetriableException,
    SourceBatch,
    SourceRecord,
    SourceTask,
)
from ..api.source import Encoded
from ..kafka.batch_producer import Acked, BatchBuilderLike
from ..storage.offsets import offset_key
from .errors import SKIP, Stage
from .worker_task import call

if TYPE_CHECKING:
    import asyncio

    from .source_task import WorkerSourceTask

__all__ = ["BatchPath", "EncodedPath", "RecordPath", "SendPath", "choose_send_path"]

log = logging.getLogger(__name__)

P = TypeVar("P")
Headers = list[tuple[str, bytes | None]]
TP = tuple[str, int]
# per run of an encoded batch's records in one Kafka batch: (index of its first record, that record's
# position in the Kafka batch, the batch's builder)
Starts = list[tuple[int, int, BatchBuilderLike]]
_NO_HEADERS: Headers = []  # shared and never mutated (aiokafka wants a list)


class SendPath(Protocol):
    async def step(self) -> None:
        """Poll the task once and send what it returned."""


def overrides(task: SourceTask, method: str) -> bool:
    """Whether the task's class has its own ``method`` (the optional hooks' defaults do nothing)."""
    return getattr(type(task), method) is not getattr(SourceTask, method)


def choose_send_path(owner: WorkerSourceTask) -> SendPath:
    """The fastest path the task and its connector allow; asks ``encode_with`` only when the encoded
    path is possible otherwise."""
    task = owner.task
    commit_record, commit_encoded = overrides(task, "commit_record"), overrides(task, "commit_encoded")
    notifies = commit_record or commit_encoded
    plain = not owner.chain
    if (overrides(task, "poll_encoded") and plain and (not commit_record or commit_encoded)
            and not owner.errors.tolerate_all and task.encode_with(owner.key_converter, owner.value_converter)):
        log.info("task %s writes its records in the converters' wire form itself", owner.id)
        return EncodedPath(owner, notifies=notifies, track=commit_encoded)
    if overrides(task, "poll_batch") and plain and not commit_record:
        return BatchPath(owner, notifies=notifies)
    return RecordPath(owner, notifies=notifies, track=commit_record)


class _Polling(Generic[P]):
    """Poll (a RetriableException is logged and the poll tried again next time), count, send, and tell
    the task about acknowledged polls when it wants to hear of them."""

    def __init__(self, owner: WorkerSourceTask, poll: Callable[[], P | None | Awaitable[P | None]],
                 notifies: bool) -> None:
        self.owner = owner
        self._poll: Callable[[], object] = poll
        if not inspect.iscoroutinefunction(poll):
            # a sync poll waits for a pool thread: look at the stop flag again once it has one, so a stop
            # that came meanwhile is not followed by a poll (a poll already under way still finishes)
            self._poll = partial(_unless_stopping, owner, poll)
        self.notifies = notifies

    async def step(self) -> None:
        owner = self.owner
        try:
            polled: P | None = await call(self._poll)
        except RetriableException as exc:
            log.warning("task %s poll failed with a retriable error: %s", owner.id, exc)
            return
        if polled:
            owner.records_polled += self.count(polled)
            await self.send(polled)
        if self.notifies:
            await owner.notify_acknowledged()

    def count(self, polled: P) -> int:
        raise NotImplementedError

    async def send(self, polled: P) -> None:
        raise NotImplementedError


class RecordPath(_Polling[list[SourceRecord]]):
    def __init__(self, owner: WorkerSourceTask, *, notifies: bool = False, track: bool = False) -> None:
        super().__init__(owner, owner.task.poll, notifies)
        self.track = track  # keep each record for commit_record

    def count(self, polled: list[SourceRecord]) -> int:
        return len(polled)

    async def send(self, polled: list[SourceRecord]) -> None:
        owner = self.owner
        builders: dict[TP, BatchBuilderLike] = {}
        futures: list[asyncio.Future[Acked]] = []
        by_partition: dict[int, tuple[dict[str, object], dict[str, object]]] = {}
        sticky: dict[str, int] = {}
        tracked: list[tuple[SourceRecord, int, TP | None]] = []
        kc, vc, hc = owner.key_converter, owner.value_converter, owner.header_converter
        key_of, value_of, headers_of = kc.from_connect_data, vc.from_connect_data, owner.headers_of
        chain = owner.chain if owner.chain else None  # tested once, not per record
        attempt = owner.errors.attempt
        track = self.track
        last_tp: TP | None = None
        builder: BatchBuilderLike  # set at the first record (its tp is never last_tp)
        for original in polled:
            source_partition = original.source_partition
            if source_partition:
                by_partition[id(source_partition)] = (source_partition, original.source_offset)
            record = original
            if chain is not None:
                transformed = await attempt(Stage.TRANSFORMATION, chain, chain.apply, original, record=original)
                if transformed is SKIP or transformed is None:  # skipped (errors.tolerance=all) or filtered
                    if track:
                        tracked.append((original, -1, None))
                    continue
                record = transformed
            topic = record.topic
            key = await attempt(Stage.KEY_CONVERTER, kc, key_of, topic, record.key_schema, record.key, record=record)
            if key is SKIP:
                continue
            value = await attempt(Stage.VALUE_CONVERTER, vc, value_of, topic, record.value_schema, record.value,
                                  record=record)
            if value is SKIP:
                continue
            headers = _NO_HEADERS
            if record.headers:
                converted = await attempt(Stage.HEADER_CONVERTER, hc, headers_of, topic, record, record=record)
                if converted is SKIP:
                    continue
                headers = converted
            partition = record.kafka_partition
            if partition is None:
                partition = await owner.partition_for(topic, key, sticky)
            tp = (topic, partition)
            if tp != last_tp:
                builder, last_tp = owner.builder(builders, tp), tp
            if builder.append(timestamp=record.timestamp, key=key, value=value, headers=headers) is None:
                builder = builders[tp] = await owner.roll(builder, tp, futures, record.timestamp, key, value, headers)
            if track:
                tracked.append((original, partition, tp))
        offsets = {offset_key(owner.id.connector, part): off for part, off in by_partition.values()}
        sent = await owner.submit(builders, futures, offsets, len(polled))
        if track:
            owner.outstanding[-1].records = [(r, p, sent.get(tp) if tp else None) for r, p, tp in tracked]


class BatchPath(_Polling[SourceBatch]):
    """One key for all, values converted as a list, appended to one builder; a batch whose values do
    not all convert goes through the record path, which applies errors.tolerance to each."""

    def __init__(self, owner: WorkerSourceTask, *, notifies: bool = False) -> None:
        super().__init__(owner, owner.task.poll_batch, notifies)
        self.fallback = RecordPath(owner)

    def count(self, polled: SourceBatch) -> int:
        return len(polled)

    async def send(self, polled: SourceBatch) -> None:
        owner = self.owner
        topic = polled.topic
        try:
            key = owner.key_converter.from_connect_data(topic, None, None)
            values = owner.value_converter.from_connect_values(topic, polled.value_schema, polled.values)
        except Exception:
            # Some value does not convert: the record path finds it and applies errors.tolerance.
            log.debug("task %s: a batch for %s goes through the record path: a value does not convert as a batch",
                      owner.id, topic, exc_info=True)
            await self.fallback.send(polled.records())
            return
        partition = polled.kafka_partition
        if partition is None:
            partition = await owner.partition_for(topic, key, {})
        builders: dict[TP, BatchBuilderLike] = {}
        futures: list[asyncio.Future[Acked]] = []
        await append_run(owner, builders, (topic, partition), key, values, futures)
        offsets = ({offset_key(owner.id.connector, polled.source_partition): polled.source_offset}
                   if polled.source_partition else {})
        await owner.submit(builders, futures, offsets, len(values))


async def append_run(owner: WorkerSourceTask, builders: dict[TP, BatchBuilderLike], tp: TP, key: bytes | None,
                     values: list[bytes | None], futures: list[asyncio.Future[Acked]],
                     starts: Starts | None = None) -> None:
    """Append ``values`` (one key, no headers, stamped now) to ``tp``'s open builder through the C record
    builder (``fill_batch``), sending each builder that fills; the last stays open in ``builders``.
    ``starts`` gets (index of its first value, its position in the builder, the builder) per builder."""
    if not values:
        return
    topic, partition = tp
    timestamp = int(time.time() * 1000)  # what the builder would stamp on each record, once
    builder = owner.builder(builders, tp)
    if starts is not None:
        starts.append((0, builder.record_count(), builder))
    done = clients.fill_batch(builder, key, values, 0, timestamp)
    while done < len(values):
        if not builder.record_count():
            raise ConnectException(f"record of {len(values[done] or b'')} bytes does not fit in a batch")
        await owner.send_rolled(builder, topic, partition, futures)
        builder = builders[tp] = owner.started_producer.create_batch()
        if starts is not None:
            starts.append((done, 0, builder))
        done = clients.fill_batch(builder, key, values, done, timestamp)


class EncodedPath(_Polling[Encoded | list[Encoded]]):
    """Bytes the task wrote, appended as they are (whole Kafka batches sent as they are)."""

    def __init__(self, owner: WorkerSourceTask, *, notifies: bool = False, track: bool = False) -> None:
        super().__init__(owner, owner.task.poll_encoded, notifies)
        self.track = track  # keep where each batch's records went, for commit_encoded
        self._batch_limits: dict[str, int] = {}  # by topic: the largest batch it takes, see _batch_limit

    def count(self, polled: Encoded | list[Encoded]) -> int:
        return sum(len(p) for p in polled) if isinstance(polled, list) else len(polled)

    async def send(self, polled: Encoded | list[Encoded]) -> None:
        owner = self.owner
        batches = polled if isinstance(polled, list) else [polled]
        builders: dict[TP, BatchBuilderLike] = {}
        futures: list[asyncio.Future[Acked]] = []
        sticky: dict[str, int] = {}
        counts = owner.partition_counts
        offsets: dict[str, dict[str, object]] = {}
        placed: list[tuple[Encoded, Starts]] = []
        starts: Starts
        count = 0
        for batch in batches:
            if isinstance(batch, RecordBatches):
                sent = await self._send_whole(batch, futures)
                if batch.source_partition:
                    offsets[offset_key(owner.id.connector, batch.source_partition)] = batch.source_offset
                placed.append((batch, sent))
                count += len(batch)
                owner.topics.add(batch.topic)
                continue
            if isinstance(batch, EncodedValues):
                topic, key = batch.topic, batch.key
                partition = batch.kafka_partition
                if partition is None:
                    partition = 0 if counts.get(topic) == 1 else await owner.partition_for(topic, key, sticky)
                starts = []
                await append_run(owner, builders, (topic, partition), key, batch.values, futures, starts)
                if batch.source_partition:
                    offsets[offset_key(owner.id.connector, batch.source_partition)] = batch.source_offset
                placed.append((batch, starts))
                count += len(batch.values)
                continue
            last_tp: TP | None = None
            builder: BatchBuilderLike  # set at the first record (its tp is never last_tp)
            fixed = batch.kafka_partition
            headers = batch.headers
            starts = []
            for i, (topic, key, value, timestamp) in enumerate(batch.records):
                partition = fixed if fixed is not None else (
                    0 if counts.get(topic) == 1 else await owner.partition_for(topic, key, sticky))
                tp = (topic, partition)
                hdrs = headers[i] if headers is not None else _NO_HEADERS
                if tp != last_tp:
                    builder, last_tp = owner.builder(builders, tp), tp
                    starts.append((i, builder.record_count(), builder))
                if builder.append(timestamp=timestamp, key=key, value=value, headers=hdrs) is None:
                    builder = builders[tp] = await owner.roll(builder, tp, futures, timestamp, key, value, hdrs)
                    starts.append((i, 0, builder))
            if batch.source_partition:
                offsets[offset_key(owner.id.connector, batch.source_partition)] = batch.source_offset
            placed.append((batch, starts))
            count += len(batch.records)
        sent_builders: dict[int, asyncio.Future[Acked]] = {}
        await owner.submit(builders, futures, offsets, count, sent_builders)
        if self.track:
            owner.outstanding[-1].encoded = [(batch, [(i, at, sent_builders.get(id(b))) for i, at, b in starts])
                                             for batch, starts in placed]

    async def _send_whole(self, batch: RecordBatches, futures: list[asyncio.Future[Acked]]) -> Starts:
        """Send each Kafka batch as it is, or split into batches the target takes when it is bigger (see
        ``_batch_limit``); returns (index of its first record, 0, its builder) per batch sent."""
        owner = self.owner
        topic, partition = batch.topic, batch.kafka_partition
        await owner.ensure_topic(topic)
        limit = await self._batch_limit(topic)
        starts: Starts = []
        index = 0
        for data, n in zip(batch.batches, batch.counts, strict=True):
            pieces = [(data, n)] if len(data) <= limit else await self._split(data, n, topic, partition, limit)
            at = index
            for piece, count in pieces:
                builder = clients.prebuilt_batch(owner.started_producer, piece, count)
                await owner.send_rolled(builder, topic, partition, futures)
                starts.append((at, 0, builder))
                at += count
            index += n
        return starts

    async def _batch_limit(self, topic: str) -> int:
        """The largest record batch ``topic`` takes: the producer's max.request.size, or the topic's
        max.message.bytes on the target when smaller (read once per topic; the broker's
        message.max.bytes when the topic has no override)."""
        limit = self._batch_limits.get(topic)
        if limit is None:
            value = await self.owner.topic_setting(topic, "max.message.bytes")
            limit = self.owner.max_request_size
            if value is not None and value.isdigit():
                limit = min(limit, int(value))
            self._batch_limits[topic] = limit
        return limit

    async def _split(self, data: bytes, count: int, topic: str, partition: int, limit: int) -> list[tuple[bytes, int]]:
        """A batch bigger than the target takes, as batches that fit; none when one record alone is too big
        and errors.tolerance=all skips the batch (with none the task fails)."""
        owner = self.owner
        try:
            pieces: list[tuple[bytes, int]] = split_batch(data, 0, parse_header(data), limit)
        except RecordTooLarge as exc:
            error = RecordTooLarge(f"a batch of {count} records ({len(data)} bytes) for {topic}-{partition} cannot "
                                   f"be split to fit the target's limit of {limit} bytes (max.request.size "
                                   f"{owner.max_request_size}, the topic's max.message.bytes): {exc}")
            await owner.errors.recover(Stage.KAFKA_PRODUCE, owner.producer, error)
            log.warning("task %s skipped %d records for %s-%d (errors.tolerance=all): %s", owner.id, count, topic,
                        partition, error)
            return []
        log.info("task %s split a batch of %d records (%d bytes) for %s-%d into %d batches of at most %d bytes",
                 owner.id, count, len(data), topic, partition, len(pieces), limit)
        return pieces


def _unless_stopping(owner: WorkerSourceTask, poll: Callable[[], object]) -> object:
    return None if owner.stopping else poll()
