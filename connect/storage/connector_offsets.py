"""A connector's own offsets topic (``offsets.storage.topic`` in its config, KIP-618) over the worker's.

Kafka's ConnectorOffsetBackingStore: offsets are read from both topics, the connector's own winning (the
worker's is the fallback for source partitions the connector's topic does not hold yet, e.g. offsets stored
before the connector had a topic of its own); they are written to the connector's topic, and once that write
succeeded, to the worker's as well, best effort (so tools reading the worker's topic keep up).
"""

from __future__ import annotations

import logging
from typing import Any

from .offsets import OffsetStore, offset_key

__all__ = ["ConnectorOffsetStore"]

log = logging.getLogger(__name__)


class ConnectorOffsetStore(OffsetStore):
    """``own`` (the connector's topic; started and stopped with this store) over ``worker`` (the worker's
    store, which its herder runs)."""

    def __init__(self, own: OffsetStore, worker: OffsetStore) -> None:
        super().__init__()
        self.own, self.worker = own, worker
        self.data = own.data  # what this store holds of its own; ``get`` falls back on the worker's

    async def start(self) -> None:
        await self.own.start()

    async def stop(self) -> None:
        await self.own.stop()

    def get(self, connector: str, partition: dict[str, Any]) -> dict[str, Any] | None:
        key = offset_key(connector, partition)
        if key in self.own.data:
            return self.own.data[key]
        return self.worker.data.get(key)

    def connector_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        merged = {offset_key(connector, p): (p, o) for p, o in self.worker.connector_offsets(connector)}
        merged.update({offset_key(connector, p): (p, o) for p, o in self.own.connector_offsets(connector)})
        return list(merged.values())

    def remember(self, offsets: dict[str, dict[str, Any] | None]) -> None:
        self.own.remember(offsets)

    async def set(self, connector: str, offsets: dict[str, dict[str, Any] | None]) -> None:
        await self.own.set(connector, offsets)
        await self.copy_to_worker(connector, offsets)

    async def copy_to_worker(self, connector: str, offsets: dict[str, dict[str, Any] | None]) -> None:
        """The secondary write: offsets the connector's topic holds now, to the worker's topic too. A failure
        is logged, not raised: the connector's topic is the one its tasks resume from."""
        try:
            await self.worker.set(connector, offsets)
        except Exception as exc:
            log.warning("offsets of %s stored in its own offsets topic could not be copied to the worker's: %r",
                        connector, exc)

    async def _persist(self, offsets: dict[str, dict[str, Any] | None]) -> None:
        raise AssertionError("set() writes through the connector's and the worker's stores")
