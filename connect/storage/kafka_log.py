"""KafkaBasedLog: a compacted topic read from the start, then tailed; writes wait for the ack.

Every worker rebuilds the same state by replaying the topic, which is how configs,
offsets and statuses are shared in distributed mode (Kafka Connect's KafkaBasedLog).

The topic is read read_committed, always: Kafka's worker does so once exactly-once source support is
enabled (offsets written in a source task's transaction count only if it commits). Where nothing writes
transactionally the last stable offset is the high watermark, so it changes nothing there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import TopicPartition

from .. import kafka as clients
from ..api.errors import ConnectException
from ..kafka.topics import TopicCreationFailed, create_topic, topic_config

__all__ = ["InternalTopicError", "KafkaBasedLog", "LogReadFailed", "TopicNotCompacted", "ensure_compacted_topic"]

log = logging.getLogger(__name__)

RecordCallback = Callable[[bytes | None, bytes | None, int, int], None]  # key, value, partition, offset


class InternalTopicError(ConnectException, RuntimeError):
    """An internal topic is missing or unusable: the worker cannot keep its state."""


class LogReadFailed(ConnectException, RuntimeError):
    """The reader of an internal topic failed: this worker's view of it is stale."""


class TopicNotCompacted(InternalTopicError):
    """An internal topic exists with a cleanup.policy that would lose state."""


async def ensure_compacted_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int,
                                 purpose: str, config_key: str, security: Mapping[str, str] | None = None) -> None:
    """Create ``topic`` compacted if missing; refuse an existing one that is not compacted. ``security``: the
    worker's client security properties."""
    admin = clients.admin_client(bootstrap, security)
    await admin.start()
    try:
        try:
            if await create_topic(admin, topic, partitions, replication_factor, {"cleanup.policy": "compact"}):
                log.info("created %s topic %s (%d partitions, compacted)", purpose, topic, partitions)
        except TopicCreationFailed as exc:
            raise InternalTopicError(f"{exc} (the '{config_key}' property) for {purpose}") from None
        policy = await topic_config(admin, topic, "cleanup.policy")
        if policy is not None and "compact" not in policy.split(","):
            raise TopicNotCompacted(
                f"Topic '{topic}' supplied via the '{config_key}' property is required to have "
                f"'cleanup.policy=compact' to guarantee consistency and durability of {purpose}, but found the "
                f"topic currently has 'cleanup.policy={policy}'. Continuing would likely result in eventually "
                f"losing {purpose} and problems restarting this Connect cluster in the future. Change the "
                f"'{config_key}' property in the Connect worker configurations to use a topic with "
                f"'cleanup.policy=compact'.")
    finally:
        await admin.close()


class KafkaBasedLog:
    def __init__(self, bootstrap: str, topic: str, on_record: RecordCallback, client_id: str,
                 security: Mapping[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.security = dict(security or {})  # the worker's security.protocol, sasl.*, ssl.*
        self.topic = topic
        self.on_record = on_record
        self.client_id = client_id
        self.consumer: Any = None
        self.end_reader: Any = None  # its own connection: end offsets must not queue behind a long poll
        self.producer: Any = None
        self.partitions: list[TopicPartition] = []
        self._tail: asyncio.Task[None] | None = None
        self._progress = asyncio.Condition()
        self.failure: BaseException | None = None

    async def start(self) -> None:
        self.producer = clients.producer(self.bootstrap, self.security, acks="all", linger_ms=0,
                                         client_id=f"{self.client_id}-producer")
        await self.producer.start()
        self.consumer = clients.consumer(self.bootstrap, self.security, group_id=None, enable_auto_commit=False,
                                         auto_offset_reset="earliest", isolation_level="read_committed",
                                         client_id=f"{self.client_id}-consumer")
        await self.consumer.start()
        # its end offsets are the last stable offsets: what the reader above can reach
        self.end_reader = clients.consumer(self.bootstrap, self.security, group_id=None, enable_auto_commit=False,
                                           isolation_level="read_committed",
                                           client_id=f"{self.client_id}-end-offsets")
        await self.end_reader.start()
        parts = await self.producer.partitions_for(self.topic)
        self.partitions = [TopicPartition(self.topic, p) for p in sorted(parts)]
        self.consumer.assign(self.partitions)
        await self.consumer.seek_to_beginning(*self.partitions)
        self._tail = asyncio.create_task(self._run(), name=f"kafka-log-{self.topic}")
        await self.read_to_end()

    async def _run(self) -> None:
        try:
            while True:
                batch = await self.consumer.getmany(timeout_ms=500)
                for tp, records in batch.items():
                    for r in records:
                        self.on_record(r.key, r.value, tp.partition, r.offset)
                async with self._progress:
                    self._progress.notify_all()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failure = exc
            log.exception("reading %s failed; this worker's view of it is now stale", self.topic)
            async with self._progress:
                self._progress.notify_all()
            raise

    async def read_to_end(self, timeout: float = 60.0) -> None:
        """Return once every record written before this call has been passed to ``on_record``."""
        ends = await self.end_reader.end_offsets(self.partitions)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.failure is not None:
                raise LogReadFailed(f"reading {self.topic} failed") from self.failure
            positions = [await self.consumer.position(tp) for tp in ends]
            if all(pos >= end for pos, end in zip(positions, ends.values(), strict=True)):
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"timed out reading {self.topic} to its end")
            async with self._progress:
                try:
                    await asyncio.wait_for(self._progress.wait(), min(remaining, 0.5))
                except TimeoutError:
                    pass

    async def send(self, key: bytes | None, value: bytes | None, partition: int | None = None) -> None:
        await (await self.write(key, value, partition))

    async def write(self, key: bytes | None, value: bytes | None,
                    partition: int | None = None) -> asyncio.Future[Any]:
        """Queue a record for the topic; the future is its ack. Writes are sent in the order queued."""
        ack: asyncio.Future[Any] = await self.producer.send(self.topic, key=key, value=value, partition=partition)
        return ack

    async def flush(self) -> None:
        """Wait until every record queued so far was acked (or failed); nothing to wait for unstarted."""
        if self.producer is not None:
            await self.producer.flush()

    async def stop(self) -> None:
        if self._tail is not None:
            self._tail.cancel()
            await asyncio.gather(self._tail, return_exceptions=True)
        for client in (self.consumer, self.end_reader):
            if client is not None:
                await client.stop()
        if self.producer is not None:
            await self.producer.stop()
