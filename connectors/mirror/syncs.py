"""Writing offset syncs: where each mirrored record landed, at every point the mapping needs one.

MM2 writes a sync when the downstream offset drifted ``offset.lag.max`` past the last one, so a group
translated between two syncs may re-read up to that many records after a failover. Here a run of
records whose upstream and downstream offsets both advance by one needs no sync inside it: syncs are
written for both ends of every run (a run ends where either side jumps: a compacted gap upstream, a
re-sent or foreign record downstream) and for the last record of every acknowledged batch. Two syncs
in a row then either lie on one run (their offsets moved in step) or are the end of one run and the
start of the next, which is what ``OffsetSyncStore`` needs to translate to the record.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from headwater.kafka.mirror import OffsetSync

__all__ = ["OffsetSyncWriter"]

log = logging.getLogger(__name__)


class OffsetSyncWriter:
    """Offset syncs of one task's partitions into ``mm2-offset-syncs.<target>.internal``."""

    def __init__(self, producer: Any, topic: str) -> None:
        self.producer, self.topic = producer, topic
        self._last: dict[tuple[str, int], tuple[int, int]] = {}  # last acknowledged (upstream, downstream)
        self._pending: dict[tuple[str, int], tuple[int, int]] = {}  # the last record acknowledged, to sync
        self._synced: dict[tuple[str, int], tuple[int, int]] = {}  # the last sync written
        self._queue: list[OffsetSync] = []
        self.written = 0
        self.failed = 0

    def _emit(self, tp: tuple[str, int], upstream: int, downstream: int) -> None:
        self._queue.append(OffsetSync(tp[0], tp[1], upstream, downstream))
        self._synced[tp] = (upstream, downstream)

    async def send(self) -> None:
        """Hand the syncs written so far to the producer (delivery is not waited for: a lost sync makes
        translation coarser, an older sync being used, never wrong)."""
        queue, self._queue = self._queue, []
        for sync in queue:
            fut = await self.producer.send(self.topic, key=sync.key(), value=sync.value(), partition=0)
            fut.add_done_callback(self._delivered)
            self.written += 1

    def _delivered(self, fut: Any) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            self.failed += 1
            log.warning("an offset sync to %s was not delivered: %s", self.topic, fut.exception())

    def _starts_run(self, tp: tuple[str, int], before: tuple[int, int] | None, upstream: int, downstream: int) -> None:
        """A run starts here: sync the end of the one before (when it has none) and this record."""
        if before is not None and self._synced.get(tp) != before:
            self._emit(tp, *before)
        self._emit(tp, upstream, downstream)

    def record(self, tp: tuple[str, int], upstream: int, downstream: int) -> None:
        """One acknowledged record: synced when it starts a run; it is the pending end until the next one."""
        last = self._last.get(tp)
        self._last[tp] = (upstream, downstream)
        if last is None or upstream != last[0] + 1 or downstream != last[1] + 1:
            self._starts_run(tp, last, upstream, downstream)
        self._pending[tp] = (upstream, downstream)

    def run(self, tp: tuple[str, int], upstream: Sequence[int], start: int, end: int, downstream: int) -> None:
        """Records ``upstream[start:end]`` landed at ``downstream``, ``downstream + 1``, ... in one Kafka batch."""
        if start >= end:
            return
        self.record(tp, upstream[start], downstream)
        last = end - 1
        if last > start:
            if upstream[last] - upstream[start] != last - start:  # a gap upstream inside the run
                previous = upstream[start]
                for i in range(start + 1, end):
                    offset = upstream[i]
                    if offset != previous + 1:
                        self._starts_run(tp, (previous, downstream + i - 1 - start), offset, downstream + i - start)
                    previous = offset
            self._last[tp] = self._pending[tp] = (upstream[last], downstream + last - start)

    def flush(self) -> None:
        """Write the pending end of every run (the last record acknowledged), unless it has its sync."""
        for tp, end in self._pending.items():
            if self._synced.get(tp) != end:
                self._emit(tp, *end)
        self._pending.clear()
