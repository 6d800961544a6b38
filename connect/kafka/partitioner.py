"""Kafka's default key partitioner, as Kafka's Java producer computes it."""

from __future__ import annotations

from aiokafka.partitioner import murmur2 as _murmur2

__all__ = ["murmur2", "partition_for_key"]


def murmur2(key: bytes) -> int:
    """Kafka's murmur2 hash of ``key`` as a signed 32-bit int, as Java's ``Utils.murmur2`` returns it
    (aiokafka gives the same bits unsigned)."""
    h = int(_murmur2(key)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, count: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key among ``count``."""
    return (murmur2(key) & 0x7FFFFFFF) % count
