"""Writing offset syncs: where each mirrored record landed, at every point the mapping needs one.

MM2 writes a sync when the downstream offset drifted ``offset.lag.max`` past the last one, so a group
translated between two syncs may re-read up to that many records after a failover. Here a run of
records whose upstream and downstream offsets both advance by one needs no sync inside it: a sync is
written where a run starts (the first record, and wherever either side jumps: a compacted gap
upstream, a re-sent record downstream) and for the last record of every acknowledged batch. Between
two syncs the offsets then move in step exactly when no run started in between, which is what
``OffsetSyncStore`` checks to translate to the record.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.kafka.mirror import OffsetSync

__all__ = ["OffsetSyncWriter"]

log = logging.getLogger(__name__)


class OffsetSyncWriter:
    """Offset syncs of one task's partitions into ``mm2-offset-syncs.<target>.internal``."""

    def __init__(self, producer: Any, topic: str) -> None:
        self.producer, self.topic = producer, topic
        self._last: dict[tuple[str, int], tuple[int, int]] = {}  # last acknowledged (upstream, downstream)
        self._pending: dict[tuple[str, int], tuple[int, int]] = {}  # the last record, when not synced yet
        self._queue: list[OffsetSync] = []
        self.written = 0
        self.failed = 0

    def _emit(self, tp: tuple[str, int], upstream: int, downstream: int) -> None:
        self._queue.append(OffsetSync(tp[0], tp[1], upstream, downstream))

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

    def record(self, tp: tuple[str, int], upstream: int, downstream: int) -> None:
        """One acknowledged record: a sync when it starts a run, else it becomes the pending end."""
        last = self._last.get(tp)
        self._last[tp] = (upstream, downstream)
        if last is None or upstream != last[0] + 1 or downstream != last[1] + 1:
            self._emit(tp, upstream, downstream)
            self._pending.pop(tp, None)
        else:
            self._pending[tp] = (upstream, downstream)

    def run(self, tp: tuple[str, int], upstream: list[int], start: int, end: int, downstream: int) -> None:
        """Records ``upstream[start:end]`` landed at ``downstream``, ``downstream + 1``, ... in one Kafka batch."""
        if start >= end:
            return
        self.record(tp, upstream[start], downstream)
        if upstream[end - 1] - upstream[start] != end - 1 - start:  # a gap upstream inside the run
            previous = upstream[start]
            for i in range(start + 1, end - 1):
                offset = upstream[i]
                if offset != previous + 1:
                    self._emit(tp, offset, downstream + i - start)
                previous = offset
        if end - 1 > start:
            self.record(tp, upstream[end - 1], downstream + end - 1 - start)

    def flush(self) -> None:
        """Write the pending end of every run: the last record of what was acknowledged."""
        for tp, (upstream, downstream) in self._pending.items():
            self._emit(tp, upstream, downstream)
        self._pending.clear()

    def forget(self, tp: tuple[str, int]) -> None:
        self._last.pop(tp, None)
        self._pending.pop(tp, None)
