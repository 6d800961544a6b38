"""WorkerSinkTask: consumer group ``connect-<name>`` -> converters -> transforms -> put.

Offsets are committed to the group only after ``pre_commit`` (by default ``flush``)
returned them: every ``offset.flush.interval.ms``, when the task asks, before
partitions are revoked, and on stop. Records that fail conversion or transformation
go through the error handler (retry, tolerate, log, dead letter queue). A task with
``put_batch`` and no transforms gets each partition's records as one SinkBatch.

Rebalances reach the task as events (``SinkConsumer``) that its own loop handles between
deliveries: ``open``, ``close`` and the commit before a revocation never run while records
are being delivered, as in Kafka's single-threaded consumer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from .. import kafka as clients
from ..api import (
    ConnectException,
    EncodedSinkBatch,
    Header,
    RetriableException,
    SinkBatch,
    SinkConnectorConfig,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    TopicPartition,
)
from ..kafka.batch_producer import RecordSender
from ..kafka.sink_consumer import (
    CommitRefused,
    ConsumedRecord,
    Fetched,
    PartitionsRevoked,
    RebalanceEvent,
    SinkConsumer,
)
from ..status import TargetState, TaskId
from .errors import SKIP, RawRecord, Stage, TaskStopping, dlq_reporter
from .worker_task import RecordTask, StatusListener, TaskPipeline, call

__all__ = ["WorkerSinkTask"]

log = logging.getLogger(__name__)

_TS_TYPES = {0: "CreateTime", 1: "LogAppendTime"}
D = TypeVar("D")


class _Context(SinkTaskContext):
    def __init__(self, owner: WorkerSinkTask, configs: dict[str, str]) -> None:
        self.owner = owner
        self.configs = configs

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self.owner.rewinds.update(offsets)

    def timeout(self, ms: int) -> None:
        self.owner.retry_timeout = ms / 1000

    def assignment(self) -> set[TopicPartition]:
        return self.owner.started_consumer.assignment()

    def pause(self, *partitions: TopicPartition) -> None:
        self.owner.started_consumer.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self.owner.started_consumer.resume(partitions)

    def request_commit(self) -> None:
        self.owner.commit_requested = True

    def errant_record_reporter(self) -> Callable[[SinkRecord, BaseException], None]:
        return self.owner.report_errant


class WorkerSinkTask(RecordTask[SinkTask]):
    def __init__(self, task_id: TaskId, pipeline: TaskPipeline[SinkTask], *, consumer_overrides: dict[str, str],
                 connector_config: SinkConnectorConfig, target_state: TargetState,
                 on_status: StatusListener) -> None:
        super().__init__(task_id, pipeline, target_state=target_state, on_status=on_status)
        self.consumer_overrides = consumer_overrides
        self.config = connector_config
        self.consumer: SinkConsumer | None = None
        self.dlq_producer: RecordSender | None = None
        self.current: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.rewinds: dict[TopicPartition, int] = {}
        self.batched = self.uses_batches()
        # put_batch of its own (else a batch path task only has put_encoded, and a batch it hands back
        # goes through put)
        self.has_put_batch = type(self.task).put_batch is not SinkTask.put_batch
        self.retry_timeout = 1.0
        self.started = False
        self.commit_failed = False
        self.records_put = 0
        self.records_read = 0
        self.max_poll_records = int(consumer_overrides.get("max.poll.records", 10000))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.encoded = False  # the task reads the converters' wire form itself (decode_with)
        self.opened: set[TopicPartition] = set()  # partitions whose open() returned
        self.loop_thread = 0

    @property
    def started_consumer(self) -> SinkConsumer:
        if self.consumer is None:
            raise ConnectException(f"task {self.id} has no consumer: it was not initialized")
        return self.consumer

    async def initialize(self) -> None:
        cfg = self.config
        consumer = self.consumer = SinkConsumer(clients.consumer(
            self.bootstrap, self.consumer_overrides, group_id=f"connect-{self.id.connector}",
            enable_auto_commit=False, auto_offset_reset="earliest", max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=16 << 20, max_poll_records=self.max_poll_records,
            client_id=f"connector-consumer-{self.id}"), self.on_rebalance)
        consumer.pause_assigned = lambda: self.target_state == TargetState.PAUSED
        await consumer.start()
        if cfg.errors_deadletterqueue_topic_name:
            self.dlq_producer = clients.producer(self.bootstrap, self.producer_overrides, acks="all")
            await self.dlq_producer.start()
            self.errors.reporters.append(dlq_reporter(self._send_dlq, cfg.errors_deadletterqueue_topic_name,
                                                      cfg.errors_deadletterqueue_context_headers_enable))
        self.loop, self.loop_thread = asyncio.get_running_loop(), threading.get_ident()
        self.task.initialize(_Context(self, self.task_config))
        await call(self.task.start, self.task_config)
        self.started = True
        self.encoded = self.batched and bool(self.task.decode_with(self.key_converter, self.value_converter))
        consumer.serving = True  # from now on the loop handles rebalances
        if cfg.topics_regex:
            consumer.subscribe(pattern=f"^(?:{cfg.topics_regex})$")
        else:
            consumer.subscribe(topics=cfg.topic_list())

    # -- rebalances ------------------------------------------------------------------------------

    async def handle_rebalances(self) -> None:
        """Handle the rebalance events that came since the last time, in order (a point where no
        records are being delivered)."""
        consumer = self.started_consumer
        events = consumer.take_events()
        try:
            for event in events:
                try:
                    await self.on_rebalance(event)
                finally:
                    consumer.handled(event)
        finally:
            for event in events:  # after a failure (the task fails with it) the rebalance must still go on
                consumer.handled(event)

    async def on_rebalance(self, event: RebalanceEvent) -> None:
        if isinstance(event, PartitionsRevoked):
            await self._revoked(event.partitions)
        else:
            await self._assigned(event.partitions)

    async def _revoked(self, partitions: list[TopicPartition]) -> None:
        """Commit what was delivered from them and close them; a failure is logged and the rebalance goes
        on (the partitions' next owner starts from their last committed offsets)."""
        if not self.started:
            return
        try:
            await self.commit_offsets(partitions)
            await call(self.task.close, partitions)
        except Exception:
            log.exception("task %s: committing and closing revoked partitions %s failed", self.id, partitions)
            return
        for tp in partitions:
            self.current.pop(tp, None)
            self.opened.discard(tp)

    async def _assigned(self, partitions: list[TopicPartition]) -> None:
        # aiokafka may already fetch for these partitions meanwhile: the loop delivers a partition's records
        # only once open() returned (and after any seek open() asked for).
        try:
            await call(self.task.open, partitions)
        except Exception as exc:
            raise ConnectException(f"task {self.id} could not open its partitions: {exc}") from exc
        self.opened.update(partitions)

    def report_errant(self, record: SinkRecord, error: BaseException) -> None:
        """The task's errant record reporter, called from ``put`` in a worker thread: the record goes
        through the error handler as a failed TASK_PUT (log, DLQ, tolerance) and the call returns once
        it was handled; with errors.tolerance=none it raises ToleranceExceeded."""
        if self.loop is None or threading.get_ident() == self.loop_thread:
            raise ConnectException("the errant record reporter is for sync put() methods (they run in a worker "
                                   "thread)")
        topic = record.topic
        raw = RawRecord(topic, record.kafka_partition or 0, record.kafka_offset, record.timestamp,
                        self.key_converter.from_connect_data(topic, record.key_schema, record.key),
                        self.value_converter.from_connect_data(topic, record.value_schema, record.value), [])
        done = asyncio.run_coroutine_threadsafe(
            self.errors.recover(Stage.TASK_PUT, self.task, error, raw=raw, record=record), self.loop)
        done.result()

    async def _send_dlq(self, topic: str, key: bytes | None, value: bytes | None,
                        headers: list[tuple[str, bytes]], timestamp: int | None) -> None:
        assert self.dlq_producer is not None, "a dead letter queue reporter without its producer"
        fut = await self.dlq_producer.send(topic, value=value, key=key, headers=headers, timestamp_ms=timestamp)
        await fut
        self.dlq_records += 1

    def on_pause(self) -> None:
        if self.consumer is not None:
            self.consumer.pause_all()

    async def while_paused(self) -> None:
        """Kafka's WorkerSinkTask polls while paused: the consumer stays in its group (a consumer that
        stops polling for max.poll.interval.ms is put out of it) and nothing is delivered."""
        consumer = self.started_consumer
        await self.handle_rebalances()
        self.on_pause()  # partitions assigned since the pause too
        fetched = await consumer.fetch(0, 1)
        await self.handle_rebalances()
        assigned = consumer.assignment()
        for tp, messages in fetched.items():  # none expected: all partitions are paused
            if messages and tp in assigned:
                consumer.seek(tp, messages[0].offset)
        await self.timed_commit()

    def on_resume(self) -> None:
        if self.consumer is not None:
            self.consumer.resume_all()

    async def iteration(self) -> None:
        consumer = self.consumer
        assert consumer is not None, "iteration before initialize"
        if consumer.events:
            await self.handle_rebalances()
        if self.rewinds:
            self._apply_rewinds()
        fetched = await consumer.fetch(500, self.max_poll_records)
        if consumer.events:  # came during the fetch: open() may ask for seeks, revoked partitions go
            await self.handle_rebalances()
        if not fetched:
            return
        self.records_read += sum(len(messages) for messages in fetched.values())
        for tp in list(fetched):
            if tp in self.rewinds:
                del fetched[tp]  # open() asked for a seek after these were fetched
            elif tp not in self.opened:
                # fetched before open() ran (or the partition was revoked since): read them again once it did
                messages = fetched.pop(tp)
                if messages:
                    self.rewinds.setdefault(tp, messages[0].offset)
        if fetched:
            await (self._deliver_batches(fetched) if self.batched else self._deliver(fetched))

    def uses_batches(self) -> bool:
        """Whether the task's ``put_batch`` (or ``put_encoded``) can stand in for ``put``: no transforms
        need record objects."""
        return (type(self.task).put_batch is not SinkTask.put_batch
                or type(self.task).put_encoded is not SinkTask.put_encoded) and not self.chain

    async def _deliver(self, fetched: Fetched) -> None:
        records, offsets = await self._convert(fetched)
        if records:
            await self._put(self.task.put, records, len(records))
        self.current.update(offsets)  # only now: a stop or a failure before put commits none of them

    async def _deliver_batches(self, fetched: Fetched) -> None:
        """One put_batch (or put_encoded) per partition; partitions that need the record path go through put."""
        leftovers: Fetched = {}
        for tp, messages in fetched.items():
            if not messages:
                continue
            if self.encoded and not any([m.headers for m in messages]):
                # counted only when taken: a batch handed back is counted by the path that delivers it
                taken = await self._put(self.task.put_encoded, EncodedSinkBatch(tp.topic, tp.partition, messages), 0)
                if taken:
                    self.records_put += len(messages)
                    self.topics.add(tp.topic)
                    self.current[tp] = messages[-1].offset + 1
                    continue
            batch = self._batch(tp, messages) if self.has_put_batch else None
            if batch is None:
                leftovers[tp] = messages
                continue
            self.topics.add(tp.topic)
            await self._put(self.task.put_batch, batch, len(messages))
            self.current[tp] = messages[-1].offset + 1
        if leftovers:
            await self._deliver(leftovers)

    def _batch(self, tp: TopicPartition, messages: list[ConsumedRecord]) -> SinkBatch | None:
        """The partition's records as columns, or None when they need the record path: headers,
        keys or values of differing schemas, or a record that does not convert (the record path
        finds it and applies errors.tolerance)."""
        if any([m.headers for m in messages]):
            return None
        topic = tp.topic
        try:
            keys = self.key_converter.to_connect_values(topic, [m.key for m in messages])
            values = self.value_converter.to_connect_values(topic, [m.value for m in messages])
        except Exception:
            log.debug("task %s: %s-%d goes through the record path: a record does not convert as a batch", self.id,
                      topic, tp.partition, exc_info=True)
            return None
        if keys is None or values is None:
            return None
        return SinkBatch(topic, tp.partition, keys.schema, keys.value, values.schema, values.value, messages)

    def _apply_rewinds(self) -> None:
        if not self.rewinds:
            return
        consumer = self.started_consumer
        assigned = consumer.assignment()
        for tp, offset in self.rewinds.items():
            if tp in assigned:  # not revoked since
                consumer.seek(tp, offset)
                self.current[tp] = offset
        self.rewinds.clear()

    async def _convert(self, fetched: Fetched) -> tuple[list[SinkRecord], dict[TopicPartition, int]]:
        """The fetched records as SinkRecords (each stage through the error handler), and the offset
        each partition reaches once they are delivered."""
        out: list[SinkRecord] = []
        offsets: dict[TopicPartition, int] = {}
        append = out.append
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        key_of, value_of, headers_of = kc.to_connect_data, vc.to_connect_data, self._headers
        attempt = self.errors.attempt
        chain = self.chain if self.chain else None  # tested once, not per record
        for tp, messages in fetched.items():
            if not messages:
                continue
            topic, partition = tp.topic, tp.partition
            self.topics.add(topic)
            for m in messages:
                raw = partial(_raw, tp, m)
                key_sv = await attempt(Stage.KEY_CONVERTER, kc, key_of, topic, m.key, raw=raw)
                if key_sv is SKIP:
                    continue
                value_sv = await attempt(Stage.VALUE_CONVERTER, vc, value_of, topic, m.value, raw=raw)
                if value_sv is SKIP:
                    continue
                headers: list[Header] = []
                if m.headers:
                    converted = await attempt(Stage.HEADER_CONVERTER, hc, headers_of, topic, m.headers, raw=raw)
                    if converted is SKIP:
                        continue
                    headers = converted
                offset = m.offset
                record: SinkRecord | None = SinkRecord(
                    topic, value_sv.value, key_sv.value, partition, key_sv.schema, value_sv.schema, m.timestamp,
                    headers, offset,
                    "CreateTime" if m.timestamp_type == 0 else _TS_TYPES.get(m.timestamp_type, "CreateTime"),
                    topic, partition, offset)
                if chain is not None:
                    transformed = await attempt(Stage.TRANSFORMATION, chain, chain.apply, record, raw=raw)
                    if transformed is SKIP:
                        continue
                    record = transformed
                if record is None:
                    continue
                append(record)
            offsets[tp] = messages[-1].offset + 1
        return out, offsets

    def _headers(self, topic: str, headers: Iterable[tuple[str, bytes | None]]) -> list[Header]:
        out = []
        for key, value in headers:
            sv = self.header_converter.to_connect_header(topic, key, value)
            out.append(Header(key, sv.value, sv.schema))
        return out

    async def _put(self, deliver: Callable[[D], object], data: D, count: int) -> Any:
        """``put``, ``put_batch`` or ``put_encoded``, retried after a RetriableException with the partitions
        paused; returns what it returned."""
        while True:
            try:
                result = await call(deliver, data)
                self.records_put += count
                return result
            except RetriableException as exc:
                log.warning("task %s put failed with a retriable error, retrying in %.1fs: %s", self.id,
                            self.retry_timeout, exc)
                consumer = self.started_consumer
                assignment = consumer.assignment()
                consumer.pause(assignment)
                await asyncio.sleep(self.retry_timeout)
                consumer.resume(assignment)
                if self.stopping:
                    raise TaskStopping(f"task {self.id} stopped while retrying put") from exc

    async def commit_offsets(self, only: list[TopicPartition] | None = None) -> bool:
        """Commit what the task says is safe (pre_commit of the current offsets); whether any was committed."""
        current = dict(self.current)
        if only is not None:
            wanted = set(only)
            current = {tp: o for tp, o in current.items() if tp in wanted}
        if not current:
            return False
        try:
            safe = await call(self.task.pre_commit, current)
        except Exception:
            self.commit_failed = True  # what the task holds may not be safe: never commit it on close
            raise
        to_commit = {tp: o for tp, o in (safe or {}).items() if self.committed.get(tp) != o}
        if not to_commit:
            return False
        consumer = self.started_consumer
        assigned = consumer.assignment()
        offsets = {tp: o for tp, o in to_commit.items() if tp in assigned}
        if offsets:
            try:
                await consumer.commit(offsets)
            except CommitRefused as exc:
                # As Kafka's WorkerSinkTask: a commit that meets a rebalance is logged, the offsets stay
                # uncommitted (the next commit, or the partitions' next owner, starts from the last
                # committed ones) and the task carries on.
                log.warning("task %s: offset commit of %d partitions failed because the group is "
                            "rebalancing (%s); they will be committed after the rebalance", self.id,
                            len(offsets), exc.__cause__ or exc)
                return False
            self.committed.update(to_commit)
            return True
        return False

    def runtime_metrics(self) -> dict[str, Any]:
        return {"sink-record-read-total": self.records_read, "sink-record-send-total": self.records_put,
                "consumer-lag": self.consumer_lag(), **super().runtime_metrics()}

    def consumer_lag(self) -> list[dict[str, Any]]:
        """Per assigned partition: the next offset to deliver (the last committed one before any was
        delivered), the log end offset as of the last fetch, and the records between them."""
        out: list[dict[str, Any]] = []
        if self.consumer is None:
            return out
        for tp in sorted(self.consumer.assignment(), key=lambda tp: (tp.topic, tp.partition)):
            offset = self.current.get(tp, self.committed.get(tp))
            end = self.consumer.highwater(tp)
            lag = max(end - offset, 0) if end is not None and offset is not None else None
            out.append({"topic": tp.topic, "partition": tp.partition, "offset": offset, "end-offset": end,
                        "lag": lag})
        return out

    def signal_stop(self) -> None:
        pass

    async def close(self) -> None:
        consumer = self.consumer
        try:
            if consumer is not None:
                consumer.serving = False  # a rebalance from here on (consumer.stop) is handled as it comes
                try:
                    await self.handle_rebalances()
                except Exception:
                    log.exception("task %s: handling a rebalance while closing failed", self.id)
            # After a failed put too: ``current`` covers only what earlier puts delivered, and
            # committing it (after the task's flush) spares those records a second delivery.
            if consumer is not None and self.started and not self.commit_failed:
                try:
                    await self.commit_offsets()
                except Exception:
                    log.exception("final offset commit of task %s failed", self.id)
                await call(self.task.close, list(consumer.assignment()))
            if self.started:
                await call(self.task.stop)
        finally:
            if consumer is not None:
                await consumer.stop()
            if self.dlq_producer is not None:
                await self.dlq_producer.stop()


def _raw(tp: TopicPartition, m: ConsumedRecord) -> RawRecord:
    return RawRecord(tp.topic, tp.partition, m.offset, m.timestamp, m.key, m.value, list(m.headers or []))
