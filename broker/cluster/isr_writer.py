"""The leader's ISR changes written to ZooKeeper, as Kafka's leaders did in ZooKeeper mode: the partition's
state znode set conditionally on the version the leader last read (a controller's write in between wins)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import TYPE_CHECKING

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError

from ..replication.state import PartitionState
from .znodes import state_path

if TYPE_CHECKING:
    from .topic_sync import TopicSync

__all__ = ["ZkIsrWriter"]


class ZkIsrWriter:
    """broker/replication/state.py's ``IsrWriter`` on ZooKeeper."""

    def __init__(self, zk: KazooClient, sync: TopicSync) -> None:
        self.zk = zk
        self.sync = sync

    async def write_isr(self, topic: str, index: int, state: PartitionState,
                        isr: tuple[int, ...]) -> PartitionState | None:
        wanted = replace(state, isr=tuple(isr))
        try:
            stat = await asyncio.to_thread(self.zk.set, state_path(topic, index), wanted.to_json(),
                                           state.zk_version)
        except (BadVersionError, NoNodeError):
            return None
        # with the replicas as they are now (a reassignment may have changed them while the write was out)
        meta = self.sync.topics.get(topic)
        replicas = meta.assignment.get(index, state.replicas) if meta is not None else state.replicas
        written = replace(wanted, zk_version=stat.version, replicas=replicas)
        self.sync.record(topic, index, written)
        return written
