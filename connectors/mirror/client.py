"""RemoteClusterUtils: what a cluster's MirrorMaker topics say, for people and for consumer failover.

As Kafka's ``RemoteClusterUtils`` / ``MirrorClient``: ``translate_offsets`` reads
``<source>.checkpoints.internal`` on the cluster a group moves to, from the beginning, and keeps the
last checkpoint of each partition for the group: the offsets it may resume from there. The properties
are that cluster's client settings (``bootstrap.servers``, ...), plus ``replication.policy.class`` and
``replication.policy.separator`` when they are not the defaults.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from aiokafka import TopicPartition

from headwater.connect.kafka import clients
from headwater.kafka.mirror import Checkpoint, Heartbeat

from .policy import ReplicationPolicy, replication_policy

__all__ = ["RemoteClusterUtils"]


def _policy(props: dict[str, Any]) -> ReplicationPolicy:
    return replication_policy(str(props.get("replication.policy.class", "DefaultReplicationPolicy")),
                              str(props.get("replication.policy.separator", ".")))


async def _read_topic(props: dict[str, Any], topic: str, timeout: float) -> list[tuple[bytes, bytes]]:
    """Every record (key, value) of a single-partition topic, from the beginning to the end seen at start."""
    consumer = clients.consumer(str(props["bootstrap.servers"]), {k: str(v) for k, v in props.items()},
                                enable_auto_commit=False, group_id=None, auto_offset_reset="earliest")
    try:
        await asyncio.wait_for(consumer.start(), timeout)
        tp = TopicPartition(topic, 0)
        if topic not in await consumer.topics():
            return []
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        out: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while await consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} was not read to its end within {timeout:.0f} s")
            for records in (await consumer.getmany(tp, timeout_ms=500)).values():
                out.extend((r.key, r.value) for r in records if r.offset < end)
        return out
    finally:
        await consumer.stop()


class RemoteClusterUtils:
    """Kafka's RemoteClusterUtils, as static methods (``_async`` twins for asyncio callers)."""

    @staticmethod
    async def translate_offsets_async(props: dict[str, Any], remote_cluster_alias: str, group: str,
                                      timeout: float = 30.0) -> dict[TopicPartition, int]:
        policy = _policy(props)
        found: dict[TopicPartition, int] = {}
        for key, value in await _read_topic(props, policy.checkpoints_topic(remote_cluster_alias), timeout):
            if key is None or value is None:
                continue
            checkpoint = Checkpoint.decode(key, value)
            if checkpoint.group == group:
                found[TopicPartition(checkpoint.topic, checkpoint.partition)] = checkpoint.downstream_offset
        return found

    @staticmethod
    def translate_offsets(props: dict[str, Any], remote_cluster_alias: str, group: str,
                          timeout: float = 30.0) -> dict[TopicPartition, int]:
        """The offsets ``group`` may resume from on this cluster, per (renamed) topic-partition, from the
        checkpoints mirrored from ``remote_cluster_alias``."""
        return asyncio.run(RemoteClusterUtils.translate_offsets_async(props, remote_cluster_alias, group, timeout))

    @staticmethod
    async def heartbeats_async(props: dict[str, Any], timeout: float = 30.0) -> list[tuple[str, Heartbeat]]:
        """Every heartbeat in this cluster's heartbeats topics (``heartbeats``, ``A.heartbeats``, ...)."""
        policy = _policy(props)
        admin = clients.admin_client(str(props["bootstrap.servers"]), {k: str(v) for k, v in props.items()})
        await admin.start()
        try:
            topics = [t for t in await admin.list_topics() if policy.is_heartbeats_topic(t)]
        finally:
            await admin.close()
        out = []
        for topic in sorted(topics):
            for key, value in await _read_topic(props, topic, timeout):
                if key is not None and value is not None:
                    out.append((topic, Heartbeat.decode(key, value)))
        return out

    @staticmethod
    def upstream_clusters(props: dict[str, Any], timeout: float = 30.0) -> set[str]:
        """Aliases of the clusters whose heartbeats reach this one, directly or through others."""
        beats = asyncio.run(RemoteClusterUtils.heartbeats_async(props, timeout))
        return {beat.source_cluster_alias for _, beat in beats}
