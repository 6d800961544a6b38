"""WorkerSourceTask: poll -> transforms -> converters -> producer, offsets after the acks.

Records are appended straight into aiokafka batch builders per topic-partition (no
per-record ``send`` call). Each poll's batches and the latest source offset per source
partition form one entry of an in-order queue; an entry's offsets become committable
only once every batch of it and of every earlier entry was acknowledged, so stored
offsets never run ahead of the data (at-least-once). A task with ``poll_batch`` and no
transforms hands over a SourceBatch instead: its values are converted as one list. A task
that writes the converters' wire form itself (``encode_with``, e.g. Postgres CDC with
JsonConverter) hands over an EncodedBatch: its bytes go straight into the batch builders.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from aiokafka.errors import KafkaTimeoutError

from headwater.kafka.records import RecordTooLarge, parse_header, split_batch

from .. import kafka as clients
from ..api import (
    RecordBatches,
    RetriableException,
    SourceBatch,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
)
from ..api.source import Encoded, OffsetStorageReader, RecordMetadata
from ..kafka.partitioner import partition_for_key
from ..kafka.topics import create_topic, topic_config
from ..status import TaskId
from ..storage.offsets import OffsetStore, offset_key
from .errors import ErrorHandler, Stage, TaskStopping, is_retriable
from .topic_creation import TopicCreation
from .worker_task import RecordTask, TaskPipeline, call

__all__ = ["WorkerSourceTask"]

log = logging.getLogger(__name__)

_NO_HEADERS: list[tuple[str, bytes | None]] = []  # shared and never mutated (aiokafka wants a list)
MAX_REQUEST_SIZE = 8 << 20  # the producer's max.request.size unless producer.override.max.request.size says
# Kafka Connect's delivery.timeout.ms for its producers (Integer.MAX_VALUE): a retriable produce error is
# retried until the task stops, never failing it
DELIVERY_TIMEOUT_MS = 2**31 - 1
RETRY_BACKOFF_MS = 100  # Kafka's retry.backoff.ms


class _OffsetReader(OffsetStorageReader):
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self.store, self.connector = store, connector

    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.store.get(self.connector, partition)


class _Context(SourceTaskContext):
    def __init__(self, configs: dict[str, str], reader: OffsetStorageReader,
                 errors: ErrorHandler, task: SourceTask) -> None:
        self.configs = configs
        self._reader = reader
        self._errors, self._task = errors, task

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def errant_record_reporter(self) -> Callable[[Any, BaseException], None]:
        return self._report

    def _report(self, record: Any, error: BaseException) -> None:
        """errors.tolerance for a record the task could not make (stage TASK_POLL): logged and counted; with
        errors.tolerance=none it raises, and the poll that called it fails the task."""
        self._errors.tolerate(Stage.TASK_POLL, self._task, error, record)


@dataclass
class _Submitted:
    futures: list[asyncio.Future[Any]]
    offsets: dict[str, dict[str, Any]]
    records: list[tuple[SourceRecord, int, asyncio.Future[Any] | None]] = field(default_factory=list)
    # encoded batches with, per run of records in one Kafka batch, (index of its first record, that record's
    # position in the Kafka batch, the batch's ack future)
    encoded: list[tuple[Encoded, list[tuple[int, int, asyncio.Future[Any] | None]]]] = field(
        default_factory=list)
    notified: bool = False  # commit_record / commit_encoded called for it


class WorkerSourceTask(RecordTask):
    task: SourceTask

    def __init__(self, task_id: TaskId, pipeline: TaskPipeline, *, offset_store: OffsetStore, flush_timeout_ms: int,
                 topic_creation: TopicCreation | None = None, **kw: Any) -> None:
        super().__init__(task_id, pipeline, **kw)
        self.topic_creation = topic_creation
        self._ensured_topics: set[str] = set()
        self.offset_store = offset_store
        self.flush_timeout = flush_timeout_ms / 1000
        self.producer: Any = None
        self.outstanding: deque[_Submitted] = deque()
        self.partition_counts: dict[str, int] = {}
        self.wants_commit_record = type(self.task).commit_record is not SourceTask.commit_record
        self.wants_commit_encoded = type(self.task).commit_encoded is not SourceTask.commit_encoded
        self._rolled: dict[int, asyncio.Future[Any]] = {}  # builders sent before _submit (rolled, whole), by id
        self._batch_limits: dict[str, int] = {}  # by topic: the largest batch it takes, see _batch_limit
        # by id(ack future): topic, partition, records, bytes of the batch sent
        self._sent_to: dict[int, tuple[str, int, int, int]] = {}
        self.max_request_size = int(self.producer_overrides.get("max.request.size", MAX_REQUEST_SIZE))
        self._notified = 0  # entries at the head of ``outstanding`` already told to the task
        self.batched = self.uses_batches()
        self.encoded = False
        self.records_sent = 0
        self.records_polled = 0

    async def initialize(self) -> None:
        # linger 0: batches are built whole per poll; a linger only makes the next poll's send wait.
        self.producer = clients.producer(
            self.bootstrap, self.producer_overrides, acks="all", linger_ms=0, max_batch_size=1 << 20,
            max_request_size=MAX_REQUEST_SIZE, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            client_id=f"connector-producer-{self.id}")
        await self.producer.start()
        self.task.initialize(_Context(self.task_config, _OffsetReader(self.offset_store, self.id.connector),
                                      self.errors, self.task))
        await call(self.task.start, self.task_config)
        if (type(self.task).poll_encoded is not SourceTask.poll_encoded and not self.chain
                and (not self.wants_commit_record or self.wants_commit_encoded) and not self.errors.tolerate_all):
            self.encoded = bool(self.task.encode_with(self.key_converter, self.value_converter))
            if self.encoded:
                log.info("task %s writes its records in the converters' wire form itself", self.id)

    async def iteration(self) -> None:
        poll = self.task.poll_encoded if self.encoded else self.task.poll_batch if self.batched else self.task.poll
        if not inspect.iscoroutinefunction(poll):
            # a sync poll waits for a pool thread: look at the stop flag again once it has one, so a stop
            # that came meanwhile is not followed by a poll (a poll already under way still finishes)
            poll = partial(_unless_stopping, self, poll)
        try:
            polled = await call(poll)
        except RetriableException as exc:
            log.warning("task %s poll failed with a retriable error: %s", self.id, exc)
            return
        if polled:
            self.records_polled += _count(polled)
            await (self.send_encoded(polled) if self.encoded else self.send_batch(polled) if self.batched
                   else self.send(polled))
        if self.wants_commit_record or self.wants_commit_encoded:
            await self._notify_acknowledged()

    async def _notify_acknowledged(self) -> None:
        """Tell the task about acknowledged polls now (``commit_record`` / ``commit_encoded``), as Kafka
        calls commitRecord from the producer's callback, not at the next offset commit; in order, and a
        failed send stops here (``commit_offsets`` applies errors.tolerance to it)."""
        for entry in itertools.islice(self.outstanding, self._notified, None):
            if not all(f.done() for f in entry.futures) or any(f.exception() is not None for f in entry.futures):
                break
            await self._notify(entry)
            self._notified += 1

    async def before_pause(self) -> None:
        """Nothing in flight once PAUSED is reported: every sent batch acknowledged, its offsets stored."""
        try:
            await asyncio.wait_for(self.producer.flush(), self.flush_timeout)
        except TimeoutError:
            log.warning("task %s: sends not acknowledged within offset.flush.timeout.ms while pausing; their "
                        "offsets are stored once they are", self.id)
        await self.timed_commit()

    def uses_batches(self) -> bool:
        """Whether the task's ``poll_batch`` can stand in for ``poll``: nothing here needs a record object."""
        return (type(self.task).poll_batch is not SourceTask.poll_batch and not self.chain
                and not self.wants_commit_record)

    def signal_stop(self) -> None:
        try:
            result = self.task.stop()
            if asyncio.iscoroutine(result):
                asyncio.ensure_future(result)
        except Exception:
            log.exception("stopping task %s failed", self.id)

    async def close(self) -> None:
        try:
            if self.producer is not None and self.failure is None:
                await asyncio.wait_for(self.producer.flush(), self.flush_timeout)
                await self.commit_offsets()
        finally:
            if self.producer is not None:
                await clients.stop_producer(self.producer, self.flush_timeout)

    # -- sending --------------------------------------------------------------------------------

    async def _ensure_topic(self, topic: str) -> None:
        """KIP-158: create a topic this task is about to write to first, with its group's settings."""
        if self.topic_creation is None or topic in self._ensured_topics:
            return
        group = self.topic_creation.group_for(topic)
        admin = clients.admin_client(self.bootstrap, self.admin_overrides)
        await admin.start()
        try:
            if await create_topic(admin, topic, group.partitions, group.replication_factor, group.configs):
                log.info("task %s created topic %s (topic.creation group %s: %d partitions, replication factor "
                         "%d, %s)", self.id, topic, group.name, group.partitions, group.replication_factor,
                         group.configs or "no config overrides")
        finally:
            await admin.close()
        self._ensured_topics.add(topic)

    async def _partitions(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is None:
            await self._ensure_topic(topic)  # before the metadata request, which may auto-create it
            parts = await self.producer.partitions_for(topic)
            count = self.partition_counts[topic] = len(parts)
        return count

    async def send(self, records: list[SourceRecord]) -> None:
        builders: dict[tuple[str, int], Any] = {}
        futures: list[asyncio.Future[Any]] = []
        by_partition: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {}
        sticky: dict[str, int] = {}
        tracked: list[tuple[SourceRecord, int, Any]] = []
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        key_of, value_of = kc.from_connect_data, vc.from_connect_data
        chain = self.chain if self.chain else None  # tested once, not per record
        wants_commit_record = self.wants_commit_record
        last_tp: tuple[str, int] | None = None
        builder: Any = None
        execute = self.errors.execute
        for original in records:
            source_partition = original.source_partition
            if source_partition:
                by_partition[id(source_partition)] = (source_partition, original.source_offset)
            record = original
            if chain is not None:
                transformed: SourceRecord | None
                try:
                    transformed = chain.apply(original)
                except Exception as exc:
                    _, transformed = await execute(Stage.TRANSFORMATION, chain, partial(chain.apply, original),
                                                   failed=exc, record=original)
                if transformed is None:
                    if wants_commit_record:
                        tracked.append((original, -1, None))
                    continue
                record = transformed
            topic = record.topic
            try:
                key = key_of(topic, record.key_schema, record.key)
            except Exception as exc:
                ok, key = await execute(Stage.KEY_CONVERTER, kc, partial(key_of, topic, record.key_schema, record.key),
                                        failed=exc, record=record)
                if not ok:
                    continue
            try:
                value = value_of(topic, record.value_schema, record.value)
            except Exception as exc:
                ok, value = await execute(Stage.VALUE_CONVERTER, vc,
                                          partial(value_of, topic, record.value_schema, record.value),
                                          failed=exc, record=record)
                if not ok:
                    continue
            headers: list[tuple[str, bytes | None]] = _NO_HEADERS
            if record.headers:
                try:
                    headers = self._headers(topic, record)
                except Exception as exc:
                    ok, headers = await execute(Stage.HEADER_CONVERTER, hc, partial(self._headers, topic, record),
                                                failed=exc, record=record)
                    if not ok:
                        continue
            partition = record.kafka_partition
            if partition is None:
                partition = await self._partition_for(topic, key, sticky)
            tp = (topic, partition)
            if tp != last_tp:
                builder, last_tp = self._builder(builders, tp), tp
            if builder.append(timestamp=record.timestamp, key=key, value=value, headers=headers) is None:
                builder = builders[tp] = await self._roll(builder, tp, futures, record.timestamp, key, value, headers)
            if wants_commit_record:
                tracked.append((original, partition, tp))
        offsets = {offset_key(self.id.connector, part): off for part, off in by_partition.values()}
        sent = await self._submit(builders, futures, offsets, len(records))
        if wants_commit_record:
            self.outstanding[-1].records = [(r, p, sent.get(tp) if tp else None) for r, p, tp in tracked]

    def _headers(self, topic: str, record: SourceRecord) -> list[tuple[str, bytes | None]]:
        hc = self.header_converter
        return [(h.key, hc.from_connect_header(topic, h.key, h.schema, h.value)) for h in record.headers]

    async def send_batch(self, batch: SourceBatch) -> None:
        """The batch path: one key for all, values converted as a list, appended to one builder."""
        topic = batch.topic
        try:
            key = self.key_converter.from_connect_data(topic, None, None)
            values = self.value_converter.from_connect_values(topic, batch.value_schema, batch.values)
        except Exception:
            # Some value does not convert: the record path finds it and applies errors.tolerance.
            await self.send(batch.records())
            return
        partition = batch.kafka_partition
        if partition is None:
            partition = await self._partition_for(topic, key, {})
        tp = (topic, partition)
        futures: list[asyncio.Future[Any]] = []
        timestamp = int(time.time() * 1000)  # what the builder would stamp on each record, once
        builder = self.producer.create_batch()
        done = clients.fill_batch(builder, key, values, 0, timestamp)
        while done < len(values):
            await self._send_builder(builder, topic, partition, futures)
            builder = self.producer.create_batch()
            filled = clients.fill_batch(builder, key, values, done, timestamp)
            if filled == done:
                raise ValueError(f"record of {len(values[done] or b'')} bytes does not fit in a batch")
            done = filled
        offsets = ({offset_key(self.id.connector, batch.source_partition): batch.source_offset}
                   if batch.source_partition else {})
        await self._submit({tp: builder}, futures, offsets, len(values))

    async def send_encoded(self, polled: Encoded | list[Encoded]) -> None:
        """The encoded path: bytes the task wrote, appended as they are (whole Kafka batches sent as they are)."""
        batches = polled if isinstance(polled, list) else [polled]
        builders: dict[tuple[str, int], Any] = {}
        futures: list[asyncio.Future[Any]] = []
        sticky: dict[str, int] = {}
        counts = self.partition_counts
        offsets: dict[str, dict[str, Any]] = {}
        placed: list[tuple[Encoded, list[tuple[int, int, Any]]]] = []
        count = 0
        for batch in batches:
            if isinstance(batch, RecordBatches):
                sent = await self._send_whole(batch, futures)
                if batch.source_partition:
                    offsets[offset_key(self.id.connector, batch.source_partition)] = batch.source_offset
                placed.append((batch, sent))
                count += len(batch)
                self.topics.add(batch.topic)
                continue
            last_tp: tuple[str, int] | None = None
            builder: Any = None
            fixed = batch.kafka_partition
            headers = batch.headers
            starts: list[tuple[int, int, Any]] = []  # (first index, its position in the builder, builder)
            for i, (topic, key, value, timestamp) in enumerate(batch.records):
                partition = fixed if fixed is not None else (
                    0 if counts.get(topic) == 1 else await self._partition_for(topic, key, sticky))
                tp = (topic, partition)
                hdrs = headers[i] if headers is not None else _NO_HEADERS
                if tp != last_tp:
                    builder, last_tp = self._builder(builders, tp), tp
                    starts.append((i, builder.record_count(), builder))
                if builder.append(timestamp=timestamp, key=key, value=value, headers=hdrs) is None:
                    builder = builders[tp] = await self._roll(builder, tp, futures, timestamp, key, value, hdrs)
                    starts.append((i, 0, builder))
            if batch.source_partition:
                offsets[offset_key(self.id.connector, batch.source_partition)] = batch.source_offset
            placed.append((batch, starts))
            count += len(batch.records)
        sent_builders: dict[int, asyncio.Future[Any]] = {}
        await self._submit(builders, futures, offsets, count, sent_builders)
        if self.wants_commit_encoded:
            self.outstanding[-1].encoded = [(batch, [(i, at, sent_builders.get(id(b))) for i, at, b in starts])
                                            for batch, starts in placed]

    async def _send_whole(self, batch: RecordBatches, futures: list[asyncio.Future[Any]]) -> list[tuple[int, int, Any]]:
        """Send each Kafka batch as it is, or split into batches the target takes when it is bigger (see
        ``_batch_limit``); returns (index of its first record, 0, its builder) per batch sent."""
        topic, partition = batch.topic, batch.kafka_partition
        await self._ensure_topic(topic)
        limit = await self._batch_limit(topic)
        starts: list[tuple[int, int, Any]] = []
        index = 0
        for data, n in zip(batch.batches, batch.counts, strict=True):
            pieces = [(data, n)] if len(data) <= limit else await self._split(data, n, topic, partition, limit)
            at = index
            for piece, count in pieces:
                builder = clients.PrebuiltBatch(piece, count)
                fut = await self._send_builder(builder, topic, partition, futures)
                if fut is not None:
                    self._rolled[id(builder)] = fut
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
            admin = clients.admin_client(self.bootstrap, self.admin_overrides)
            await admin.start()
            try:
                value = await topic_config(admin, topic, "max.message.bytes")
            finally:
                await admin.close()
            limit = self.max_request_size
            if value is not None and value.isdigit():
                limit = min(limit, int(value))
            self._batch_limits[topic] = limit
        return limit

    async def _split(self, data: bytes, count: int, topic: str, partition: int, limit: int) -> list[tuple[bytes, int]]:
        """A batch bigger than the target takes, as batches that fit; none when one record alone is too big
        and errors.tolerance=all skips the batch (with none the task fails)."""
        try:
            pieces = split_batch(data, 0, parse_header(data), limit)
        except RecordTooLarge as exc:
            error = RecordTooLarge(f"a batch of {count} records ({len(data)} bytes) for {topic}-{partition} cannot "
                                   f"be split to fit the target's limit of {limit} bytes (max.request.size "
                                   f"{self.max_request_size}, the topic's max.message.bytes): {exc}")
            await self.errors.recover(Stage.KAFKA_PRODUCE, self.producer, error)
            log.warning("task %s skipped %d records for %s-%d (errors.tolerance=all): %s", self.id, count, topic,
                        partition, error)
            return []
        log.info("task %s split a batch of %d records (%d bytes) for %s-%d into %d batches of at most %d bytes",
                 self.id, count, len(data), topic, partition, len(pieces), limit)
        return pieces

    async def _partition_for(self, topic: str, key: bytes | None, sticky: dict[str, int]) -> int:
        """Kafka's default partitioner: murmur2 of the key, else one random partition per send."""
        count = self.partition_counts.get(topic) or await self._partitions(topic)
        if count == 1:
            return 0  # murmur2 in Python costs microseconds a record; one partition needs none of it
        if key is not None:
            return partition_for_key(key, count)
        partition = sticky.get(topic)
        if partition is None:
            partition = sticky[topic] = random.randrange(count)
        return partition

    def _builder(self, builders: dict[tuple[str, int], Any], tp: tuple[str, int]) -> Any:
        """The open batch builder of a topic-partition in this send, started when there is none."""
        builder = builders.get(tp)
        if builder is None:
            builder = builders[tp] = self.producer.create_batch()
        return builder

    async def _roll(self, full: Any, tp: tuple[str, int], futures: list[asyncio.Future[Any]], timestamp: int | None,
                    key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]]) -> Any:
        """Send a full builder and start the next one with the record that did not fit."""
        fut = await self._send_builder(full, tp[0], tp[1], futures)
        if fut is not None:
            self._rolled[id(full)] = fut
        builder = self.producer.create_batch()
        if builder.append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
            raise ValueError(f"record of {len(value or b'')} bytes does not fit in a batch")
        return builder

    async def _send_builder(self, builder: Any, topic: str, partition: int,
                            futures: list[asyncio.Future[Any]]) -> asyncio.Future[Any] | None:
        """Hand a batch to the producer, which retries its delivery until delivery.timeout.ms. A retriable
        failure to hand it over (no metadata yet, the partition's queue still full after
        request.timeout.ms) is retried until the task stops, as Kafka Connect retries a send; any other
        goes through errors.tolerance. Returns the ack's future, also appended to ``futures``; None when
        errors.tolerance=all dropped the batch."""
        send = self.producer.send_batch
        try:
            fut = await send(builder, topic, partition=partition)
        except Exception as exc:
            failed: Exception | None = exc
            if _retriable_send(exc):
                fut, failed = await self._send_retrying(builder, topic, partition, exc)
            if failed is not None:
                ok, fut = await self.errors.execute(Stage.KAFKA_PRODUCE, self.producer,
                                                    partial(send, builder, topic, partition=partition), failed=failed)
                if not ok:
                    return None
        futures.append(fut)
        self._sent_to[id(fut)] = (topic, partition, builder.record_count(), builder.size())
        return fut

    async def _send_retrying(self, builder: Any, topic: str, partition: int,
                             exc: Exception) -> tuple[Any, Exception | None]:
        """(the ack's future, None) once a retried send went through; (None, the error) when one failed
        with an error that is not retriable."""
        backoff = int(self.producer_overrides.get("retry.backoff.ms", RETRY_BACKOFF_MS)) / 1000
        start = time.monotonic()
        attempts = 1
        log.warning("task %s: handing a batch for %s-%d to the producer failed (%r); retrying every %.0f ms until "
                    "it succeeds or the task stops", self.id, topic, partition, exc, backoff * 1000)
        while True:
            if self.stopping:
                raise TaskStopping(f"stopped while retrying a send to {topic}-{partition}") from exc
            await asyncio.sleep(backoff)
            try:
                fut = await self.producer.send_batch(builder, topic, partition=partition)
            except Exception as error:
                if not _retriable_send(error):
                    return None, error
                exc, attempts = error, attempts + 1
                continue
            log.info("task %s: a batch for %s-%d was handed to the producer after %d attempts (%.1f s)", self.id,
                     topic, partition, attempts + 1, time.monotonic() - start)
            return fut, None

    async def _submit(self, builders: dict[tuple[str, int], Any], futures: list[asyncio.Future[Any]],
                      offsets: dict[str, dict[str, Any]], count: int,
                      by_builder: dict[int, asyncio.Future[Any]] | None = None,
                      ) -> dict[tuple[str, int], asyncio.Future[Any]]:
        """Send the open builders and queue the poll's offsets behind all of its batches. ``by_builder``
        (when given) gets each sent builder's ack future by ``id(builder)``, rolled ones included."""
        sent: dict[tuple[str, int], asyncio.Future[Any]] = {}
        self.topics.update(topic for topic, _ in builders)
        for topic, _ in builders:
            await self._ensure_topic(topic)  # records with an explicit partition skip _partitions
        for (topic, partition), builder in builders.items():
            fut = await self._send_builder(builder, topic, partition, futures)
            if fut is not None:
                sent[(topic, partition)] = fut
                if by_builder is not None:
                    by_builder[id(builder)] = fut
        if by_builder is not None:
            by_builder.update(self._rolled)
        self._rolled.clear()
        self.outstanding.append(_Submitted(futures, offsets))
        self.records_sent += count
        return sent

    async def _notify(self, entry: _Submitted) -> None:
        entry.notified = True
        for record, partition, acked in entry.records:
            meta = None
            if acked is not None and acked.exception() is None:
                md = acked.result()
                meta = RecordMetadata(record.topic, partition, getattr(md, "offset", -1), record.timestamp)
            await call(self.task.commit_record, record, meta)
        for batch, starts in entry.encoded:
            placed = [(i, fut.result().offset + at) for i, at, fut in starts
                      if fut is not None and fut.exception() is None]
            await call(self.task.commit_encoded, batch, placed)

    async def commit_offsets(self) -> bool:
        """Store the offsets of every fully acknowledged poll, in order, then tell the task."""
        committable: dict[str, dict[str, Any] | None] = {}
        while self.outstanding and all(f.done() for f in self.outstanding[0].futures):
            entry = self.outstanding.popleft()
            for fut in entry.futures:
                sent_to = self._sent_to.pop(id(fut), None)
                if fut.exception() is not None:
                    # Not retriable, or retried until delivery.timeout.ms: errors.tolerance decides; with
                    # none the task fails here and the poll's offsets are never stored.
                    await self.errors.recover(Stage.KAFKA_PRODUCE, self.producer,
                                              _delivery_failed(fut.exception(), sent_to))
            committable.update(entry.offsets)
            if entry.notified:
                self._notified -= 1
            else:
                await self._notify(entry)
        if not committable:
            return False
        await self.offset_store.set(self.id.connector, committable)
        await call(self.task.commit)
        return True

    def runtime_metrics(self) -> dict[str, Any]:
        return {"source-record-poll-total": self.records_polled, "source-record-write-total": self.records_sent,
                **super().runtime_metrics()}


def _retriable_send(exc: BaseException) -> bool:
    """Retriable, or aiokafka's timeout waiting for room in a partition's queue (Kafka's TimeoutException,
    a RetriableException there)."""
    return is_retriable(exc) or isinstance(exc, KafkaTimeoutError)


class DeliveryFailed(Exception):
    """The target did not take a batch: which one, and why."""


def _delivery_failed(exc: BaseException | None, sent_to: tuple[str, int, int, int] | None) -> BaseException:
    assert exc is not None
    if sent_to is None:
        return exc
    topic, partition, records, size = sent_to
    error = DeliveryFailed(f"producing a batch of {records} records ({size} bytes) to {topic}-{partition} failed: "
                           f"{exc!r}")
    error.__cause__ = exc
    return error


def _unless_stopping(task: WorkerSourceTask, poll: Callable[[], Any]) -> Any:
    return None if task.stopping else poll()


def _count(polled: Any) -> int:
    """Records in what a poll returned: records, a SourceBatch, or encoded batches (one or a list)."""
    if isinstance(polled, list):
        return sum(len(p) if isinstance(p, Encoded) else 1 for p in polled)
    return len(polled)
