"""MirrorCheckpointConnector: consumer groups' positions carried to the target.

The connector lists the source's consumer groups (``groups`` / ``groups.exclude``) and splits them over
its tasks. A task reads the offset syncs (``mm2-offset-syncs.<target>.internal``) into an
``OffsetSyncStore``; every ``emit.checkpoints.interval.seconds`` it translates each group's committed
offsets of mirrored topics and writes the changed ones as checkpoints to ``<source>.checkpoints.internal``
on the target. With ``sync.group.offsets.enabled`` (on by default) it also commits them for the target's
groups, as Kafka's MirrorCheckpointTask does: only groups with no active member, never backwards. Every
group that is not synced is named in the log once, with the reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, ClassVar

from aiokafka import TopicPartition

from headwater.connect.api import SourceConnector, SourceRecord, SourceTask
from headwater.connect.api.data import OPTIONAL_BYTES_SCHEMA
from headwater.connect.kafka.admin import commit_group_offsets, describe_group, partition_counts
from headwater.kafka.mirror import Checkpoint, OffsetSync

from .config import MirrorCheckpointConfig
from .source import _BYTES_DEFAULTS
from .topics import close_clients, ensure_internal_topic, not_mirrored, reach
from .translate import OffsetSyncStore

__all__ = ["MirrorCheckpointConnector", "MirrorCheckpointTask"]

log = logging.getLogger(__name__)

ASSIGNED = "task.assigned.groups"


async def list_groups(admin: Any) -> list[str]:
    return sorted({g[0] for g in await admin.list_consumer_groups()})


class MirrorCheckpointConnector(SourceConnector):
    config_class = MirrorCheckpointConfig
    aliases = ("org.apache.kafka.connect.mirror.MirrorCheckpointConnector",)
    runtime_defaults: ClassVar[dict[str, str]] = _BYTES_DEFAULTS

    def __init__(self) -> None:
        self.config: MirrorCheckpointConfig | None = None
        self.groups: list[str] = []
        self._admins: list[Any] = []
        self._loop: asyncio.Task[None] | None = None
        self._excluded: set[str] = set()

    async def start(self, config: MirrorCheckpointConfig) -> None:
        self.config = config
        source = await reach(config.source, "source", config.admin_timeout_ms)
        self._admins.append(source)
        target = await reach(config.target, "target", config.admin_timeout_ms)
        self._admins.append(target)
        if config.emit_checkpoints_enabled:
            await ensure_internal_topic(target, config.policy().checkpoints_topic(config.source_cluster_alias),
                                        config.checkpoints_topic_replication_factor, "checkpoints")
        self.groups = await self._find_groups()
        if config.refresh_groups_enabled:
            self._loop = asyncio.create_task(self._refresh_loop(), name=f"mirror-groups-{config.name}")

    async def _find_groups(self) -> list[str]:
        assert self.config is not None
        wanted, keep = [], self.config.group_filter()
        for group in await list_groups(self._admins[0]):
            if keep(group):
                wanted.append(group)
            elif group not in self._excluded:
                self._excluded.add(group)
                log.info("group %s is not synced from %s: excluded by groups / groups.exclude", group,
                         self.config.source_cluster_alias)
        return wanted

    async def _refresh_loop(self) -> None:
        assert self.config is not None
        while True:
            await asyncio.sleep(self.config.refresh_groups_interval_seconds)
            try:
                groups = await self._find_groups()
            except Exception as exc:
                log.warning("connector %s: listing the source's groups failed: %s", self.config.name, exc)
                continue
            if groups != self.groups:
                self.groups = groups
                self.context.request_task_reconfiguration()

    def task_class(self) -> type[SourceTask]:
        return MirrorCheckpointTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert self.config is not None
        if not self.config.emit_checkpoints_enabled or not self.groups:
            return []
        tasks = min(max_tasks, len(self.groups))
        base = self.config.originals()
        return [{**base, ASSIGNED: ",".join(self.groups[i::tasks])} for i in range(tasks)]

    async def stop(self) -> None:
        if self._loop is not None:
            self._loop.cancel()
        await close_clients(self._admins)


class MirrorCheckpointTask(SourceTask):
    def __init__(self) -> None:
        self.store = OffsetSyncStore()
        self.emitted: dict[tuple[str, str, int], tuple[int, int]] = {}
        self.said: set[tuple[str, str]] = set()
        self.stopping = False
        self._clients: list[Any] = []
        self._reader: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self.checkpoints_emitted = 0
        self.groups_synced = 0

    async def start(self, props: dict[str, str]) -> None:
        config = self.config = MirrorCheckpointConfig.model_validate(props)
        self.policy = config.policy()
        self.topic_filter = config.topic_filter()
        self.groups = [g for g in props.get(ASSIGNED, "").split(",") if g]
        self.checkpoints_topic = self.policy.checkpoints_topic(config.source_cluster_alias)
        self.source_admin = await reach(config.source, "source", config.admin_timeout_ms)
        self._clients.append(self.source_admin)
        self.target_admin = await reach(config.target, "target", config.admin_timeout_ms)
        self._clients.append(self.target_admin)
        self.syncs_consumer = config.offset_syncs_cluster().consumer(
            enable_auto_commit=False, auto_offset_reset="earliest", group_id=None,
            client_id=f"mirror-{config.source_cluster_alias}-checkpoints")
        await self.syncs_consumer.start()
        self._clients.append(self.syncs_consumer)
        self._reader = asyncio.create_task(self._read_syncs(), name="mirror-offset-syncs-reader")
        if config.sync_group_offsets_enabled and self.policy.format_remote_topic("x", "t") == "t":
            log.info("replication.policy.class=IdentityReplicationPolicy: group offsets are synced into the topics "
                     "of the same name on %s; a group there that also reads records %s's own producers write to "
                     "those topics resumes at mirrored offsets", config.target_cluster_alias,
                     config.target_cluster_alias)
        if not config.sync_group_offsets_enabled:
            log.info("sync.group.offsets.enabled=false: groups %s get checkpoints only, no offsets on %s",
                     ", ".join(self.groups), config.target_cluster_alias)
        now = time.monotonic()
        self.next_checkpoint = now
        self.next_group_sync = now + min(config.sync_group_offsets_interval_seconds,
                                         config.emit_checkpoints_interval_seconds)

    async def _read_syncs(self) -> None:
        """Follow the offset-syncs topic; ``store.read_to_end`` once the end seen at start was reached."""
        topic = self.policy.offset_syncs_topic(self.config.target_cluster_alias)
        tp = TopicPartition(topic, 0)
        consumer = self.syncs_consumer
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        end = (await consumer.end_offsets([tp]))[tp]
        if end == 0:
            self.store.read_to_end = True
        while not self.stopping:
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for records in batches.values():
                for r in records:
                    try:
                        self.store.add(OffsetSync.decode(r.key, r.value))
                    except Exception as exc:
                        log.warning("skipping an offset sync at %s offset %d that does not decode: %s", topic,
                                    r.offset, exc)
            if not self.store.read_to_end and await consumer.position(tp) >= end:
                self.store.read_to_end = True

    async def poll(self) -> list[SourceRecord] | None:
        if self._reader is not None and self._reader.done() and not self.stopping:
            self._reader.result()  # the syncs reader failed: fail the task with its error
        await asyncio.sleep(0.2)
        now = time.monotonic()
        if self.stopping or now < self.next_checkpoint or not self.store.read_to_end:
            return None
        self.next_checkpoint = now + self.config.emit_checkpoints_interval_seconds
        translated = await self._translate_all()
        records = []
        for group, checkpoints in translated.items():
            for cp in checkpoints:
                key = (group, cp.topic, cp.partition)
                if self.emitted.get(key) == (cp.upstream_offset, cp.downstream_offset):
                    continue
                self.emitted[key] = (cp.upstream_offset, cp.downstream_offset)
                records.append(SourceRecord(
                    self.checkpoints_topic, cp.value(), cp.key(), 0, OPTIONAL_BYTES_SCHEMA, OPTIONAL_BYTES_SCHEMA,
                    int(time.time() * 1000), [], {"group": group, "topic": cp.topic, "partition": cp.partition},
                    {"offset": 0}))
        self.checkpoints_emitted += len(records)
        if self.config.sync_group_offsets_enabled and now >= self.next_group_sync:
            self.next_group_sync = now + self.config.sync_group_offsets_interval_seconds
            await self._sync_groups(translated)
        return records or None

    async def _translate_all(self) -> dict[str, list[Checkpoint]]:
        out: dict[str, list[Checkpoint]] = {}
        target = self.config.target_cluster_alias
        for group in self.groups:
            try:
                offsets = await self.source_admin.list_consumer_group_offsets(group)
            except Exception as exc:
                log.warning("reading the offsets of group %s on %s failed: %s", group,
                            self.config.source_cluster_alias, exc)
                continue
            checkpoints = []
            for tp, meta in offsets.items():
                topic = tp.topic
                if meta.offset < 0 or not_mirrored(self.policy, self.topic_filter, target, topic) is not None:
                    continue
                downstream = self.store.translate(topic, tp.partition, meta.offset)
                if downstream is None:
                    self._say(group, f"{topic}-{tp.partition}", "no offset sync at or below its offset "
                              f"{meta.offset} yet (its records are not mirrored yet)")
                    continue
                checkpoints.append(Checkpoint(group, self.config.remote_topic(topic), tp.partition, meta.offset,
                                              downstream, meta.metadata or ""))
            if checkpoints:
                out[group] = checkpoints
        return out

    def _say(self, group: str, what: str, why: str) -> None:
        if (group, what + why) not in self.said:
            self.said.add((group, what + why))
            log.info("group %s: %s not synced to %s: %s", group, what, self.config.target_cluster_alias, why)

    async def _sync_groups(self, translated: dict[str, list[Checkpoint]]) -> None:
        """Commit the translated offsets for target groups with no active member, never backwards."""
        existing = await partition_counts(self.target_admin)
        for group, checkpoints in translated.items():
            try:
                described = await describe_group(self.target_admin, group)
                if not described.idle:
                    self._say(group, "offsets", f"the group is active on the target ({described.state}, "
                              f"{len(described.members)} members); offsets are only written for groups with no "
                              "active member")
                    continue
                current = await self.target_admin.list_consumer_group_offsets(group)
                now = {(tp.topic, tp.partition): m.offset for tp, m in current.items()}
                commit = {}
                for cp in checkpoints:
                    key = (cp.topic, cp.partition)
                    if cp.topic not in existing:
                        self._say(group, cp.topic, "the topic does not exist on the target yet")
                        continue
                    if now.get(key, -1) >= cp.downstream_offset:
                        continue  # never move a group backwards
                    commit[key] = cp.downstream_offset
                if commit:
                    await commit_group_offsets(self.target_admin, group, commit)
                    self.groups_synced += 1
                    log.debug("synced group %s on %s: %s", group, self.config.target_cluster_alias, commit)
            except Exception as exc:
                log.warning("syncing group %s to %s failed: %s", group, self.config.target_cluster_alias, exc)

    def metrics(self) -> dict[str, Any]:
        return {"groups": len(self.groups), "checkpoints_emitted": self.checkpoints_emitted,
                "group_offset_syncs": self.groups_synced, "offset_syncs_read_to_end": self.store.read_to_end}

    async def stop(self) -> None:
        self.stopping = True
        if self._reader is not None:
            self._reader.cancel()
        self._closing = asyncio.create_task(self._close_after(1.5))

    async def _close_after(self, delay: float) -> None:
        try:
            await asyncio.sleep(delay)  # a poll in flight returns first
        finally:  # also when the process shuts down first (the pending task is cancelled)
            await self._close()

    async def _close(self) -> None:
        await close_clients(self._clients)
