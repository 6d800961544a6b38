"""What the source connector does to topics: find the ones to mirror, create them on the target with the
source's partition count and configs, add partitions, keep configs in sync (MirrorSourceConnector's
refresh and sync loops). Also the small admin helpers the other connectors share."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from aiokafka.admin import NewPartitions
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from headwater.connect.api import ConnectException
from headwater.connect.kafka.admin import partition_counts
from headwater.connect.kafka.topics import create_topic, topic_overrides

from .config import Cluster, MirrorSourceConfig
from .filters import NameFilter
from .policy import ReplicationPolicy, is_cycle

__all__ = ["TopicSync", "close_clients", "not_mirrored", "ensure_internal_topic", "partition_counts", "reach"]

log = logging.getLogger(__name__)



async def reach(cluster: Cluster, side: str, timeout_ms: int) -> Any:
    """A started admin client of ``cluster``; a ConnectException naming the cluster when it cannot be reached."""
    admin = cluster.admin(request_timeout_ms=min(timeout_ms, 30000))
    try:
        await asyncio.wait_for(admin.start(), timeout_ms / 1000)
        await asyncio.wait_for(admin.describe_cluster(), timeout_ms / 1000)
    except Exception as exc:
        await close_clients([admin])
        reason = "no answer in time" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
        raise ConnectException(f"could not reach the {side} cluster {cluster.alias!r} at "
                               f"{cluster.bootstrap or '(no bootstrap.servers)'}: {reason}") from exc
    return admin


async def close_clients(clients: list[Any]) -> None:
    """Close admin clients, stop consumers and producers; a failure only logged (and the list emptied)."""
    for client in clients:
        if client is None:
            continue
        try:
            await (client.close() if hasattr(client, "close") else client.stop())
        except Exception:
            log.debug("closing a %s failed", type(client).__name__, exc_info=True)
    clients.clear()


async def ensure_internal_topic(admin: Any, topic: str, replication_factor: int, what: str) -> None:
    """A compacted single-partition topic (offset syncs, checkpoints, heartbeats), created when missing."""
    if await create_topic(admin, topic, 1, replication_factor, {"cleanup.policy": "compact"}):
        log.info("created the %s topic %s", what, topic)


def not_mirrored(policy: ReplicationPolicy, keep: NameFilter, target_alias: str, topic: str) -> str | None:
    """Why MM2's shouldReplicateTopic says no ("internal", "filtered" or "cycle"), or None: mirrored.
    Heartbeats topics pass whatever the filter says."""
    if policy.is_internal_topic(topic):
        return "internal"
    if not (keep(topic) or policy.is_heartbeats_topic(topic)):
        return "filtered"
    if is_cycle(policy, topic, target_alias):
        return "cycle"
    return None


class TopicSync:
    """The source connector's view of both clusters' topics."""

    def __init__(self, config: MirrorSourceConfig, source_admin: Any, target_admin: Any) -> None:
        self.config = config
        self.policy: ReplicationPolicy = config.policy()
        self.filter = config.topic_filter()
        self.config_keep = NameFilter("config.properties.exclude", ".*", "config.properties.exclude",
                                         config.config_properties_exclude)
        self.source_admin, self.target_admin = source_admin, target_admin
        self.partitions: dict[str, int] = {}  # source topic -> partition count, the topics mirrored
        self.skipped: set[str] = set()

    def should_mirror(self, topic: str) -> bool:
        why = not_mirrored(self.policy, self.filter, self.config.target_cluster_alias, topic)
        if why == "cycle" and topic not in self.skipped:
            self.skipped.add(topic)
            target = self.config.target_cluster_alias
            log.info("topic %s is not mirrored into %s: it came from %s (a cycle)", topic, target, target)
        return why is None

    def target_topic(self, topic: str) -> str:
        return self.config.remote_topic(topic)

    async def refresh(self) -> bool:
        """Read the source's topics, create or grow what is missing on the target; True when the set of
        topic-partitions to mirror changed."""
        source = await partition_counts(self.source_admin)
        wanted = {t: n for t, n in source.items() if self.should_mirror(t)}
        target = await partition_counts(self.target_admin)
        new = [t for t in wanted if self.target_topic(t) not in target]
        if new:
            configs = (await topic_overrides(self.source_admin, new, self.config_keep)
                       if self.config.sync_topic_configs_enabled else {})
            for topic in new:
                created = await create_topic(self.target_admin, self.target_topic(topic), wanted[topic],
                                             self.config.replication_factor, configs.get(topic, {}))
                if created:
                    log.info("created %s on %s with %d partitions, mirroring %s from %s", self.target_topic(topic),
                             self.config.target_cluster_alias, wanted[topic], topic, self.config.source_cluster_alias)
        grow = {self.target_topic(t): NewPartitions(total_count=n) for t, n in wanted.items()
                if self.target_topic(t) in target and target[self.target_topic(t)] < n}
        if grow:
            await self.target_admin.create_partitions(grow)
            for name, parts in grow.items():
                log.info("grew %s on %s to %d partitions", name, self.config.target_cluster_alias, parts.total_count)
        changed = wanted != self.partitions
        self.partitions = wanted
        return changed

    async def sync_configs(self) -> None:
        """Copy each mirrored topic's own configs to its target topic (MM2's sync.topic.configs)."""
        topics = list(self.partitions)
        source = await topic_overrides(self.source_admin, topics, self.config_keep)
        target = await topic_overrides(self.target_admin, [self.target_topic(t) for t in topics], self.config_keep)
        changes = []
        for topic, configs in source.items():
            remote = self.target_topic(topic)
            if remote in target and target[remote] != configs:
                changes.append(ConfigResource(ConfigResourceType.TOPIC, remote, configs=configs))
        if changes:
            await self.target_admin.alter_configs(changes)
            log.info("synced the configs of %s", ", ".join(c.name for c in changes))

    def assignments(self, max_tasks: int) -> list[list[tuple[str, int]]]:
        """The topic-partitions split round-robin over at most ``max_tasks`` tasks (none when empty)."""
        tps = [(t, p) for t in sorted(self.partitions) for p in range(self.partitions[t])]
        tasks = min(max_tasks, len(tps))
        return [tps[i::tasks] for i in range(tasks)] if tasks else []


def encode_partitions(tps: list[tuple[str, int]]) -> str:
    """MM2's ``task.assigned.partitions``: ``topic-partition`` entries, comma-separated."""
    return ",".join(f"{t}-{p}" for t, p in tps)


def decode_partitions(value: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        topic, _, partition = item.rpartition("-")
        if not topic or not re.fullmatch(r"\d+", partition):
            raise ConnectException(f"task.assigned.partitions: {item!r} is not topic-partition")
        out.append((topic, int(partition)))
    return out
