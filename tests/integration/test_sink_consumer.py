"""SinkConsumer (the sink tasks' group consumer) against the real broker: rebalances reach the task loop as
events, and the group's rebalance waits until the loop handled them."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from headwater.connect.api import TopicPartition
from headwater.connect.kafka.sink_consumer import (
    PartitionsAssigned,
    PartitionsRevoked,
    RebalanceEvent,
    SinkConsumer,
)
from headwater.testing import unique


def _consumer(bootstrap: str, group: str) -> AIOKafkaConsumer:
    return AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                            auto_offset_reset="earliest", heartbeat_interval_ms=300, session_timeout_ms=6000)


async def _next_events(consumer: SinkConsumer, deadline_s: float) -> list[RebalanceEvent]:
    """Fetch as a task loop does until rebalance events wait for it."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        await consumer.fetch(500, 100)
        events = consumer.take_events()
        if events:
            return events
    raise AssertionError(f"no rebalance event within {deadline_s} s")


def test_rebalance_waits_for_the_task_loop(broker3) -> None:
    topic, group = unique("sink-consumer"), unique("sink-consumer-group")
    everything = {TopicPartition(topic, p) for p in range(3)}

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker3.bootstrap)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"x", partition=0)  # the topic, with its 3 partitions
        finally:
            await producer.stop()
        inline: list[RebalanceEvent] = []

        async def handle_inline(event: RebalanceEvent) -> None:
            inline.append(event)

        served = SinkConsumer(_consumer(broker3.bootstrap, group), handle_inline)
        served.serving = True
        await served.start()
        other = SinkConsumer(_consumer(broker3.bootstrap, group), handle_inline)  # no loop: handled inline
        try:
            served.subscribe(topics=[topic])
            (assigned,) = await _next_events(served, 30)
            assert isinstance(assigned, PartitionsAssigned) and set(assigned.partitions) == everything
            served.handled(assigned)
            assert inline == []  # the callback handed it over instead of handling it
            fetched = 0
            deadline = time.monotonic() + 30
            while fetched < 1 and time.monotonic() < deadline:  # the one record, so the next fetch waits
                fetched += sum(len(records) for records in (await served.fetch(500, 100)).values())
            assert fetched == 1

            await other.start()
            other.subscribe(topics=[topic])
            # the second member's join makes the group take the partitions back: a fetch that would wait
            # 20 s returns as soon as the revocation waits for the loop
            started = time.monotonic()
            assert await served.fetch(20_000, 100) == {}
            (revoked,) = served.take_events()
            assert time.monotonic() - started < 15
            assert isinstance(revoked, PartitionsRevoked) and set(revoked.partitions) == everything
            # the rebalance is held until the loop says it handled the revocation
            await asyncio.sleep(1.5)
            assert inline == [] and other.assignment() == set()
            served.handled(revoked)
            (reassigned,) = await _next_events(served, 30)
            assert isinstance(reassigned, PartitionsAssigned)
            served.handled(reassigned)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not inline:
                await asyncio.sleep(0.1)
            assert [type(e) for e in inline] == [PartitionsAssigned]
            assert set(reassigned.partitions) | set(inline[0].partitions) == everything
            assert not set(reassigned.partitions) & set(inline[0].partitions)
        finally:
            served.serving = False  # stopping: whatever comes now is handled inline
            await other.stop()
            await served.stop()

    asyncio.run(asyncio.wait_for(go(), 120))
