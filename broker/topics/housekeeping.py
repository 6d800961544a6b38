"""The broker's log housekeeping on a schedule: flushes (``flush.ms``), producer-state
snapshots, removed segments' files (``file.delete.delay.ms``), retention (``log.retention.*``) and the
log cleaner (``cleanup.policy=compact``).

Each ``run_*`` loop is started and supervised by the server; one round of each can also be
run directly (``clean_logs``, ``apply_retention``), as tests do.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..config.broker_config import BrokerConfig
from ..log import PartitionLog
from ..log.cleaner import CleanerAborted, clean_partition_async
from .cluster import Cluster
from .producer_state import PartitionProducerState

__all__ = ["LogHousekeeping"]

log = logging.getLogger(__name__)

PRODUCER_SNAPSHOT_INTERVAL = 30.0  # seconds; bounds the replay after a crash


class LogHousekeeping:
    def __init__(self, cluster: Cluster, config: BrokerConfig) -> None:
        self.cluster = cluster
        self.config = config

    async def flush_all(self) -> None:
        for topic in list(self.cluster.topics.values()):
            for p in topic.partitions:
                await p.flusher.flush_to(p.log.log_end_offset)

    async def run_flush_scheduler(self) -> None:
        """Flush partitions whose ``flush.ms`` has elapsed (Kafka's log flusher)."""
        interval = self.config.log_flush_scheduler_interval_ms / 1000
        last_snapshot = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            if now - last_snapshot >= PRODUCER_SNAPSHOT_INTERVAL:
                self.cluster.snapshot_producer_state()
                last_snapshot = now
            for topic in list(self.cluster.topics.values()):
                limit = topic.config.flush_ms / 1000
                for p in topic.partitions:
                    flusher = p.flusher
                    if flusher.plog.log_end_offset > flusher.flushed_offset and now - flusher.last_flush >= limit:
                        await flusher.flush_to(flusher.plog.log_end_offset)
                    flusher.plog.delete_due(now)  # segments removed file.delete.delay.ms ago

    async def run_retention(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.apply_retention()

    async def run_cleaner(self) -> None:
        """Kafka's log cleaner: every ``log.cleaner.backoff.ms``, compact the partitions of topics
        whose cleanup.policy includes ``compact`` (log/cleaner.py)."""
        interval = self.config.log_cleaner_backoff_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self.clean_logs()

    async def clean_logs(self) -> int:
        """One cleaner round; returns the number of partitions cleaned. A partition that fails is
        logged and tried again next round; the others carry on."""
        cleaned = 0
        for topic in list(self.cluster.topics.values()):
            if not topic.config.compact:
                continue
            for partition in list(topic.partitions):
                index, plog, state = partition.index, partition.log, partition.producers

                def snapshot(plog: PartitionLog = plog, state: PartitionProducerState = state) -> None:
                    # A pass may remove whole idempotent batches: replay after a crash must start past them.
                    if state.producers:
                        state.snapshot(plog.log_end_offset)

                uncleanable_from = partition.last_stable_offset()
                if partition.replica is not None:
                    # A cluster's replica is cleaned below its high watermark only, as Kafka's (its last stable
                    # offset is bounded by it): records above it may yet be truncated, and cleaning away an
                    # older record of the same key below it would lose a committed one.
                    uncleanable_from = min(uncleanable_from, partition.replica.high_watermark)
                try:
                    result = await clean_partition_async(plog, int(time.time() * 1000), before_pass=snapshot,
                                                         uncleanable_from=uncleanable_from)
                except CleanerAborted:
                    continue  # the topic was deleted or the broker is stopping
                except Exception:
                    log.exception("log cleaner failed on %s-%d; retrying next round", topic.name, index)
                    continue
                if result is not None:
                    cleaned += 1
                    log.info(
                        "cleaned %s-%d up to offset %d: %d segments, %d bytes -> %d segments, %d bytes; "
                        "%d of %d records kept, %d tombstones and %d transaction markers dropped, %.3fs",
                        topic.name, index, result.end_offset, result.segments_before, result.bytes_before,
                        result.segments_after, result.bytes_after, result.records_kept, result.records_read,
                        result.tombstones_dropped, result.markers_dropped, result.seconds,
                    )
        return cleaned

    def apply_retention(self) -> int:
        now_ms = int(time.time() * 1000)
        deleted = 0
        for topic in list(self.cluster.topics.values()):
            if not topic.config.delete:
                continue
            for p in topic.partitions:
                deleted += p.log.apply_retention(now_ms)
        return deleted
