"""The group consumer as a sink task sees it: Connect's ``TopicPartition`` only, rebalances as events.

aiokafka calls a rebalance listener from its coordinator task, in the middle of whatever the sink
task's loop is doing. ``SinkConsumer`` turns each callback into a ``PartitionsRevoked`` or
``PartitionsAssigned`` event for the task loop and holds the rebalance until the loop handled it
(as Kafka's consumer runs the listener inside ``poll``, on the task's thread): ``fetch`` returns
early when one arrives, and the loop takes them with ``take_events`` at a point where no records
are being delivered. While nobody serves events (``serving`` False: before the loop starts, once
it ended) the callbacks run the handler themselves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
from aiokafka import TopicPartition as KafkaTP
from aiokafka.errors import CommitFailedError
from aiokafka.structs import OffsetAndMetadata

from ..api import ConnectException, TopicPartition
from .fetch import RecordFetcher

__all__ = ["CommitRefused", "ConsumedRecord", "PartitionsAssigned", "PartitionsRevoked", "RebalanceEvent",
           "SinkConsumer"]

log = logging.getLogger(__name__)


class ConsumedRecord(Protocol):
    """A fetched record as aiokafka gives it (its own record objects; see ``RecordFetcher``)."""

    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def timestamp_type(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Iterable[tuple[str, bytes | None]] | None: ...


Fetched = dict[TopicPartition, list[ConsumedRecord]]


@dataclass
class PartitionsRevoked:
    """These partitions are being taken away: commit and close them before the rebalance goes on."""

    partitions: list[TopicPartition]
    done: asyncio.Future[None] | None = field(default=None, compare=False)


@dataclass
class PartitionsAssigned:
    """These partitions were assigned: open them before their records are delivered."""

    partitions: list[TopicPartition]
    done: asyncio.Future[None] | None = field(default=None, compare=False)


RebalanceEvent = PartitionsRevoked | PartitionsAssigned
EventHandler = Callable[[RebalanceEvent], Awaitable[None]]


class CommitRefused(ConnectException):
    """The group would not take an offset commit because it is rebalancing; ``__cause__`` says why."""


def to_kafka(tp: TopicPartition) -> KafkaTP:
    return KafkaTP(tp.topic, tp.partition)


def to_connect(tp: KafkaTP) -> TopicPartition:
    return TopicPartition(tp.topic, tp.partition)


class SinkConsumer:
    """An AIOKafkaConsumer in a group, speaking Connect's TopicPartition."""

    def __init__(self, consumer: AIOKafkaConsumer, handler: EventHandler | None = None) -> None:
        self.consumer = consumer
        self.handler = handler
        self.serving = False  # a task loop takes the events (else the callbacks run the handler)
        self.pause_assigned: Callable[[], bool] = lambda: False  # pause partitions as they are assigned
        self.events: list[RebalanceEvent] = []  # waiting for the loop, oldest first (see take_events)
        self._arrived: asyncio.Future[None] | None = None
        self._fetcher: RecordFetcher | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._fetcher = RecordFetcher(self.consumer)

    async def stop(self) -> None:
        await self.consumer.stop()

    def subscribe(self, topics: list[str] | None = None, pattern: str | None = None) -> None:
        listener = _Listener(self)
        if pattern is not None:
            self.consumer.subscribe(pattern=pattern, listener=listener)
        else:
            self.consumer.subscribe(topics=topics, listener=listener)

    # -- rebalance events ------------------------------------------------------------------------

    async def _hand_over(self, event: RebalanceEvent) -> None:
        if not self.serving or self.handler is None:
            if self.handler is not None:
                await self.handler(event)
            return
        event.done = asyncio.get_running_loop().create_future()
        self.events.append(event)
        if self._arrived is not None and not self._arrived.done():
            self._arrived.set_result(None)
        await event.done

    def take_events(self) -> list[RebalanceEvent]:
        """The rebalance events not yet handled, oldest first; the caller handles each and then calls
        ``handled`` on it, which lets the rebalance go on."""
        events, self.events = self.events, []
        return events

    @staticmethod
    def handled(event: RebalanceEvent) -> None:
        if event.done is not None and not event.done.done():
            event.done.set_result(None)

    # -- records ---------------------------------------------------------------------------------

    async def fetch(self, timeout_ms: int, max_records: int) -> Fetched:
        """Records by partition, waiting up to ``timeout_ms`` for some; nothing as soon as a rebalance
        event waits for the loop (aiokafka's fetch would wait for the rebalance, which waits for it)."""
        fetcher = self._fetcher
        assert fetcher is not None, "fetch before start"
        if self.events:
            return {}
        if not self._rebalancing():
            # records already fetched come back without waiting: no race to set up (the usual case while
            # the task keeps up with a busy topic)
            ready = await fetcher.getmany(0, max_records)
            if ready or not timeout_ms:
                return {to_connect(tp): records for tp, records in ready.items()}
        fetching = asyncio.ensure_future(fetcher.getmany(timeout_ms, max_records))
        arrived = self._arrived = asyncio.get_running_loop().create_future()
        try:
            await asyncio.wait((fetching, arrived), return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._arrived = None
            arrived.cancel()
            if not fetching.done():
                fetching.cancel()
                await asyncio.gather(fetching, return_exceptions=True)
        if fetching.cancelled():
            return {}
        return {to_connect(tp): records for tp, records in fetching.result().items()}

    def _rebalancing(self) -> bool:
        """Whether aiokafka is between a revocation and the next assignment (a fetch then waits for the
        assignment); True when its internals are not as expected, so that a fetch is always raced."""
        subscription = getattr(self.consumer, "_subscription", None)
        return getattr(subscription, "reassignment_in_progress", True) is not False

    def assignment(self) -> set[TopicPartition]:
        return {to_connect(tp) for tp in self.consumer.assignment()}

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        self.consumer.pause(*[to_kafka(tp) for tp in partitions])

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        self.consumer.resume(*[to_kafka(tp) for tp in partitions])

    def pause_all(self) -> None:
        self.consumer.pause(*self.consumer.assignment())

    def resume_all(self) -> None:
        self.consumer.resume(*self.consumer.assignment())

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.consumer.seek(to_kafka(tp), offset)

    def highwater(self, tp: TopicPartition) -> int | None:
        end: int | None = self.consumer.highwater(to_kafka(tp))
        return end

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit to the group; CommitRefused when the group is rebalancing."""
        try:
            await self.consumer.commit({to_kafka(tp): OffsetAndMetadata(o, "") for tp, o in offsets.items()})
        except CommitFailedError as exc:
            raise CommitRefused(f"offset commit refused: {exc}") from (exc.__cause__ or exc)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, owner: SinkConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: set[KafkaTP]) -> None:
        if revoked:
            await self.owner._hand_over(PartitionsRevoked([to_connect(tp) for tp in revoked]))

    async def on_partitions_assigned(self, assigned: set[KafkaTP]) -> None:
        if assigned:
            if self.owner.pause_assigned():
                self.owner.consumer.pause(*assigned)
            await self.owner._hand_over(PartitionsAssigned([to_connect(tp) for tp in assigned]))
