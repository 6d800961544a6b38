"""The producer as a source task sees it: batch builders filled by the task, sent whole.

``clients.producer`` builds an AIOKafkaProducer, which has this shape; the runtime types its producer
as ``BatchProducer`` and asks ``queue_full`` about a failed hand-over, so it needs nothing of
aiokafka itself.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from aiokafka.errors import KafkaTimeoutError

__all__ = ["Acked", "BatchBuilderLike", "BatchProducer", "RecordSender", "queue_full"]

Headers = list[tuple[str, bytes | None]]


class BatchBuilderLike(Protocol):
    """aiokafka's BatchBuilder (or ``PrebuiltBatch``): records appended until it is full."""

    def append(self, *, timestamp: int | None, key: bytes | None, value: bytes | None,
               headers: Headers) -> object | None: ...

    def record_count(self) -> int: ...

    def size(self) -> int: ...


class Acked(Protocol):
    """What a sent batch's future holds once the broker took it: the offset of its first record."""

    @property
    def offset(self) -> int: ...


class BatchProducer(Protocol):
    def create_batch(self) -> BatchBuilderLike: ...

    async def send_batch(self, builder: BatchBuilderLike, topic: str, *,
                         partition: int) -> asyncio.Future[Acked]: ...

    async def partitions_for(self, topic: str) -> set[int]: ...

    async def flush(self) -> None: ...


class RecordSender(Protocol):
    """A producer sending one record at a time (a sink task's dead letter queue)."""

    async def start(self) -> None: ...

    async def send(self, topic: str, *, value: bytes | None, key: bytes | None, headers: list[tuple[str, bytes]],
                   timestamp_ms: int | None) -> asyncio.Future[Acked]: ...

    async def stop(self) -> None: ...


def queue_full(exc: BaseException) -> bool:
    """aiokafka's timeout waiting for room in a partition's queue (Kafka's TimeoutException, a
    RetriableException there): the hand-over may be tried again."""
    return isinstance(exc, KafkaTimeoutError)
