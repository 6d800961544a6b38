"""MirrorHeartbeatConnector: a heartbeat every ``emit.heartbeats.interval.seconds`` into ``heartbeats``.

Written where the worker writes (the flow's target in dedicated mode); mirrored onwards like any topic
(``A.heartbeats`` in B), so that each cluster's heartbeats topics show which clusters reach it and how
fresh their records are (RemoteClusterUtils.upstreamClusters and replicationHops read them).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, ClassVar

from headwater.connect.api import SourceConnector, SourceRecord, SourceTask
from headwater.connect.api.data import OPTIONAL_BYTES_SCHEMA
from headwater.kafka.mirror import Heartbeat

from .config import MirrorHeartbeatConfig
from .source import _BYTES_DEFAULTS
from .topics import ensure_internal_topic, reach

__all__ = ["MirrorHeartbeatConnector", "MirrorHeartbeatTask"]

log = logging.getLogger(__name__)


class MirrorHeartbeatConnector(SourceConnector):
    config_class = MirrorHeartbeatConfig
    aliases = ("org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",)
    runtime_defaults: ClassVar[dict[str, str]] = _BYTES_DEFAULTS

    def __init__(self) -> None:
        self.config: MirrorHeartbeatConfig | None = None

    async def start(self, config: MirrorHeartbeatConfig) -> None:
        self.config = config
        if config.target.bootstrap:  # else the worker's topic creation (or the broker) makes it
            admin = await reach(config.target, "target", config.admin_timeout_ms)
            try:
                await ensure_internal_topic(admin, config.policy().heartbeats_topic(),
                                            config.heartbeats_topic_replication_factor, "heartbeats")
            finally:
                await admin.close()

    def task_class(self) -> type[SourceTask]:
        return MirrorHeartbeatTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        assert self.config is not None
        return [self.config.originals()] if self.config.emit_heartbeats_enabled else []


class MirrorHeartbeatTask(SourceTask):
    def __init__(self) -> None:
        self.stopping = False
        self.emitted = 0

    def start(self, props: dict[str, str]) -> None:
        config = MirrorHeartbeatConfig.model_validate(props)
        self.source, self.target = config.source_cluster_alias, config.target_cluster_alias
        self.topic = config.policy().heartbeats_topic()
        self.interval = config.emit_heartbeats_interval_seconds
        self.next = time.monotonic()

    async def poll(self) -> list[SourceRecord] | None:
        wait = self.next - time.monotonic()
        if wait > 0:
            await asyncio.sleep(min(wait, 1.0))
        if self.stopping or time.monotonic() < self.next:
            return None
        self.next = time.monotonic() + self.interval
        beat = Heartbeat(self.source, self.target, int(time.time() * 1000))
        self.emitted += 1
        return [SourceRecord(self.topic, beat.value(), beat.key(), 0, OPTIONAL_BYTES_SCHEMA, OPTIONAL_BYTES_SCHEMA,
                             beat.timestamp, [], {"sourceClusterAlias": self.source,
                                                  "targetClusterAlias": self.target}, {"offset": 0})]

    def metrics(self) -> dict[str, Any]:
        return {"heartbeats_emitted": self.emitted}

    def stop(self) -> None:
        self.stopping = True
