"""The broker's state: the registry of topics, their partition logs and their configs.

One node owns every partition, so the "cluster" is this process. The event-loop
thread is the only writer; fsyncs run in worker threads through PartitionFlusher.
A topic's own shape is in ``topic.py``; flushing, retention and compaction on a
schedule in ``housekeeping.py``.
Topic metadata (partition count, id, config overrides) is persisted in one JSON file
in the log directory, replaced atomically on every change; so are the dynamic broker configs
(broker_configs.py), which ``config`` and the topic defaults carry over the properties file's.
"""

from __future__ import annotations

import logging
import uuid

from headwater.kafka.errors import ErrorCode

from ..config.broker_config import BrokerConfig, Listener, TopicConfig
from ..config.dynamic_configs import DynamicBrokerConfigs, honoured_values
from ..config.state_file import read_json, write_json
from ..errors import BrokerError, UnknownTopicOrPartition
from ..log import PartitionLog
from ..log.flusher import PartitionFlusher
from ..metrics.stats import BrokerStats, TopicCounters
from .data_waiters import DataWaiters
from .producer_state import PartitionProducerState, replay
from .topic import Partition, Topic, validate_topic_name

__all__ = ["Cluster", "Topic", "validate_topic_name"]

log = logging.getLogger(__name__)

TOPICS_FILE = "headwater-topics.json"


