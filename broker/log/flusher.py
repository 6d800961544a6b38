"""fsync of a partition log off the event loop, shared by everyone waiting for it."""

from __future__ import annotations

import asyncio
import time

from .partition_log import PartitionLog

__all__ = ["PartitionFlusher"]


class PartitionFlusher:
    """fsyncs one partition log in a worker thread; concurrent waiters share one fsync."""

    def __init__(self, plog: PartitionLog) -> None:
        self.plog = plog
        self.flushed_offset = plog.log_end_offset
        self.last_flush = time.monotonic()
        self._inflight: asyncio.Future[None] | None = None

    async def flush_to(self, offset: int) -> None:
        """Return once every record below ``offset`` is on disk."""
        while self.flushed_offset < offset:
            if self._inflight is None:
                self._inflight = asyncio.ensure_future(self._flush())
            await asyncio.shield(self._inflight)

    async def _flush(self) -> None:
        target = self.plog.log_end_offset
        try:
            await asyncio.to_thread(self.plog.flush)
            self.flushed_offset = max(self.flushed_offset, target)
            self.last_flush = time.monotonic()
        finally:
            self._inflight = None
