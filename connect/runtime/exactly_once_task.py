"""ExactlyOnceWorkerSourceTask: a source task whose records and source offsets commit in one Kafka transaction
(KIP-618; Kafka's ExactlyOnceWorkerSourceTask), on a worker with ``exactly.once.source.support=enabled``.

It is a WorkerSourceTask (the same send paths, topic creation and hand-over retries); what differs:
- its producer is transactional, ``transactional.id`` ``<group.id>-<connector>-<task>``: starting it
  (InitProducerId) fences any older instance of the task and ends that instance's open transaction;
- a transaction begins with the first batch after a commit; the source offsets of what it holds are
  written into it, to the offsets topic (the connector's ``offsets.storage.topic``, else the worker's), with
  the keys and values KafkaOffsetStore writes, just before it commits;
- it ends where ``transaction.boundary`` says: after each poll that returned something (``poll``), every
  ``transaction.boundary.interval.ms`` (``interval``; default ``offset.flush.interval.ms``), or where the
  task's TransactionContext asks (``connector``). ``offset.flush.interval.ms`` has no other use here;
- only once the transaction committed do the offsets enter the worker's view and is the task told
  (``commit_record``, ``commit_encoded``, ``commit``);
- a batch the target did not take fails the task and its transaction is aborted (errors.tolerance does not
  apply to producing, as in Kafka); a fenced producer fails the task, saying so.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from ..api import ConnectException, SourceRecord
from ..api.exactly_once import TRANSACTION_BOUNDARIES, choice
from ..api.source import TransactionContext
from ..kafka.batch_producer import Acked, BatchBuilderLike
from ..kafka.partitioner import partition_for_key
from ..kafka.transactions import Transactions, is_fenced
from ..status import TargetState, TaskId
from ..storage.connector_offsets import ConnectorOffsetStore
from ..storage.offsets import OffsetStore, offset_value
from .source_paths import RecordPath
from .source_task import WorkerSourceTask, _delivery_failed, _Submitted
from .topic_creation import TopicCreation
from .worker_task import StatusListener, TaskPipeline, call

__all__ = ["ExactlyOnceWorkerSourceTask", "TaskOffsets", "WorkerTransactionContext", "transaction_boundary"]

log = logging.getLogger(__name__)

_NO_HEADERS: list[tuple[str, bytes | None]] = []
StoredOffsets = dict[str, dict[str, Any] | None]  # by offset key; None resets


def transaction_boundary(props: dict[str, Any], flush_interval_ms: int) -> tuple[str, int]:
    """A connector's ``transaction.boundary`` and the interval in ms ``interval`` uses (its
    ``transaction.boundary.interval.ms``, else the worker's ``offset.flush.interval.ms``)."""
    boundary = choice(str(props.get("transaction.boundary", "poll")), TRANSACTION_BOUNDARIES)
    interval = props.get("transaction.boundary.interval.ms")
    return boundary, int(interval) if interval not in (None, "") else flush_interval_ms


@dataclass
class TaskOffsets:
    """Where an exactly-once task's offsets go: ``topic``, written in its transactions, read through ``store``
    (a ConnectorOffsetStore, which the task starts and stops, when the connector has a topic of its own)."""

    topic: str
    store: OffsetStore


class WorkerTransactionContext(TransactionContext):
    """The requests of a task drawing its own boundaries (``transaction.boundary=connector``), taken by the
    runtime after each poll (``batch_request``) and after each record handed over (``record_request``). A task
    may call it from its poll thread; each call is one dict or attribute write."""

    def __init__(self) -> None:
        self._commit = self._abort = False
        self._commit_on: dict[int, SourceRecord] = {}
        self._abort_on: dict[int, SourceRecord] = {}

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        if record is None:
            self._commit = True
        else:
            self._commit_on[id(record)] = record

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        if record is None:
            self._abort = True
        else:
            self._abort_on[id(record)] = record

    def batch_request(self) -> str | None:
        """"commit", "abort" or None: what the task asked for since the last poll; the request is taken."""
        commit, abort = self._commit, self._abort
        self._commit = self._abort = False
        if commit and abort:
            raise ConnectException("the task asked both to commit and to abort the transaction after the same poll")
        return "commit" if commit else "abort" if abort else None

    def has_record_requests(self) -> bool:
        return bool(self._commit_on or self._abort_on)

    def record_request(self, record: SourceRecord) -> str | None:
        """"commit", "abort" or None: what the task asked for once ``record`` is handed over; taken."""
        commit = self._commit_on.pop(id(record), None) is not None
        abort = self._abort_on.pop(id(record), None) is not None
        if commit and abort:
            raise ConnectException(f"the task asked both to commit and to abort the transaction after a record for "
                                   f"{record.topic}")
        return "commit" if commit else "abort" if abort else None


