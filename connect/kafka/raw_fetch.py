"""Fetching record batches as bytes: for a task that copies them to another cluster whole.

A consumer turns every record into an object; a copy needs none of them. ``BatchFetcher`` sends Fetch
requests of its own over a started AIOKafkaConsumer's client (the consumer itself is never assigned a
partition, so it fetches nothing) and returns each partition's record batches as the bytes the broker
sent. The caller moves the positions on (``advance``) as it takes batches; the next round's request
goes out as soon as it did, so the network works while the caller sends what it got.

With ``isolation.level=read_committed`` the broker answers up to the last stable offset and lists the
aborted transactions among what it sent; ``committed`` then tells, from batch headers, which batches a
read_committed reader skips (``headwater.kafka.aborted``).
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any, NamedTuple

from aiokafka import TopicPartition
from aiokafka import errors as kafka_errors
from aiokafka.protocol.fetch import FetchRequest

from headwater.kafka.aborted import AbortedTransactions
from headwater.kafka.records import BatchHeader

__all__ = ["READ_COMMITTED", "READ_UNCOMMITTED", "BatchFetcher", "Fetched", "checked_isolation", "isolation_level"]

log = logging.getLogger(__name__)

_OFFSET_OUT_OF_RANGE = 1
# Errors after which the partition's leader is looked up again and the fetch retried.
_RETRY_AFTER_METADATA = {3, 5, 6, 9, 74, 75, 76}  # unknown partition, leader not available, not leader, ...
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
ISOLATION_LEVELS = {"read_uncommitted": READ_UNCOMMITTED, "read_committed": READ_COMMITTED}


def checked_isolation(value: str) -> str:
    """An ``isolation.level`` value, checked (a ValueError names the key and the value)."""
    name = str(value).strip().lower()
    if name not in ISOLATION_LEVELS:
        raise ValueError(f"isolation.level must be read_uncommitted or read_committed, not {name!r}")
    return name


def isolation_level(settings: Mapping[str, str]) -> int:
    """The Fetch isolation level of consumer settings' ``isolation.level`` (Kafka's default read_uncommitted)."""
    return ISOLATION_LEVELS[checked_isolation(settings.get("isolation.level", "read_uncommitted"))]


class Fetched(NamedTuple):
    """One partition's answer: its record batches as sent, and (read_committed) its aborted transactions."""

    data: bytes
    aborted: AbortedTransactions | None

    def skip(self, header: BatchHeader, pos: int) -> bool:
        """Whether the batch at ``pos`` is a control batch or (read_committed) one of an aborted transaction."""
        return self.aborted.skip(header, self.data, pos) if self.aborted is not None else header.is_control


class BatchFetcher:
    def __init__(self, consumer: Any, positions: dict[TopicPartition, int], *, max_wait_ms: int = 500,
                 max_bytes: int = 64 << 20, partition_max_bytes: int = 8 << 20,
                 isolation: int = READ_UNCOMMITTED) -> None:
        self.consumer = consumer
        self.client = consumer._client
        self.positions = dict(positions)
        self.highwater: dict[TopicPartition, int] = {}
        self.max_wait_ms, self.max_bytes, self.partition_max_bytes = max_wait_ms, max_bytes, partition_max_bytes
        self.isolation = isolation
        self._next: asyncio.Task[dict[TopicPartition, Fetched]] | None = None
        for tp in self.positions:
            self.client.add_topic(tp.topic)

    def advance(self, tp: TopicPartition, offset: int) -> None:
        """The caller took everything below ``offset``: fetch from there next."""
        self.positions[tp] = offset

    async def fetch(self) -> dict[TopicPartition, Fetched]:
        """The next round's record bytes per partition (waits at most about ``max_wait_ms`` for some)."""
        task, self._next = self._next, None
        return await (task if task is not None else self._round())

    def prefetch(self) -> None:
        """Send the next round's requests now (call once the positions are advanced)."""
        if self._next is None:
            self._next = asyncio.create_task(self._round(), name="batch-fetch")

    async def close(self) -> None:
        task, self._next = self._next, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _round(self) -> dict[TopicPartition, Fetched]:
        by_node: dict[int, list[TopicPartition]] = defaultdict(list)
        unknown = False
        for tp in self.positions:
            node = self.client.cluster.leader_for_partition(tp)
            if node is None or node == -1:
                unknown = True
            else:
                by_node[node].append(tp)
        if unknown:
            await self.client.force_metadata_update()
        if not by_node:
            await asyncio.sleep(self.max_wait_ms / 1000)
            return {}
        out: dict[TopicPartition, Fetched] = {}
        for part in await asyncio.gather(*(self._fetch_from(node, tps) for node, tps in by_node.items())):
            out.update(part)
        return out

    async def _fetch_from(self, node: int, tps: list[TopicPartition]) -> dict[TopicPartition, Fetched]:
        by_topic: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
        asked = {}
        for tp in tps:
            asked[tp] = self.positions[tp]
            by_topic[tp.topic].append((tp.partition, asked[tp], self.partition_max_bytes))
        request = FetchRequest(self.max_wait_ms, 1, self.max_bytes, self.isolation, list(by_topic.items()))
        try:
            response = await self.client.send(node, request)
        except kafka_errors.KafkaError as exc:
            log.warning("fetch from node %s failed: %s; retrying", node, exc)
            await asyncio.sleep(0.2)
            await self.client.force_metadata_update()
            return {}
        out: dict[TopicPartition, Fetched] = {}
        reset: list[TopicPartition] = []
        refresh = False
        for topic, partitions in response.topics:
            for partition, error_code, highwater, *rest in partitions:
                tp = TopicPartition(topic, partition)
                if self.positions.get(tp) != asked.get(tp):
                    continue  # moved (or dropped) while the request was out
                if error_code == 0:
                    self.highwater[tp] = highwater
                    data = rest[-1]
                    if data:
                        out[tp] = Fetched(data, AbortedTransactions(_aborted(response, rest))
                                          if self.isolation == READ_COMMITTED else None)
                elif error_code == _OFFSET_OUT_OF_RANGE:
                    reset.append(tp)
                elif error_code in _RETRY_AFTER_METADATA:
                    refresh = True
                else:
                    raise kafka_errors.for_code(error_code)(f"fetching {tp} at offset {asked[tp]}")
        if reset:
            # auto.offset.reset=earliest, as MM2's consumers: records removed by retention cannot be copied
            earliest = await self.consumer.beginning_offsets(reset)
            for tp in reset:
                log.warning("offset %d of %s is out of range; resuming at its earliest offset %d",
                            self.positions[tp], tp, earliest[tp])
                self.positions[tp] = earliest[tp]
        if refresh:
            await self.client.force_metadata_update()
        return out


def _aborted(response: Any, rest: list[Any]) -> list[tuple[int, int]] | None:
    """A Fetch partition answer's aborted transactions (v4+): before the records, and before the preferred
    read replica from v11 on."""
    version = type(response).API_VERSION
    if version < 4:
        return None
    return rest[-3] if version >= 11 else rest[-2]
