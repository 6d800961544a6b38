"""Typed reads of a confluent-kafka ``Message``: its stubs let every field be None (an error event has
no partition or offset), while a consumed record has them all."""

from __future__ import annotations

from typing import cast

from confluent_kafka import Message


def position(m: Message) -> tuple[int, int]:
    """The record's partition and offset."""
    partition, offset = m.partition(), m.offset()
    assert partition is not None and offset is not None, f"not a record: {m.error()}"
    return partition, offset


def headers_of(m: Message) -> tuple[tuple[str, bytes], ...]:
    """The record's headers as the consumer returns them, (key, value) pairs in order."""
    return tuple(cast("list[tuple[str, bytes]]", m.headers() or ()))
