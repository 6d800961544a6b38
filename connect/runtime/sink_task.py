"""WorkerSinkTask: consumer group ``connect-<name>`` -> converters -> transforms -> put.

Offsets are committed to the group only after ``pre_commit`` (by default ``flush``)
returned them: every ``offset.flush.interval.ms``, when the task asks, before
partitions are revoked, and on stop. Records that fail conversion or transformation
go through the error handler (retry, tolerate, log, dead letter queue). How fetched records
reach the task (``put``, ``put_batch``, ``put_encoded``) is a delivery path chosen once the task
started (``sink_paths.py``).

Rebalances reach the task as events (``SinkConsumer``) that its own loop handles between
deliveries: ``open``, ``close`` and the commit before a revocation never run while records
are being delivered, as in Kafka's single-threaded consumer.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from .. import kafka as clients
from ..api import (
    ConnectException,
    RetriableException,
    SinkConnectorConfig,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    TopicPartition,
)
from ..kafka.batch_producer import RecordSender
from ..kafka.sink_consumer import (
    CommitRefused,
    PartitionsRevoked,
    RebalanceEvent,
    SinkConsumer,
)
from ..status import TargetState, TaskId
from .errors import RawRecord, Stage, TaskStopping, dlq_reporter
from .sink_paths import DeliveryPath, choose_delivery_path
from .worker_task import RecordTask, StatusListener, TaskPipeline, call

__all__ = ["WorkerSinkTask"]

log = logging.getLogger(__name__)

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
        self.delivery: DeliveryPath | None = None  # chosen once the task started
        self.retry_timeout = 1.0
        self.started = False
        self.commit_failed = False
        self.records_put = 0
        self.records_read = 0
        self.max_poll_records = int(consumer_overrides.get("max.poll.records", 10000))
        self.loop: asyncio.AbstractEventLoop | None = None
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
        self.delivery = choose_delivery_path(self)
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
            assert self.delivery is not None, "iteration before initialize"
            await self.delivery.deliver(fetched)

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

    async def put_with(self, deliver: Callable[[D], object], data: D, count: int) -> Any:
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