class RecordBoundaryPath(RecordPath):
    """The record path of a task drawing its own boundaries: a poll's records are handed over in runs ending
    at each record the task named in ``commit_transaction(record)`` / ``abort_transaction(record)``, and the
    transaction ends right after that record."""

    owner: ExactlyOnceWorkerSourceTask

    async def send(self, polled: list[SourceRecord]) -> None:
        context = self.owner.context
        assert context is not None
        if not context.has_record_requests():
            await super().send(polled)
            return
        start = 0
        for i, record in enumerate(polled):
            request = context.record_request(record)
            if request is not None:
                await super().send(polled[start:i + 1])
                await self.owner.end_transaction(abort=request == "abort")
                start = i + 1
        if start < len(polled):
            await super().send(polled[start:])


class ExactlyOnceWorkerSourceTask(WorkerSourceTask):
    def __init__(self, task_id: TaskId, pipeline: TaskPipeline[Any], *, offsets: TaskOffsets,
                 transactional_id: str, boundary: str, boundary_interval_ms: int, flush_timeout_ms: int,
                 topic_creation: TopicCreation | None = None, target_state: TargetState,
                 on_status: StatusListener) -> None:
        super().__init__(task_id, pipeline, offset_store=offsets.store, flush_timeout_ms=flush_timeout_ms,
                         topic_creation=topic_creation, target_state=target_state, on_status=on_status)
        self.offsets_topic = offsets.topic
        self.transactional_id = transactional_id
        self.boundary = boundary
        if boundary == "interval":
            self.flush_interval = boundary_interval_ms / 1000  # schedule_commit's interval
        self.context = WorkerTransactionContext() if boundary == "connector" else None
        self.txn: Transactions | None = None
        self._aborted: list[_Submitted] = []  # polls of aborted transactions: their offsets commit next
        self._abort_next = False  # the task asked to abort the transaction after the last poll
        self._mid_poll = False  # a poll's records are being handed over (a stop now leaves them half sent)
        self._send_error: asyncio.Future[Acked] | None = None  # the first batch the target did not take
        self.transactions_committed = 0
        self.transactions_aborted = 0

    # -- the producer and the task's context ---------------------------------------------------------

    def make_producer(self, **settings: Any) -> Any:
        return super().make_producer(transactional_id=self.transactional_id, enable_idempotence=True, **settings)

    def transaction_context(self) -> TransactionContext | None:
        return self.context

    async def initialize(self) -> None:
        await super().initialize()  # starting the producer fences older instances of this task
        self.txn = Transactions(self.producer)
        log.info("task %s delivers exactly once: transactional.id %s, transaction.boundary=%s%s, offsets in %s",
                 self.id, self.transactional_id, self.boundary,
                 f" ({self.flush_interval * 1000:.0f} ms)" if self.boundary == "interval" else "", self.offsets_topic)
        if self.context is not None and type(self.path) is RecordPath:
            self.path = RecordBoundaryPath(self, notifies=self.path.notifies, track=self.path.track)

    @property
    def transactions(self) -> Transactions:
        if self.txn is None:
            raise ConnectException(f"task {self.id} has no transactional producer: it was not initialized")
        return self.txn

    # -- sending: inside a transaction, never tolerated when it fails ---------------------------------

    async def iteration(self) -> None:
        self._mid_poll = True
        await super().iteration()
        self._mid_poll = False
        if self._send_error is not None:  # fail now, not at the commit (a fenced task would send on till then)
            fut = self._send_error
            raise self._failed("the target did not take a batch", _delivery_failed(
                fut.exception(), self._sent_to.get(id(fut))))

    def _on_ack(self, fut: asyncio.Future[Acked]) -> None:
        if self._send_error is None and not fut.cancelled() and fut.exception() is not None:
            self._send_error = fut

    async def ensure_topic(self, topic: str) -> None:
        if topic == self.offsets_topic:
            # Kafka refuses it too: the next offset read would wait behind the task's own open transaction
            raise ConnectException(f"task {self.id} may not write records to its offsets topic {topic} when "
                                   f"exactly-once support is enabled")
        await super().ensure_topic(topic)

    async def send_builder(self, builder: BatchBuilderLike, topic: str, partition: int,
                           futures: list[asyncio.Future[Acked]]) -> asyncio.Future[Acked] | None:
        try:
            await self.transactions.begin()
        except Exception as exc:
            raise self._failed("beginning a transaction failed", exc) from exc
        fut = await super().send_builder(builder, topic, partition, futures)
        if fut is not None:
            fut.add_done_callback(self._on_ack)
        return fut

    async def send_failed(self, builder: BatchBuilderLike, topic: str, partition: int,
                          failed: Exception) -> asyncio.Future[Acked] | None:
        raise self._failed(f"handing a batch of {builder.record_count()} records for {topic}-{partition} to the "
                           f"producer failed", failed) from failed

    async def notify_acknowledged(self) -> None:
        """Nothing before the commit: an acknowledged record of an open transaction may still be aborted."""

    # -- transaction boundaries ------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Something to commit: records handed over, or offsets (of polls whose records were all dropped, or
        of an aborted transaction)."""
        return bool(self.outstanding or self._aborted or (self.txn is not None and self.txn.open))

    def commit_due(self) -> bool:
        if self.context is not None:
            request = self.context.batch_request()
            self._abort_next = request == "abort"
            return request is not None
        # Kafka commits after every poll (or interval) even with nothing to commit: the task's commit() is still
        # called then (a source may clean up in it), only the transaction is skipped
        return self.boundary == "poll" or super().commit_due()

    def final_commit_due(self) -> bool:
        """Whether to commit when pausing or stopping: whatever is pending, unless the task draws the
        boundaries (then only what it asked for, as Kafka)."""
        return self.commit_due() if self.context is not None else self.pending

    async def end_transaction(self, abort: bool) -> None:
        """End the open transaction where the task asked: commit it, or abort it and commit its offsets."""
        self._abort_next = abort
        await self.timed_commit()

    async def commit_offsets(self) -> bool:
        if self._abort_next:
            self._abort_next = False
            await self._abort()
        return await self._commit()

    async def _abort(self) -> None:
        txn = self.transactions
        if txn.open:
            try:
                await txn.abort()
            except Exception as exc:
                raise self._failed("aborting the transaction the task asked to abort failed", exc) from exc
        self._aborted.extend(self.outstanding)
        self.outstanding.clear()
        self._notified = 0
        self.transactions_aborted += 1
        log.info("task %s aborted its transaction as the task asked (%d polls); their offsets commit next",
                 self.id, len(self._aborted))

    async def _commit(self) -> bool:
        """Write the offsets of everything since the last commit into the open transaction (one is begun for
        offsets alone after an abort) and commit it; then remember the offsets and tell the task."""
        txn = self.transactions
        offsets: StoredOffsets = {}
        for entry in (*self._aborted, *self.outstanding):
            offsets.update(entry.offsets)
        if not offsets and not txn.open:
            await self._committed(offsets)  # polls that sent nothing and had no offsets
            await call(self.task.commit)
            return False
        futures: list[asyncio.Future[Acked]] = []
        try:
            if offsets:
                await txn.begin()
                await self._write_offsets(offsets, futures)
            await self.started_producer.flush()
            for fut in (*(f for entry in self.outstanding for f in entry.futures), *futures):
                if fut.exception() is not None:
                    raise _delivery_failed(fut.exception(), self._sent_to.get(id(fut)))
            await txn.commit()
        except Exception as exc:
            raise self._failed("committing its transaction failed", exc) from exc
        self.transactions_committed += 1
        await self._committed(offsets)
        await call(self.task.commit)
        return True

    async def _committed(self, offsets: StoredOffsets) -> None:
        aborted, committed = self._aborted, list(self.outstanding)
        self._aborted = []
        self.outstanding.clear()
        self._sent_to.clear()
        self._notified = 0
        self.offset_store.remember(offsets)
        for entry in aborted:
            await self._notify(entry, landed=False)
        for entry in committed:
            await self._notify(entry)
        if offsets and isinstance(self.offset_store, ConnectorOffsetStore):
            await self.offset_store.copy_to_worker(self.id.connector, offsets)

    async def _write_offsets(self, offsets: StoredOffsets, futures: list[asyncio.Future[Acked]]) -> None:
        """The offsets as records of the offsets topic, in the open transaction: key and value as
        KafkaOffsetStore writes them, each key in the partition Kafka's default partitioner gives it."""
        producer, topic = self.started_producer, self.offsets_topic
        count = self.partition_counts.get(topic)
        if count is None:
            count = self.partition_counts[topic] = len(await producer.partitions_for(topic))
        builders: dict[int, BatchBuilderLike] = {}
        for key, offset in offsets.items():
            raw, value = key.encode(), offset_value(offset)
            partition = partition_for_key(raw, count)
            builder = builders.get(partition) or builders.setdefault(partition, producer.create_batch())
            if builder.append(timestamp=None, key=raw, value=value, headers=_NO_HEADERS) is None:
                await super().send_builder(builder, topic, partition, futures)
                builder = builders[partition] = producer.create_batch()
                if builder.append(timestamp=None, key=raw, value=value, headers=_NO_HEADERS) is None:
                    raise ConnectException(f"the offset of {key} does not fit in a batch")
        for partition, builder in builders.items():
            await super().send_builder(builder, topic, partition, futures)

    def _failed(self, what: str, exc: BaseException) -> ConnectException:
        """Why the task fails, clearly when its producer was fenced."""
        if is_fenced(exc):
            return ConnectException(
                f"task {self.id} was fenced: {what} because a newer producer uses its transactional.id "
                f"{self.transactional_id} (a newer instance of the task started, or the transaction coordinator "
                f"aborted a transaction open longer than transaction.timeout.ms). Its open transaction is not "
                f"committed; the newer instance goes on from the last committed offsets. ({exc!r})")
        return ConnectException(f"task {self.id}: {what}; the open transaction is aborted and nothing of it is "
                                f"committed: {exc!r}")

    # -- pausing and stopping --------------------------------------------------------------------------

    async def before_pause(self) -> None:
        """Commit before PAUSED is reported, so no transaction stays open (and times out) while paused."""
        if self.final_commit_due():
            await self.timed_commit()

    async def close(self) -> None:
        try:
            if self.txn is not None:
                await self._close_transaction()
        finally:
            await self.release()

    async def _close_transaction(self) -> None:
        """Commit what is pending when the task stops cleanly between polls; abort what is left open."""
        txn = self.transactions
        if self.failure is None and not self._mid_poll and txn.failure() is None:
            try:
                if self.final_commit_due():
                    await asyncio.wait_for(self.commit_offsets(), self.flush_timeout)
            except Exception as exc:
                log.error("task %s: the last commit when stopping failed: %s", self.id, exc)
        if txn.open and txn.failure() is None:
            try:
                await asyncio.wait_for(txn.abort(), self.flush_timeout)
                log.info("task %s aborted its open transaction while stopping", self.id)
            except Exception as exc:
                log.warning("task %s: aborting its open transaction while stopping failed (the transaction "
                            "coordinator aborts it after transaction.timeout.ms): %r", self.id, exc)

    def runtime_metrics(self) -> dict[str, Any]:
        return {**super().runtime_metrics(), "transaction-commit-total": self.transactions_committed,
                "transaction-abort-total": self.transactions_aborted}
