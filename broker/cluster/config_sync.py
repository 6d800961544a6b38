"""Topic configs and dynamic broker configs of a ZooKeeper cluster, kept where Kafka's ZooKeeper mode keeps them:
``/config/topics/<topic>`` and ``/config/brokers/<broker id>`` / ``/config/brokers/<default>``, each change
announced by a notification under /config/changes (config_changes.py).

Writing (AlterConfigs and IncrementalAlterConfigs on any broker, as Kafka's ZkAdminManager): the entity's
config is read from ZooKeeper, not from this broker's view, the new whole config computed from it and
validated (nothing is written when it is invalid), then written with its notification conditionally on the
version read, so two brokers altering the same entity at once lose neither change (read and tried again).
The answering broker applies it at once; every broker (this one again, harmlessly) applies it when the
notification comes, as Kafka's TopicConfigHandler and BrokerConfigHandler:

- a topic's config replaces its overrides in this broker's view of the topic (Metadata, DescribeConfigs,
  the controller's unclean.leader.election.enable, replicas opened later) and the config of this broker's
  logs of it (retention, cleanup.policy, min.insync.replicas, segment sizes...); when
  unclean.leader.election.enable changes the controller looks at the topic's partitions again (Kafka's
  enableTopicUncleanLeaderElection);
- ``<default>`` and this broker's own id replace that level of its dynamic broker configs (the others' ids are
  theirs); names or values this broker cannot take (written by another tool) are logged and left out, as
  Kafka's DynamicBrokerConfig drops invalid dynamic configs.

A notification may come before this broker's view has the topic (just created): its config is read again
from ZooKeeper once the topic is there (for up to PENDING_SECONDS), so the newer config always wins.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, KazooException

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError, UnknownTopicOrPartition
from .config_changes import read_entity_config, write_entity_config
from .znodes import DEFAULT_ENTITY, topic_path

if TYPE_CHECKING:
    from ..topics.cluster import Cluster
    from .membership import ClusterMembership
    from .topic_meta import TopicMeta

__all__ = ["ClusterConfigs"]

log = logging.getLogger(__name__)

TOPICS, BROKERS = "topics", "brokers"  # Kafka's ConfigType names: /config/<type>
PENDING_SECONDS = 30.0
WRITE_ATTEMPTS = 10  # read-modify-write rounds lost to other writers before the request fails
_UNCLEAN = "unclean.leader.election.enable"

Compute = Callable[[dict[str, str]], dict[str, str]]


def broker_entity(level: str) -> str:
    """The /config/brokers child of a BROKER resource name ("" is the cluster default)."""
    return level or DEFAULT_ENTITY


class ClusterConfigs:
    def __init__(self, cluster: Cluster, membership: ClusterMembership) -> None:
        self.cluster = cluster
        self.membership = membership
        self.failures = 0  # configs from ZooKeeper this broker could not apply (each logged)
        self._pending: dict[str, float] = {}  # topics whose config came before the topic: name -> give up at
        self._settling: asyncio.Task[None] | None = None

    def install(self) -> None:
        """Apply every topic's and broker level's config now and on every change."""
        changes = self.membership.config_changes
        assert changes is not None
        changes.handle(TOPICS, self.apply_topic)
        changes.handle(BROKERS, self.apply_broker)

    async def stop(self) -> None:
        if self._settling is not None:
            self._settling.cancel()
            await asyncio.gather(self._settling, return_exceptions=True)

    # -- writes (the config APIs) ---------------------------------------------------------------

    async def alter_topic(self, name: str, compute: Compute, validate_only: bool) -> None:
        """Write topic ``name``'s config ``compute(current config)`` (validated first: BrokerError in Kafka's
        words, nothing written); UNKNOWN_TOPIC_OR_PARTITION when ZooKeeper has no such topic."""
        def check(config: dict[str, str]) -> None:
            self.cluster.topic_config(config)
        await self._alter(TOPICS, name, compute, check, validate_only)

    async def alter_broker(self, level: str, compute: Compute, validate_only: bool) -> None:
        """Write dynamic broker level ``level`` (this broker's id, or "" for the cluster default), as
        alter_topic; INVALID_REQUEST for another broker's id, as Kafka answers."""
        self.cluster.dynamic.level(level)

        def check(config: dict[str, str]) -> None:
            self.cluster.check_broker_configs(level, config)
        await self._alter(BROKERS, broker_entity(level), compute, check, validate_only)

    async def _alter(self, entity_type: str, name: str, compute: Compute, check: Callable[[dict[str, str]], None],
                     validate_only: bool) -> None:
        zk = self.membership.zk
        for _ in range(WRITE_ATTEMPTS):
            try:
                current, version = await asyncio.to_thread(self._read, entity_type, name)
            except KazooException as exc:
                raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"reading ZooKeeper failed: {exc!r}") from None
            config = compute(dict(current))
            check(config)
            if validate_only:
                return
            try:
                await asyncio.to_thread(write_entity_config, zk, entity_type, name, config, version)
            except BadVersionError:  # another broker wrote it since the read: compute again from theirs
                continue
            except KazooException as exc:
                raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"writing ZooKeeper failed: {exc!r}") from None
            log.info("config of %s/%s written: %s", entity_type, name, config)
            (self.apply_topic if entity_type == TOPICS else self.apply_broker)(name, config)
            return
        raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR,
                          f"/config/{entity_type}/{name} kept changing under {WRITE_ATTEMPTS} attempts; try again")

    def _read(self, entity_type: str, name: str) -> tuple[dict[str, str], int]:
        zk = self.membership.zk
        if entity_type == TOPICS and zk.exists(topic_path(name)) is None:  # ZooKeeper's word, not this view's
            raise UnknownTopicOrPartition(f"Topic '{name}' does not exist.")
        try:
            return read_entity_config(zk, entity_type, name)
        except ValueError as exc:  # written by another tool: replaced whole by this write
            log.warning("%s; replacing it", exc)
            return {}, zk.exists(f"/config/{entity_type}/{name}").version

    # -- every broker: a change read from ZooKeeper -------------------------------------------------

    def apply_topic(self, name: str, config: dict[str, str]) -> None:
        meta = self.membership.sync.topics.get(name)
        if meta is None:  # not in this broker's view yet (or deleted): read again once it is
            self._pending[name] = asyncio.get_running_loop().time() + PENDING_SECONDS
            if self._settling is None or self._settling.done():
                self._settling = asyncio.get_running_loop().create_task(self._settle())
            return
        self._apply_topic(meta, config)

    def _apply_topic(self, meta: TopicMeta, config: dict[str, str]) -> None:
        name, old = meta.name, meta.overrides
        if old != config:
            meta.overrides = dict(config)
            log.info("topic %s: config now %s", name, config)
        cluster = self.cluster
        topic = cluster.topics.get(name)
        if topic is not None and name in cluster.replicated and topic.overrides != config:
            try:
                cluster.alter_topic_config(name, dict(config))
            except BrokerError as exc:  # written by another tool: this broker's logs keep their config
                self.failures += 1
                log.error("topic %s: config %s from ZooKeeper not applied to this broker's replicas: %s", name,
                          config, exc.message)
        controller = self.membership.controller
        if old.get(_UNCLEAN) != config.get(_UNCLEAN) and controller is not None:
            controller.mark({(name, p) for p in meta.assignment})

    async def _settle(self) -> None:
        """Apply the configs of the pending topics as they appear in this broker's view."""
        sync, loop = self.membership.sync, asyncio.get_running_loop()
        while self._pending:
            await sync.wait_for(lambda: any(n in sync.topics for n in self._pending), 1.0)
            now = loop.time()
            ready = [n for n in self._pending if n in sync.topics]
            for name in [n for n, until in self._pending.items() if n in ready or until < now]:
                del self._pending[name]
            if not ready:
                continue
            try:
                configs = await asyncio.to_thread(self._read_topics, ready)
            except (KazooException, ValueError) as exc:
                self.failures += 1
                log.error("reading the configs of topics %s failed: %s", ready, exc)
                continue
            for name, config in configs.items():
                meta = sync.topics.get(name)
                if meta is not None:
                    self._apply_topic(meta, config)

    def _read_topics(self, names: list[str]) -> dict[str, dict[str, str]]:
        return {n: read_entity_config(self.membership.zk, TOPICS, n)[0] for n in names}

    def apply_broker(self, name: str, config: dict[str, str]) -> None:
        cluster = self.cluster
        if name == DEFAULT_ENTITY:
            level = ""
        elif name == str(cluster.node_id):
            level = name
        else:
            return  # another broker's own
        values = self._acceptable(level, config)
        if values != cluster.dynamic.level(level):
            cluster.alter_broker_configs(level, values)

    def _acceptable(self, level: str, config: dict[str, str]) -> dict[str, str]:
        """``config`` less what this broker cannot take (each name logged)."""
        try:
            self.cluster.check_broker_configs(level, config)
            return dict(config)
        except BrokerError:
            pass
        kept: dict[str, str] = {}
        for key, value in sorted(config.items()):
            try:
                self.cluster.check_broker_configs(level, {**kept, key: value})
                kept[key] = value
            except BrokerError as exc:
                self.failures += 1
                log.error("/config/brokers/%s: %s=%s ignored: %s", broker_entity(level), key, value, exc.message)
        return kept
