"""WorkerSinkTask: consumer group ``connect-<name>`` -> converters -> transforms -> put.

Offsets are committed to the group only after ``pre_commit`` (by default ``flush``)
returned them: every ``offset.flush.interval.ms``, when the task asks, before
partitions are revoked, and on stop. Records that fail conversion or transformation
go through the error handler (retry, tolerate, log, dead letter queue). A task with
``put_batch`` and no transforms gets each partition's records as one SinkBatch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from aiokafka import ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTP
from aiokafka.errors import CommitFailedError
from aiokafka.structs import OffsetAndMetadata

from .. import kafka as clients
from ..api import (
    ConnectException,
    EncodedSinkBatch,
    Header,
    RetriableException,
    SinkBatch,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    TopicPartition,
)
from ..kafka import RecordFetcher
from ..status import TargetState, TaskId
from .errors import RawRecord, Stage, TaskStopping, dlq_reporter
from .worker_task import RecordTask, TaskPipeline, call

__all__ = ["WorkerSinkTask"]

log = logging.getLogger(__name__)

_TS_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class _Context(SinkTaskContext):
    def __init__(self, owner: WorkerSinkTask, configs: dict[str, str]) -> None:
        self.owner = owner
        self.configs = configs

    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        self.owner.rewinds.update(offsets)

    def timeout(self, ms: int) -> None:
        self.owner.retry_timeout = ms / 1000

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self.owner.consumer.assignment()}

    def pause(self, *partitions: TopicPartition) -> None:
        self.owner.consumer.pause(*[KafkaTP(p.topic, p.partition) for p in partitions])

    def resume(self, *partitions: TopicPartition) -> None:
        self.owner.consumer.resume(*[KafkaTP(p.topic, p.partition) for p in partitions])

    def request_commit(self) -> None:
        self.owner.commit_requested = True

    def errant_record_reporter(self) -> Callable[[SinkRecord, BaseException], None]:
        return self.owner.report_errant


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, owner: WorkerSinkTask) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: set[KafkaTP]) -> None:
        if revoked and self.owner.started:
            async with self.owner.delivering:
                await self.owner.commit_offsets(list(revoked))
                await call(self.owner.task.close, [TopicPartition(tp.topic, tp.partition) for tp in revoked])
                for tp in revoked:
                    self.owner.current.pop(TopicPartition(tp.topic, tp.partition), None)
                    self.owner.opened.discard(TopicPartition(tp.topic, tp.partition))

    async def on_partitions_assigned(self, assigned: set[KafkaTP]) -> None:
        if assigned and self.owner.target_state == TargetState.PAUSED:
            self.owner.consumer.pause(*assigned)
        if assigned:
            # aiokafka may already fetch for these partitions while this runs: the task loop delivers a
            # partition's records only once open() returned (and after any seek open() asked for), and
            # never while open() runs, as Kafka's single-threaded consumer guarantees.
            partitions = [TopicPartition(tp.topic, tp.partition) for tp in assigned]
            async with self.owner.delivering:
                try:
                    await call(self.owner.task.open, partitions)
                except Exception as exc:
                    # aiokafka only logs a listener's exception: keep it, so the task fails with it
                    self.owner.open_failure = exc
                    return
                self.owner.opened.update(partitions)


class WorkerSinkTask(RecordTask):
    task: SinkTask

    def __init__(self, task_id: TaskId, pipeline: TaskPipeline, *, consumer_overrides: dict[str, str],
                 connector_config: Any, **kw: Any) -> None:
        super().__init__(task_id, pipeline, **kw)
        self.consumer_overrides = consumer_overrides
        self.config = connector_config
        self.consumer: Any = None
        self.dlq_producer: Any = None
        self.current: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self.rewinds: dict[TopicPartition, int] = {}
        self.batched = self.uses_batches()
        self.retry_timeout = 1.0
        self.started = False
        self.commit_failed = False
        self.records_put = 0
        self.records_read = 0
        self.max_poll_records = int(consumer_overrides.get("max.poll.records", 10000))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.open_failure: BaseException | None = None
        self.encoded = False  # the task reads the converters' wire form itself (decode_with)
        self.opened: set[TopicPartition] = set()  # partitions whose open() returned
        self.delivering = asyncio.Lock()  # open/close never run while records are being delivered
        self.loop_thread = 0

    async def initialize(self) -> None:
        cfg = self.config
        self.consumer = clients.consumer(
            self.bootstrap, self.consumer_overrides, group_id=f"connect-{self.id.connector}",
            enable_auto_commit=False, auto_offset_reset="earliest", max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=16 << 20, max_poll_records=self.max_poll_records, client_id=f"connector-consumer-{self.id}")
        await self.consumer.start()
        self.fetcher = RecordFetcher(self.consumer)
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
        listener = _Rebalance(self)
        if cfg.topics_regex:
            self.consumer.subscribe(pattern=f"^(?:{cfg.topics_regex})$", listener=listener)
        else:
            self.consumer.subscribe(topics=cfg.topic_list(), listener=listener)

    def report_errant(self, record: SinkRecord, error: BaseException) -> None:
        """The task's errant record reporter, called from ``put`` in a worker thread: the record goes
        through the error handler as a failed TASK_PUT (log, DLQ, tolerance) and the call returns once
        it was handled; with errors.tolerance=none it raises ToleranceExceeded."""
        if self.loop is None or threading.get_ident() == self.loop_thread:
            raise RuntimeError("the errant record reporter is for sync put() methods (they run in a worker thread)")
        topic = record.topic
        raw = RawRecord(topic, record.kafka_partition or 0, record.kafka_offset, record.timestamp,
                        self.key_converter.from_connect_data(topic, record.key_schema, record.key),
                        self.value_converter.from_connect_data(topic, record.value_schema, record.value), [])
        done = asyncio.run_coroutine_threadsafe(
            self.errors.recover(Stage.TASK_PUT, self.task, error, raw=raw, record=record), self.loop)
        done.result()

    async def _send_dlq(self, topic: str, key: bytes | None, value: bytes | None,
                        headers: list[tuple[str, bytes]], timestamp: int | None) -> None:
        fut = await self.dlq_producer.send(topic, value=value, key=key, headers=headers, timestamp_ms=timestamp)
        await fut
        self.dlq_records += 1

    def on_pause(self) -> None:
        if self.consumer is not None:
            self.consumer.pause(*self.consumer.assignment())

    async def while_paused(self) -> None:
        """Kafka's WorkerSinkTask polls while paused: the consumer stays in its group (a consumer that
        stops polling for max.poll.interval.ms is put out of it) and nothing is delivered."""
        self.on_pause()  # partitions assigned since the pause too
        fetched = await self.fetcher.getmany(0, 1)
        for tp, messages in fetched.items():  # none expected: all partitions are paused
            if messages:
                self.consumer.seek(tp, messages[0].offset)
        await self.timed_commit()

    def on_resume(self) -> None:
        if self.consumer is not None:
            self.consumer.resume(*self.consumer.assignment())

    async def iteration(self) -> None:
        self._raise_open_failure()
        if self.rewinds:
            async with self.delivering:  # open() may be asking for seeks from its thread
                self._apply_rewinds()
        fetched = await self.fetcher.getmany(500, self.max_poll_records)
        self._raise_open_failure()
        if not fetched:
            return
        self.records_read += sum(len(messages) for messages in fetched.values())
        async with self.delivering:
            for tp in list(fetched):
                where = TopicPartition(tp.topic, tp.partition)
                if where in self.rewinds:
                    del fetched[tp]  # open() asked for a seek after these were fetched
                elif where not in self.opened:
                    # fetched before open() ran: read them again once it did
                    messages = fetched.pop(tp)
                    if messages:
                        self.rewinds.setdefault(where, messages[0].offset)
            if fetched:
                await (self._deliver_batches(fetched) if self.batched else self._deliver(fetched))

    def _raise_open_failure(self) -> None:
        failure, self.open_failure = self.open_failure, None
        if failure is not None:
            raise ConnectException(f"task {self.id} could not open its partitions: {failure}") from failure

    def uses_batches(self) -> bool:
        """Whether the task's ``put_batch`` (or ``put_encoded``) can stand in for ``put``: no transforms
        need record objects."""
        return (type(self.task).put_batch is not SinkTask.put_batch
                or type(self.task).put_encoded is not SinkTask.put_encoded) and not self.chain

    async def _deliver(self, fetched: dict[KafkaTP, list[Any]]) -> None:
        records, offsets = await self._convert(fetched)
        if records:
            await self._put(self.task.put, records, len(records))
        self.current.update(offsets)  # only now: a stop or a failure before put commits none of them

    async def _deliver_batches(self, fetched: dict[KafkaTP, list[Any]]) -> None:
        """One put_batch (or put_encoded) per partition; partitions that need the record path go through put."""
        leftovers: dict[KafkaTP, list[Any]] = {}
        for tp, messages in fetched.items():
            if not messages:
                continue
            if self.encoded and not any([m.headers for m in messages]):
                # counted only when taken: a batch handed back is counted by the path that delivers it
                taken = await self._put(self.task.put_encoded, EncodedSinkBatch(tp.topic, tp.partition, messages), 0)
                if taken:
                    self.records_put += len(messages)
                    self.topics.add(tp.topic)
                    self.current[TopicPartition(tp.topic, tp.partition)] = messages[-1].offset + 1
                    continue
            batch = self._batch(tp, messages) if type(self.task).put_batch is not SinkTask.put_batch else None
            if batch is None:
                leftovers[tp] = messages
                continue
            self.topics.add(tp.topic)
            await self._put(self.task.put_batch, batch, len(messages))
            self.current[TopicPartition(tp.topic, tp.partition)] = messages[-1].offset + 1
        if leftovers:
            await self._deliver(leftovers)

    def _batch(self, tp: KafkaTP, messages: list[Any]) -> SinkBatch | None:
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
            return None
        if keys is None or values is None:
            return None
        return SinkBatch(topic, tp.partition, keys.schema, keys.value, values.schema, values.value, messages)

    def _apply_rewinds(self) -> None:
        if not self.rewinds:
            return
        assigned = self.consumer.assignment()
        for tp, offset in self.rewinds.items():
            if KafkaTP(tp.topic, tp.partition) in assigned:  # not revoked since
                self.consumer.seek(KafkaTP(tp.topic, tp.partition), offset)
                self.current[tp] = offset
        self.rewinds.clear()

    async def _convert(self, fetched: dict[KafkaTP, list[Any]]) -> tuple[list[SinkRecord], dict[TopicPartition, int]]:
        """The fetched records as SinkRecords (each stage through the error handler), and the offset
        each partition reaches once they are delivered."""
        out: list[SinkRecord] = []
        offsets: dict[TopicPartition, int] = {}
        append = out.append
        kc, vc, hc = self.key_converter, self.value_converter, self.header_converter
        key_of, value_of = kc.to_connect_data, vc.to_connect_data
        execute = self.errors.execute
        chain = self.chain if self.chain else None  # tested once, not per record
        for tp, messages in fetched.items():
            if not messages:
                continue
            topic, partition = tp.topic, tp.partition
            self.topics.add(topic)
            for m in messages:
                try:
                    key_sv = key_of(topic, m.key)
                except Exception as exc:
                    ok, key_sv = await execute(Stage.KEY_CONVERTER, kc, partial(key_of, topic, m.key), failed=exc,
                                               raw=_raw(tp, m))
                    if not ok:
                        continue
                try:
                    value_sv = value_of(topic, m.value)
                except Exception as exc:
                    ok, value_sv = await execute(Stage.VALUE_CONVERTER, vc, partial(value_of, topic, m.value),
                                                 failed=exc, raw=_raw(tp, m))
                    if not ok:
                        continue
                headers = []
                if m.headers:
                    try:
                        headers = self._headers(topic, m.headers)
                    except Exception as exc:
                        ok, headers = await execute(Stage.HEADER_CONVERTER, hc,
                                                    partial(self._headers, topic, m.headers), failed=exc,
                                                    raw=_raw(tp, m))
                        if not ok:
                            continue
                offset = m.offset
                record = SinkRecord(topic, value_sv.value, key_sv.value, partition, key_sv.schema, value_sv.schema,
                                    m.timestamp, headers, offset,
                                    "CreateTime" if m.timestamp_type == 0 else _TS_TYPES.get(m.timestamp_type,
                                                                                            "CreateTime"),
                                    topic, partition, offset)
                if chain is not None:
                    try:
                        record = chain.apply(record)
                    except Exception as exc:
                        ok, record = await execute(Stage.TRANSFORMATION, chain, partial(chain.apply, record),
                                                   failed=exc, raw=_raw(tp, m))
                        if not ok:
                            continue
                    if record is None:
                        continue
                append(record)
            offsets[TopicPartition(topic, partition)] = messages[-1].offset + 1
        return out, offsets

    def _headers(self, topic: str, headers: Any) -> list[Header]:
        out = []
        for key, value in headers:
            sv = self.header_converter.to_connect_header(topic, key, value)
            out.append(Header(key, sv.value, sv.schema))
        return out

    async def _put(self, deliver: Callable[[Any], Any], data: Any, count: int) -> Any:
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
                assignment = self.consumer.assignment()
                self.consumer.pause(*assignment)
                await asyncio.sleep(self.retry_timeout)
                self.consumer.resume(*assignment)
                if self.stopping:
                    raise TaskStopping(f"task {self.id} stopped while retrying put") from exc

    async def commit_offsets(self, only: list[KafkaTP] | None = None) -> bool:
        """Commit what the task says is safe (pre_commit of the current offsets); whether any was committed."""
        current = dict(self.current)
        if only is not None:
            wanted = {TopicPartition(tp.topic, tp.partition) for tp in only}
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
        assigned = self.consumer.assignment()
        offsets = {KafkaTP(tp.topic, tp.partition): OffsetAndMetadata(o, "") for tp, o in to_commit.items()
                   if KafkaTP(tp.topic, tp.partition) in assigned}
        if offsets:
            try:
                await self.consumer.commit(offsets)
            except CommitFailedError as exc:
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
        for tp in sorted(self.consumer.assignment()):
            where = TopicPartition(tp.topic, tp.partition)
            offset = self.current.get(where, self.committed.get(where))
            end = self.consumer.highwater(tp)
            lag = max(end - offset, 0) if end is not None and offset is not None else None
            out.append({"topic": tp.topic, "partition": tp.partition, "offset": offset, "end-offset": end,
                        "lag": lag})
        return out

    def signal_stop(self) -> None:
        pass

    async def close(self) -> None:
        try:
            # After a failed put too: ``current`` covers only what earlier puts delivered, and
            # committing it (after the task's flush) spares those records a second delivery.
            if self.consumer is not None and self.started and not self.commit_failed:
                try:
                    await self.commit_offsets()
                except Exception:
                    log.exception("final offset commit of task %s failed", self.id)
                await call(self.task.close,
                           [TopicPartition(tp.topic, tp.partition) for tp in self.consumer.assignment()])
            if self.started:
                await call(self.task.stop)
        finally:
            if self.consumer is not None:
                await self.consumer.stop()
            if self.dlq_producer is not None:
                await self.dlq_producer.stop()


def _raw(tp: KafkaTP, m: Any) -> RawRecord:
    return RawRecord(tp.topic, tp.partition, m.offset, m.timestamp, m.key, m.value, list(m.headers or []))

