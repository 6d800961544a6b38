"""WorkerSourceTask: poll -> transforms -> converters -> producer, offsets after the acks.

Records are appended straight into aiokafka batch builders per topic-partition (no
per-record ``send`` call). Each poll's batches and the latest source offset per source
partition form one entry of an in-order queue; an entry's offsets become committable
only once every batch of it and of every earlier entry was acknowledged, so stored
offsets never run ahead of the data (at-least-once). How a poll becomes builders (records,
a SourceBatch, or bytes the task encoded itself) is the task's send path, chosen once when
it starts: see ``source_paths``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from .. import kafka as clients
from ..api import ConnectException, SourceRecord, SourceTask, SourceTaskContext
from ..api.source import Encoded, OffsetStorageReader, RecordMetadata, TransactionContext
from ..kafka.batch_producer import Acked, BatchBuilderLike, BatchProducer, queue_full
from ..kafka.partitioner import partition_for_key
from ..kafka.topics import create_topic, topic_config
from ..status import TargetState, TaskId
from ..storage.connector_offsets import ConnectorOffsetStore
from ..storage.offsets import OffsetStore
from .errors import ErrorHandler, Stage, TaskStopping, is_retriable
from .source_paths import SendPath, choose_send_path
from .topic_creation import TopicCreation
from .worker_task import RecordTask, StatusListener, TaskPipeline, call

__all__ = ["DeliveryFailed", "WorkerSourceTask"]

log = logging.getLogger(__name__)

Headers = list[tuple[str, bytes | None]]
Offsets = dict[str, dict[str, Any]]  # source offsets by offset key (JSON values)
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
                 errors: ErrorHandler, task: SourceTask, transactions: TransactionContext | None = None) -> None:
        self.configs = configs
        self._reader = reader
        self._errors, self._task = errors, task
        self._transactions = transactions

    def transaction_context(self) -> TransactionContext | None:
        return self._transactions

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def errant_record_reporter(self) -> Callable[[Any, BaseException], None]:
        return self._report

    def _report(self, record: object, error: BaseException) -> None:
        """errors.tolerance for a record the task could not make (stage TASK_POLL): logged and counted; with
        errors.tolerance=none it raises, and the poll that called it fails the task."""
        self._errors.tolerate(Stage.TASK_POLL, self._task, error, record)


@dataclass
class _Submitted:
    futures: list[asyncio.Future[Acked]]
    offsets: Offsets
    records: list[tuple[SourceRecord, int, asyncio.Future[Acked] | None]] = field(default_factory=list)
    # encoded batches with, per run of records in one Kafka batch, (index of its first record, that record's
    # position in the Kafka batch, the batch's ack future)
    encoded: list[tuple[Encoded, list[tuple[int, int, asyncio.Future[Acked] | None]]]] = field(
        default_factory=list)
    notified: bool = False  # commit_record / commit_encoded called for it


class WorkerSourceTask(RecordTask[SourceTask]):
    def __init__(self, task_id: TaskId, pipeline: TaskPipeline[SourceTask], *, offset_store: OffsetStore,
                 flush_timeout_ms: int, topic_creation: TopicCreation | None = None, target_state: TargetState,
                 on_status: StatusListener) -> None:
        super().__init__(task_id, pipeline, target_state=target_state, on_status=on_status)
        self.topic_creation = topic_creation
        self._ensured_topics: set[str] = set()
        self.offset_store = offset_store
        self.flush_timeout = flush_timeout_ms / 1000
        self.producer: BatchProducer | None = None
        self.outstanding: deque[_Submitted] = deque()
        self.partition_counts: dict[str, int] = {}
        # builders sent before ``submit`` (rolled, whole), by id
        self._rolled: dict[int, asyncio.Future[Acked]] = {}
        # by id(ack future): topic, partition, records, bytes of the batch sent
        self._sent_to: dict[int, tuple[str, int, int, int]] = {}
        self.max_request_size = int(self.producer_overrides.get("max.request.size", MAX_REQUEST_SIZE))
        self._notified = 0  # entries at the head of ``outstanding`` already told to the task
        self.path: SendPath | None = None  # chosen once the task started
        self.records_sent = 0
        self.records_polled = 0

    def make_producer(self, **settings: Any) -> Any:
        """The task's producer (not started); ``settings`` are aiokafka's, over the task's defaults."""
        # linger 0: batches are built whole per poll; a linger only makes the next poll's send wait.
        return clients.producer(
            self.bootstrap, self.producer_overrides, acks="all", linger_ms=0, max_batch_size=1 << 20,
            max_request_size=MAX_REQUEST_SIZE, delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
            client_id=f"connector-producer-{self.id}", **settings)

    def transaction_context(self) -> TransactionContext | None:
        """What ``SourceTaskContext.transaction_context()`` gives the task (none at least once)."""
        return None

    async def initialize(self) -> None:
        if isinstance(self.offset_store, ConnectorOffsetStore):
            await self.offset_store.start()  # the connector's own offsets topic, read to its end
        producer = self.make_producer()
        self.producer = producer
        await producer.start()
        self.task.initialize(_Context(self.task_config, _OffsetReader(self.offset_store, self.id.connector),
                                      self.errors, self.task, self.transaction_context()))
        await call(self.task.start, self.task_config)
        self.path = choose_send_path(self)

    async def iteration(self) -> None:
        assert self.path is not None, "iteration before initialize"
        await self.path.step()

    async def notify_acknowledged(self) -> None:
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
        if self.producer is not None:
            try:
                await asyncio.wait_for(self.producer.flush(), self.flush_timeout)
            except TimeoutError:
                log.warning("task %s: sends not acknowledged within offset.flush.timeout.ms while pausing; "
                            "their offsets are stored once they are", self.id)
        await self.timed_commit()

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
            await self.release()

    async def release(self) -> None:
        """Stop the producer, and the connector's own offset store when the task has one."""
        try:
            if self.producer is not None:
                await clients.stop_producer(self.producer, self.flush_timeout)
        finally:
            if isinstance(self.offset_store, ConnectorOffsetStore):
                await self.offset_store.stop()

    # -- sending: the plumbing every send path uses ----------------------------------------------

    async def ensure_topic(self, topic: str) -> None:
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

    async def topic_setting(self, topic: str, name: str) -> str | None:
        """A topic's config value on the target (None when it has no override)."""
        admin = clients.admin_client(self.bootstrap, self.admin_overrides)
        await admin.start()
        try:
            value: str | None = await topic_config(admin, topic, name)
            return value
        finally:
            await admin.close()

    async def _partitions(self, topic: str) -> int:
        count = self.partition_counts.get(topic)
        if count is None:
            await self.ensure_topic(topic)  # before the metadata request, which may auto-create it
            parts = await self.started_producer.partitions_for(topic)
            count = self.partition_counts[topic] = len(parts)
        return count

    def headers_of(self, topic: str, record: SourceRecord) -> Headers:
        hc = self.header_converter
        return [(h.key, hc.from_connect_header(topic, h.key, h.schema, h.value)) for h in record.headers]

    async def partition_for(self, topic: str, key: bytes | None, sticky: dict[str, int]) -> int:
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

    @property
    def started_producer(self) -> BatchProducer:
        if self.producer is None:
            raise ConnectException(f"task {self.id} has no producer: it was not initialized")
        return self.producer

    def builder(self, builders: dict[tuple[str, int], BatchBuilderLike], tp: tuple[str, int]) -> BatchBuilderLike:
        """The open batch builder of a topic-partition in this send, started when there is none."""
        builder = builders.get(tp)
        if builder is None:
            builder = builders[tp] = self.started_producer.create_batch()
        return builder

    async def roll(self, full: BatchBuilderLike, tp: tuple[str, int], futures: list[asyncio.Future[Acked]],
                   timestamp: int | None, key: bytes | None, value: bytes | None, headers: Headers) -> BatchBuilderLike:
        """Send a full builder and start the next one with the record that did not fit."""
        await self.send_rolled(full, tp[0], tp[1], futures)
        builder = self.started_producer.create_batch()
        if builder.append(timestamp=timestamp, key=key, value=value, headers=headers) is None:
            raise ConnectException(f"record of {len(value or b'')} bytes does not fit in a batch")
        return builder

    async def send_rolled(self, builder: BatchBuilderLike, topic: str, partition: int,
                          futures: list[asyncio.Future[Acked]]) -> None:
        """Send a builder before ``submit`` (full, or a whole batch); ``submit`` reports its future."""
        fut = await self.send_builder(builder, topic, partition, futures)
        if fut is not None:
            self._rolled[id(builder)] = fut

    async def send_builder(self, builder: BatchBuilderLike, topic: str, partition: int,
                           futures: list[asyncio.Future[Acked]]) -> asyncio.Future[Acked] | None:
        """Hand a batch to the producer, which retries its delivery until delivery.timeout.ms. A retriable
        failure to hand it over (no metadata yet, the partition's queue still full after
        request.timeout.ms) is retried until the task stops, as Kafka Connect retries a send; any other
        goes through errors.tolerance. Returns the ack's future, also appended to ``futures``; None when
        errors.tolerance=all dropped the batch."""
        send = self.started_producer.send_batch
        try:
            fut = await send(builder, topic, partition=partition)
        except Exception as exc:
            failed: Exception | None = exc
            retried: asyncio.Future[Acked] | None = None
            if _retriable_send(exc):
                retried, failed = await self._send_retrying(builder, topic, partition, exc)
            if failed is not None:
                retried = await self.send_failed(builder, topic, partition, failed)
                if retried is None:
                    return None
            assert retried is not None
            fut = retried
        futures.append(fut)
        self._sent_to[id(fut)] = (topic, partition, builder.record_count(), builder.size())
        return fut

    async def send_failed(self, builder: BatchBuilderLike, topic: str, partition: int,
                          failed: Exception) -> asyncio.Future[Acked] | None:
        """A batch the producer did not take (not retriable): errors.tolerance decides (retries, then skip or
        fail); the ack's future of a retry that went through, None when the batch is skipped."""
        ok, retried = await self.errors.execute(Stage.KAFKA_PRODUCE, self.producer,
                                                partial(self.started_producer.send_batch, builder, topic,
                                                        partition=partition), failed=failed)
        return retried if ok else None

    async def _send_retrying(self, builder: BatchBuilderLike, topic: str, partition: int,
                             exc: Exception) -> tuple[asyncio.Future[Acked] | None, Exception | None]:
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
                fut = await self.started_producer.send_batch(builder, topic, partition=partition)
            except Exception as error:
                if not _retriable_send(error):
                    return None, error
                exc, attempts = error, attempts + 1
                continue
            log.info("task %s: a batch for %s-%d was handed to the producer after %d attempts (%.1f s)", self.id,
                     topic, partition, attempts + 1, time.monotonic() - start)
            return fut, None

    async def submit(self, builders: dict[tuple[str, int], BatchBuilderLike], futures: list[asyncio.Future[Acked]],
                     offsets: Offsets, count: int, by_builder: dict[int, asyncio.Future[Acked]] | None = None,
                     ) -> dict[tuple[str, int], asyncio.Future[Acked]]:
        """Send the open builders and queue the poll's offsets behind all of its batches. ``by_builder``
        (when given) gets each sent builder's ack future by ``id(builder)``, rolled ones included."""
        sent: dict[tuple[str, int], asyncio.Future[Acked]] = {}
        self.topics.update(topic for topic, _ in builders)
        for topic, _ in builders:
            await self.ensure_topic(topic)  # records with an explicit partition skip _partitions
        for (topic, partition), builder in builders.items():
            fut = await self.send_builder(builder, topic, partition, futures)
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

    async def _notify(self, entry: _Submitted, landed: bool = True) -> None:
        """Tell the task where the entry's records landed (``landed`` False: nowhere, their transaction was
        aborted: ``commit_record`` gets no metadata and ``commit_encoded`` no placement)."""
        entry.notified = True
        for record, partition, acked in entry.records:
            meta = None
            if landed and acked is not None and acked.exception() is None:
                md = acked.result()
                meta = RecordMetadata(record.topic, partition, getattr(md, "offset", -1), record.timestamp)
            await call(self.task.commit_record, record, meta)
        for batch, starts in entry.encoded:
            placed = [(i, fut.result().offset + at) for i, at, fut in starts
                      if landed and fut is not None and fut.exception() is None]
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
    """Retriable, or the producer's queue for the partition stayed full (Kafka's TimeoutException, a
    RetriableException there)."""
    return is_retriable(exc) or queue_full(exc)


class DeliveryFailed(ConnectException):
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