class Cluster:
    """Topics and partitions of this node, plus the waiters of long-polling fetches."""

    def __init__(self, config: BrokerConfig) -> None:
        self.static_config = config  # the properties file and --set
        self.config = config  # with the dynamic broker configs over it
        self.dynamic = DynamicBrokerConfigs(config.log_dir, config.node_id)
        self.log_dir = config.log_dir
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.defaults = config.topic_defaults()
        self.advertised: list[Listener] = config.advertised_listener_list()
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id
        self.data_waiters = DataWaiters()  # long-polling fetches, woken by every append
        self.stats = BrokerStats()  # all-topics and per-API counters (per-topic ones are on each Topic)

    # -- lifecycle ---------------------------------------------------------------------

    def load(self) -> None:
        """Open every persisted topic, recovering each partition log."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.dynamic.load()
        try:
            self._reconfigure(self.static_config.with_dynamic(honoured_values(self.dynamic.default,
                                                                              self.dynamic.per_broker)))
        except BrokerError as exc:  # e.g. a properties file changed since: the broker starts on the file's values
            log.error("dynamic broker configs in %s ignored: %s", self.dynamic.path, exc.message)
        saved = read_json(self.log_dir / TOPICS_FILE)
        if saved is None:
            return
        for name, meta in saved.get("topics", {}).items():
            config = self.defaults.with_overrides(meta.get("config", {}))
            topic = Topic(name, uuid.UUID(meta["id"]), dict(meta.get("config", {})), config)
            for p in range(meta["partitions"]):
                self._open_partition(topic, p)
            self._register(topic)
        log.info("loaded %d topics from %s", len(self.topics), self.log_dir)

    def close(self) -> None:
        for topic in self.topics.values():
            for p in topic.partitions:
                p.log.close()
                if p.producers.producers:
                    p.producers.snapshot(p.log.log_end_offset)

    def _open_partition(self, topic: Topic, index: int) -> None:
        directory = self.log_dir / f"{topic.name}-{index}"
        plog = PartitionLog.open(directory, topic.config)
        state = PartitionProducerState(directory)
        start = state.load()
        if start > plog.log_end_offset:  # the log lost its tail after the snapshot: rebuild
            state = PartitionProducerState(directory)
            start = 0
        replayed = replay(state, plog, start)
        if replayed:
            log.info("%s-%d: replayed %d idempotent batches into producer state", topic.name, index, replayed)
        topic.partitions.append(Partition(index, plog, PartitionFlusher(plog), state, self.notify_data))

    def snapshot_producer_state(self) -> None:
        """Snapshot producer state that moved on, so a crash replays only what followed."""
        for topic in self.topics.values():
            for p in topic.partitions:
                state = p.producers
                if state.producers and state.snapshot_offset != p.log.log_end_offset:
                    state.snapshot(p.log.log_end_offset)

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic

    def _save(self) -> None:
        write_json(self.log_dir / TOPICS_FILE, {"topics": {name: t.metadata() for name, t in self.topics.items()}})

    # -- topics -------------------------------------------------------------------------

    def topic_config(self, overrides: dict[str, str]) -> TopicConfig:
        """Validate overrides into a full TopicConfig; BrokerError(INVALID_CONFIG) in Kafka's words
        (``Unknown topic config name: x``, ``Invalid value v for configuration k: ...``)."""
        return self.defaults.with_overrides(overrides)

    def check_new_topic(self, name: str, num_partitions: int, replication_factor: int,
                        overrides: dict[str, str]) -> TopicConfig:
        validate_topic_name(name)
        if name in self.topics:
            raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if num_partitions <= 0:
            raise BrokerError(ErrorCode.INVALID_PARTITIONS,
                              f"Number of partitions must be larger than 0 (got {num_partitions}).")
        if replication_factor not in (-1, 1):
            raise BrokerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor {replication_factor} is larger than the 1 available broker.",
            )
        return self.topic_config(overrides)

    def create_topic(
        self, name: str, num_partitions: int = -1, replication_factor: int = -1,
        overrides: dict[str, str] | None = None,
    ) -> Topic:
        overrides = dict(overrides or {})
        config = self.check_new_topic(name, num_partitions, replication_factor, overrides)
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        topic = Topic(name, uuid.uuid4(), overrides, config)
        for p in range(num_partitions):
            self._open_partition(topic, p)
        self._register(topic)
        self._save()
        log.info("created topic %s with %d partitions %s", name, num_partitions, overrides or "")
        return topic

    def delete_topic(self, name: str) -> None:
        topic = self.topics.pop(name, None)
        if topic is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        self.topics_by_id.pop(topic.topic_id, None)
        self._save()
        for p in topic.partitions:
            p.log.delete()
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int) -> None:
        topic = self.get_topic(name)
        if count <= len(topic.partitions):
            raise BrokerError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {len(topic.partitions)} partitions, {count} would not be an increase.",
            )
        for p in range(len(topic.partitions), count):
            self._open_partition(topic, p)
        self._save()

    def alter_topic_config(self, name: str, overrides: dict[str, str]) -> None:
        topic = self.get_topic(name)
        config = self.topic_config(overrides)
        topic.overrides = dict(overrides)
        topic.config = config
        for p in topic.partitions:
            p.log.update_config(config)
        self._save()

    # -- dynamic broker configs ----------------------------------------------------------------

    def check_broker_configs(self, resource_name: str, values: dict[str, str]) -> BrokerConfig:
        """This broker's properties were ``values`` the dynamic configs of level ``resource_name`` (this
        node's id, or "" for the cluster default); BrokerError in Kafka's words when they may not be, or
        when a topic's overrides would not fit the new defaults."""
        self.dynamic.check(resource_name, values, self.static_config.property_names())
        per_broker = values if resource_name else self.dynamic.per_broker
        default = self.dynamic.default if resource_name else values
        config = self.static_config.with_dynamic(honoured_values(default, per_broker))
        defaults = config.topic_defaults()
        for topic in self.topics.values():
            try:
                defaults.with_overrides(topic.overrides)
            except BrokerError as exc:
                raise BrokerError(exc.code, f"topic {topic.name}: {exc.message}") from None
        return config

    def alter_broker_configs(self, resource_name: str, values: dict[str, str]) -> None:
        """Replace the dynamic configs of level ``resource_name`` with ``values``, kept across restarts and in
        effect at once: every topic's configs follow the new defaults where it has no override."""
        config = self.check_broker_configs(resource_name, values)
        level = self.dynamic.level(resource_name)
        level.clear()
        level.update(values)
        self.dynamic.save()
        self._reconfigure(config)
        log.info("dynamic broker configs of %s now %s", f"broker {resource_name}" if resource_name else
                 "the cluster default", values)

    def _reconfigure(self, config: BrokerConfig) -> None:
        self.config = config
        self.defaults = config.topic_defaults()
        for topic in self.topics.values():
            topic.config = self.defaults.with_overrides(topic.overrides)
            for p in topic.partitions:
                p.log.update_config(topic.config)

    def get_topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
        return topic

    def partition(self, name: str, index: int) -> Partition:
        """Partition ``index`` of topic ``name``; UnknownTopicOrPartition when there is none."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            raise UnknownTopicOrPartition()
        return topic.partitions[index]

    def counters(self, name: str) -> tuple[TopicCounters, ...]:
        """What a Produce or Fetch on topic ``name`` adds to: the all-topics counters, and the topic's own
        when it exists (an unknown name gets none, so clients cannot grow them)."""
        topic = self.topics.get(name)
        return (self.stats.all_topics,) if topic is None else (self.stats.all_topics, topic.stats)

    # -- long-poll fetch support ----------------------------------------------------------

    def notify_data(self) -> None:
        """Wake every fetch waiting for data (called after each append); a fetch carried on by the server's
        answers reads and is answered within this call."""
        self.data_waiters.notify()

    async def wait_for_data(self, timeout: float) -> None:
        """Until the next append (notify_data) or ``timeout`` seconds."""
        await self.data_waiters.wait(timeout)
