"""The one adapter over aiokafka: every use of aiokafka's private API goes through this package.

aiokafka's public API (``AIOKafkaProducer``, ``AIOKafkaConsumer``, ``aiokafka.admin``,
``aiokafka.structs``, ``aiokafka.errors``) may be used anywhere in Connect. Its internals may
not: the sink's batch fetcher (``aiokafka.consumer.fetcher``), the producer's record builder
(``aiokafka.producer.message_accumulator``, and ``PrebuiltBatch`` standing in for it), the producer's
batch expiry and abort (``delivery.timeout.ms`` and ``stop_producer`` in ``clients``), the low-level
client with its protocol classes (``aiokafka.client``, ``aiokafka.protocol``: the mirror's raw batch
fetches in ``raw_fetch``, group offset commits in ``admin``) and the key partitioner
(``aiokafka.partitioner``) are reached only from the modules here.

Written for aiokafka 0.13 and 0.14 (``SUPPORTED_AIOKAFKA``; pyproject.toml
pins the same range). ``tests/integration/test_aiokafka_adapter.py`` exercises each private
entry point, so an aiokafka that changes one of them fails a test that names it, not a worker.
"""

from __future__ import annotations

import aiokafka

from .clients import (
    PrebuiltBatch,
    admin_client,
    consumer,
    fill_batch,
    kafka_kwargs,
    prebuilt_batch,
    producer,
    stop_producer,
)
from .fetch import RecordFetcher
from .group import GroupClient
from .partitioner import murmur2

__all__ = [
    "SUPPORTED_AIOKAFKA",
    "GroupClient",
    "PrebuiltBatch",
    "RecordFetcher",
    "admin_client",
    "aiokafka_version",
    "consumer",
    "fill_batch",
    "kafka_kwargs",
    "murmur2",
    "prebuilt_batch",
    "producer",
    "stop_producer",
    "supported",
]

# The half-open range of aiokafka versions this adapter was written for: [low, high).
SUPPORTED_AIOKAFKA = ((0, 13), (0, 15))


def aiokafka_version() -> tuple[int, int]:
    """The installed aiokafka's (major, minor)."""
    major, minor = aiokafka.__version__.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def supported(version: tuple[int, int] | None = None) -> bool:
    low, high = SUPPORTED_AIOKAFKA
    return low <= (version or aiokafka_version()) < high
