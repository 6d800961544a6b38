"""A sink task's delivery path, chosen once when the task started (``choose_delivery_path``).

- ``RecordDelivery``: converters -> transforms -> ``put``, record by record (always possible);
- ``BatchDelivery``: one ``put_batch`` per partition, its keys and values converted as lists (no
  transforms); partitions whose records need the record path go through ``put``, together;
- ``EncodedDelivery``: one ``put_encoded`` per partition, the records in the converters' wire form
  (``decode_with`` said yes; no transforms); a partition with headers, or one the task hands back,
  goes through ``put_batch`` (when the task has one) or ``put``.

Each path puts through its ``WorkerSinkTask`` (``put_with``: retried after a RetriableException),
counts the records it delivers once, and moves the partitions' current offsets past them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ..api import EncodedSinkBatch, Header, SinkBatch, SinkRecord, SinkTask, TopicPartition
from ..kafka.sink_consumer import ConsumedRecord, Fetched
from .errors import SKIP, RawRecord, Stage

if TYPE_CHECKING:
    from .sink_task import WorkerSinkTask

__all__ = ["BatchDelivery", "DeliveryPath", "EncodedDelivery", "RecordDelivery", "choose_delivery_path"]

log = logging.getLogger(__name__)

_TS_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class DeliveryPath(Protocol):
    async def deliver(self, fetched: Fetched) -> None:
        """Deliver the fetched records (of opened partitions) to the task."""


def overrides(task: SinkTask, method: str) -> bool:
    """Whether the task's class has its own ``method`` (the optional hooks' defaults do nothing)."""
    return getattr(type(task), method) is not getattr(SinkTask, method)


def choose_delivery_path(owner: WorkerSinkTask) -> DeliveryPath:
    """The fastest path the task and its connector allow; asks ``decode_with`` only when the task has
    ``put_batch`` or ``put_encoded`` and the connector no transforms (they need record objects)."""
    task = owner.task
    put_batch = overrides(task, "put_batch")
    if owner.chain or not (put_batch or overrides(task, "put_encoded")):
        return RecordDelivery(owner)
    if task.decode_with(owner.key_converter, owner.value_converter):
        return EncodedDelivery(owner, put_batch=put_batch)
    # without put_batch every partition would take the record path: take it at once
    return BatchDelivery(owner) if put_batch else RecordDelivery(owner)


class RecordDelivery:
    """Each record through the converters and transforms (each stage through the error handler), one
    ``put`` for all."""

    def __init__(self, owner: WorkerSinkTask) -> None:
        self.owner = owner

    async def deliver(self, fetched: Fetched) -> None:
        owner = self.owner
        records, offsets = await self.convert(fetched)
        if records:
            await owner.put_with(owner.task.put, records, len(records))
        owner.current.update(offsets)  # only now: a stop or a failure before put commits none of them

    async def convert(self, fetched: Fetched) -> tuple[list[SinkRecord], dict[TopicPartition, int]]:
        """The fetched records as SinkRecords (each stage through the error handler), and the offset
        each partition reaches once they are delivered."""
        owner = self.owner
        out: list[SinkRecord] = []
        offsets: dict[TopicPartition, int] = {}
        append = out.append
        kc, vc, hc = owner.key_converter, owner.value_converter, owner.header_converter
        key_of, value_of, headers_of = kc.to_connect_data, vc.to_connect_data, self.headers_of
        attempt = owner.errors.attempt
        chain = owner.chain if owner.chain else None  # tested once, not per record
        for tp, messages in fetched.items():
            if not messages:
                continue
            topic, partition = tp.topic, tp.partition
            owner.topics.add(topic)
            for m in messages:
                raw = partial(_raw, tp, m)
                key_sv = await attempt(Stage.KEY_CONVERTER, kc, key_of, topic, m.key, raw=raw)
                if key_sv is SKIP:
                    continue
                value_sv = await attempt(Stage.VALUE_CONVERTER, vc, value_of, topic, m.value, raw=raw)
                if value_sv is SKIP:
                    continue
                headers: list[Header] = []
                if m.headers:
                    converted = await attempt(Stage.HEADER_CONVERTER, hc, headers_of, topic, m.headers, raw=raw)
                    if converted is SKIP:
                        continue
                    headers = converted
                offset = m.offset
                record: SinkRecord | None = SinkRecord(
                    topic, value_sv.value, key_sv.value, partition, key_sv.schema, value_sv.schema, m.timestamp,
                    headers, offset,
                    "CreateTime" if m.timestamp_type == 0 else _TS_TYPES.get(m.timestamp_type, "CreateTime"),
                    topic, partition, offset)
                if chain is not None:
                    transformed = await attempt(Stage.TRANSFORMATION, chain, chain.apply, record, raw=raw)
                    if transformed is SKIP:
                        continue
                    record = transformed
                if record is None:
                    continue
                append(record)
            offsets[tp] = messages[-1].offset + 1
        return out, offsets

    def headers_of(self, topic: str, headers: Iterable[tuple[str, bytes | None]]) -> list[Header]:
        out = []
        convert = self.owner.header_converter.to_connect_header
        for key, value in headers:
            sv = convert(topic, key, value)
            out.append(Header(key, sv.value, sv.schema))
        return out


class BatchDelivery:
    """One ``put_batch`` per partition; partitions that need the record path go through one ``put``
    after them."""

    def __init__(self, owner: WorkerSinkTask) -> None:
        self.owner = owner
        self.fallback = RecordDelivery(owner)

    async def deliver(self, fetched: Fetched) -> None:
        leftovers: Fetched = {}
        for tp, messages in fetched.items():
            if messages and not await self.put_partition(tp, messages):
                leftovers[tp] = messages
        if leftovers:
            await self.fallback.deliver(leftovers)

    async def put_partition(self, tp: TopicPartition, messages: list[ConsumedRecord]) -> bool:
        """The partition's records as columns through ``put_batch``; False (nothing delivered) when they
        need the record path: headers, keys or values of differing schemas, or a record that does not
        convert (the record path finds it and applies errors.tolerance)."""
        if any([m.headers for m in messages]):
            return False
        owner = self.owner
        topic = tp.topic
        try:
            keys = owner.key_converter.to_connect_values(topic, [m.key for m in messages])
            values = owner.value_converter.to_connect_values(topic, [m.value for m in messages])
        except Exception:
            log.debug("task %s: %s-%d goes through the record path: a record does not convert as a batch", owner.id,
                      topic, tp.partition, exc_info=True)
            return False
        if keys is None or values is None:
            return False
        batch = SinkBatch(topic, tp.partition, keys.schema, keys.value, values.schema, values.value, messages)
        owner.topics.add(topic)
        await owner.put_with(owner.task.put_batch, batch, len(messages))
        owner.current[tp] = messages[-1].offset + 1
        return True


class EncodedDelivery(BatchDelivery):
    """One ``put_encoded`` per partition without headers; a partition the task hands back goes through
    ``put_batch`` (when the task has its own) or, with the others left over, ``put``."""

    def __init__(self, owner: WorkerSinkTask, *, put_batch: bool) -> None:
        super().__init__(owner)
        self.put_batch = put_batch  # the task has put_batch of its own

    async def put_partition(self, tp: TopicPartition, messages: list[ConsumedRecord]) -> bool:
        owner = self.owner
        if not any([m.headers for m in messages]):
            # counted only when taken: a batch handed back is counted by the path that delivers it
            taken = await owner.put_with(owner.task.put_encoded, EncodedSinkBatch(tp.topic, tp.partition, messages), 0)
            if taken:
                owner.records_put += len(messages)
                owner.topics.add(tp.topic)
                owner.current[tp] = messages[-1].offset + 1
                return True
        return self.put_batch and await super().put_partition(tp, messages)


def _raw(tp: TopicPartition, m: ConsumedRecord) -> RawRecord:
    return RawRecord(tp.topic, tp.partition, m.offset, m.timestamp, m.key, m.value, list(m.headers or []))
