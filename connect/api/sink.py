"""Sink tasks: receive SinkRecords in ``put`` and write them out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from typing import Any

from .batch import EncodedSinkBatch, SinkBatch
from .metrics import MetricSample
from .records import SinkRecord, TopicPartition

__all__ = ["OffsetAndMetadata", "SinkTask", "SinkTaskContext"]

OffsetAndMetadata = int  # the next offset to consume, as Kafka commits it


class SinkTaskContext(ABC):
    configs: dict[str, str]

    @abstractmethod
    def offset(self, offsets: dict[TopicPartition, int]) -> None:
        """Rewind or skip: consume these partitions from these offsets next."""

    @abstractmethod
    def timeout(self, ms: int) -> None:
        """After a RetriableException from ``put``, retry after this long."""

    @abstractmethod
    def assignment(self) -> set[TopicPartition]:
        """Partitions currently assigned to this task."""

    @abstractmethod
    def pause(self, *partitions: TopicPartition) -> None:
        """Stop delivering records of these partitions."""

    @abstractmethod
    def resume(self, *partitions: TopicPartition) -> None:
        """Deliver records of these partitions again."""

    @abstractmethod
    def request_commit(self) -> None:
        """Commit offsets as soon as possible."""

    def errant_record_reporter(self) -> Callable[[SinkRecord, BaseException], None] | None:
        """Kafka's ``errantRecordReporter``: a function a sync ``put`` calls for a record it cannot write.
        It applies ``errors.tolerance`` as for a record that failed conversion: with ``all`` the record
        is logged and sent to the dead letter queue and ``put`` goes on without it; with ``none`` it
        raises, failing the task. None on runtimes that have no reporter."""
        return None


class SinkTask(ABC):
    """Rules: ``put`` may buffer; data is safe only once ``flush``/``pre_commit`` returns,
    and only the offsets ``pre_commit`` returns are committed. Any method may be ``async``.
    """

    context: SinkTaskContext

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abstractmethod
    def start(self, config: dict[str, str]) -> None | Awaitable[None]:
        """Start with this task's config map."""

    @abstractmethod
    def put(self, records: list[SinkRecord]) -> None | Awaitable[None]:
        """Write (or buffer) records; raise RetriableException to have them redelivered."""

    def put_batch(self, batch: SinkBatch) -> None | Awaitable[None]:
        """Optional fast path: ``put`` for consecutive records of one partition as columns.
        The worker calls it instead of ``put`` when the connector has no transforms (see
        ``headwater.connect.api.batch``); same rules as ``put``."""
        raise NotImplementedError

    def decode_with(self, key_converter: Any, value_converter: Any) -> bool:
        """Optional: the worker offers its converters when the connector has no transforms; a task
        that can read their wire form itself (faster than Connect values) answers True and then gets
        ``put_encoded`` calls (see ``headwater.connect.api.batch.EncodedSinkBatch``)."""
        return False

    def put_encoded(self, batch: EncodedSinkBatch) -> bool | Awaitable[bool]:
        """Write (or buffer) records still in wire form; same rules as ``put``. Return False to have
        the worker convert this batch and deliver it through ``put_batch``/``put`` instead (the task
        must not have kept any of it)."""
        return False

    def flush(self, offsets: dict[TopicPartition, int]) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """Make everything ``put`` so far durable."""

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int] | Any:
        """Offsets safe to commit; the default flushes and returns ``offsets``."""
        result = self.flush(offsets)
        if hasattr(result, "__await__"):
            return _after(result, offsets)
        return offsets

    def open(self, partitions: list[TopicPartition]) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """These partitions were assigned to the task."""

    def close(self, partitions: list[TopicPartition]) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """These partitions are being taken away (flush their data first)."""

    def stop(self) -> None | Awaitable[None]:  # noqa: B027 - optional hook
        """Release resources."""

    def metrics(self) -> dict[str, Any]:
        """Optional: what the task wants operators to see while it runs, as JSON-able values;
        served at ``GET /connectors/{name}/tasks/{id}/metrics``."""
        return {}

    def exported_metrics(self) -> list[MetricSample]:
        """Optional: samples for the worker's ``GET /metrics`` under names of the task's own (every sample of
        one name must carry the same label names); the worker adds ``connector`` and ``task`` labels."""
        return []


async def _after(awaitable: Any, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    await awaitable
    return offsets
