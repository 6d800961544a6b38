"""Source tasks: read from the outside world, return SourceRecords from ``poll``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from .batch import EncodedBatch, EncodedValues, RecordBatches, SourceBatch
from .converters import Converter
from .metrics import MetricSample
from .records import SourceRecord

Encoded = EncodedBatch | EncodedValues | RecordBatches

__all__ = ["Encoded", "OffsetStorageReader", "RecordMetadata", "SourceTask", "SourceTaskContext", "TransactionContext"]


class OffsetStorageReader(ABC):
    @abstractmethod
    def offset(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        """The last committed offset of a source partition, or None."""

    def offsets(self, partitions: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        return [(p, self.offset(p)) for p in partitions]


class TransactionContext(ABC):
    """Where a task's transactions end, drawn by the task itself (Kafka's TransactionContext; KIP-618): given
    by ``SourceTaskContext.transaction_context()`` when the worker delivers exactly once and the connector runs
    with ``transaction.boundary=connector``. Call it from ``poll`` (or any time before the records concerned
    are handed back); a request is acted on once the records it names were handed to the producer.

    An aborted transaction's records are discarded (a read_committed consumer never sees them), but their
    source offsets are still committed, so they are not read again: a task that wants them re-read raises
    from ``poll`` instead. The record forms name a record ``poll`` returned (the same object); tasks on the
    batch or encoded paths (``poll_batch``, ``poll_encoded``) use the forms without a record."""

    @abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit the transaction after the records of the next poll were handed over; with ``record``,
        right after that record (the last one of the transaction)."""

    @abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort the transaction after the records of the next poll were handed over; with ``record``,
        right after that record (the last one of the aborted transaction). Their offsets are committed."""


class SourceTaskContext(ABC):
    configs: dict[str, str]

    @property
    @abstractmethod
    def offset_storage_reader(self) -> OffsetStorageReader:
        """Read committed offsets (on start, to resume)."""

    def errant_record_reporter(self) -> Callable[[Any, BaseException], None] | None:
        """A function ``poll`` calls for a record it cannot make (e.g. a change it cannot convert), with a
        description of the record and the error. It applies ``errors.tolerance`` as for a record whose
        conversion failed: with ``all`` the failure is logged and counted and the call returns (the task
        leaves the record out and moves on; there is no dead letter queue for sources); with ``none`` it
        raises, failing the task. None on runtimes that have no reporter."""
        return None

    def transaction_context(self) -> TransactionContext | None:
        """The task's own transaction boundaries (KIP-618): a TransactionContext when the worker delivers
        exactly once and the connector runs with ``transaction.boundary=connector``; else None."""
        return None


class RecordMetadata:
    """Where an acknowledged record landed."""

    __slots__ = ("topic", "partition", "offset", "timestamp")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int | None) -> None:
        self.topic, self.partition, self.offset, self.timestamp = topic, partition, offset, timestamp


class SourceTask(ABC):
    """Rules: ``poll`` returns a list of records, or None/[] when idle, and must return
    regularly (wait at most about a second); it may be ``async``. Offsets returned by
    records are committed only after Kafka acknowledged every record they cover.
    """

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        self.context = context

    @abstractmethod
    def start(self, config: dict[str, str]) -> None | Awaitable[None]:
        """Start with this task's config map (from the connector's ``task_configs``)."""

    @abstractmethod
    def poll(self) -> list[SourceRecord] | None | Awaitable[list[SourceRecord] | None]:
        """Records read since the last call; may be a coroutine function."""

    def poll_batch(self) -> SourceBatch | None | Awaitable[SourceBatch | None]:
        """Optional fast path: the next records as one SourceBatch, or None when idle. The
        worker calls it instead of ``poll`` when nothing needs record objects (see
        ``headwater.connect.api.batch``); it must return what ``poll`` would have."""
        raise NotImplementedError

    def encode_with(self, key_converter: Converter, value_converter: Converter) -> bool:
        """Optional fast path, offered once after ``start`` when nothing needs record objects (no
        transforms, no ``commit_record``, ``errors.tolerance=none``): return True to write the
        converters' wire form yourself; the worker then calls ``poll_encoded`` instead of ``poll``.
        Only for a task that knows these converters well enough to write byte for byte what they
        would (its tests must compare the two)."""
        return False

    def poll_encoded(self) -> Encoded | list[Encoded] | None | Awaitable[Encoded | list[Encoded] | None]:
        """What ``poll`` would return, already in the converters' wire form (see ``encode_with``): one
        batch, or several (e.g. one per source partition); ``EncodedValues`` carry one topic's values with one
        key, ``RecordBatches`` whole Kafka batches."""
        raise NotImplementedError

    def commit_encoded(self, batch: Encoded,  # noqa: B027 - optional hook
                       placed: list[tuple[int, int]]) -> None | Awaitable[None]:
        """Every record of an encoded batch was acknowledged. ``placed`` says where they landed: for each
        Kafka batch they went out in, (index of its first record in the batch handed over, counting
        ``RecordBatches`` records across its batches, that record's offset); the records after it up to
        the next entry follow it offset by offset. Called in order, soon after the acknowledgement (at
        the latest with the next poll) and before the batch's source offset is stored (a mirror writes
        its offset syncs from it)."""

    def running_trace(self) -> str | None:
        """Optional: text shown as this RUNNING task's trace in the connector's status (e.g. replication
        lag); read at every offset commit, and written to the status when it changed."""
        return None

    def stop(self) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """Stop: may be called while ``poll`` is waiting."""

    def commit(self) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """Offsets up to the last acknowledged records were committed (with exactly-once delivery: the
        transaction holding them committed)."""

    def commit_record(self, record: SourceRecord,  # noqa: B027 - optional hook
                      metadata: RecordMetadata | None) -> None | Awaitable[None]:
        """One record was acknowledged (metadata None: it was filtered or dropped under tolerance, or, when the
        worker delivers exactly once, its transaction was aborted). With exactly-once delivery it is called
        only once the record's transaction committed (or was aborted)."""

    def metrics(self) -> dict[str, Any]:
        """Optional: what the task wants operators to see while it runs (progress, lag), as
        JSON-able values; served at ``GET /connectors/{name}/tasks/{id}/metrics``."""
        return {}

    def exported_metrics(self) -> list[MetricSample]:
        """Optional: samples for the worker's ``GET /metrics`` under names of the task's own (every sample of
        one name must carry the same label names); the worker adds ``connector`` and ``task`` labels."""
        return []
