"""The broker's state: the registry of topics, their partition logs and their configs.

On one node this broker owns every partition. In a ZooKeeper cluster (docs/CLUSTER.md) the replicated topics
are ZooKeeper's: broker/cluster/topic_sync.py opens here the logs of the partitions this broker is a replica
of (a topic's ``partitions`` then holds those alone, by index) and removes them when the topic goes; they are
not in the topics file. Internal topics, and topics of single-node use, stay this broker's own. The event-loop
thread is the only writer; fsyncs run in worker threads through PartitionFlusher.
A topic's own shape is in ``topic.py``; flushing, retention and compaction on a
schedule in ``housekeeping.py``.
Topic metadata (partition count, id, config overrides) is persisted in one JSON file
in the log directory, replaced atomically on every change; so are the dynamic broker configs
(broker_configs.py), which ``config`` and the topic defaults carry over the properties file's.

Creating partitions (CreateTopics, CreatePartitions, auto-creation) is all or nothing: what cannot be served
(``max.broker.partitions``, a disk or descriptor error) is refused with an error code and message, the partitions
made so far are removed, and a pending-creation file names them until the topic file records them, so a crash
in between leaves nothing behind either (``load`` removes them). Every partition's segment files share one
bounded descriptor cache (log/fd_cache.py, ``log.open.files.max``).
"""

from __future__ import annotations

import bisect
import errno
import functools
import logging
import resource
import shutil
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode

from ..cluster.znodes import kafka_uuid
from ..config.broker_config import BrokerConfig, Listener, TopicConfig
from ..config.dynamic_configs import DynamicBrokerConfigs, honoured_values
from ..config.state_file import read_json, write_json
from ..errors import BrokerError, UnknownTopicOrPartition
from ..log import PartitionLog
from ..log.fd_cache import DescriptorCache, default_capacity
from ..log.flusher import PartitionFlusher
from ..log.recovery import sync_filesystem
from ..metrics.stats import BrokerStats, TopicCounters
from .data_waiters import DataWaiters
from .producer_state import load_producer_state
from .topic import Partition, Topic, validate_topic_name

if TYPE_CHECKING:  # kazoo loads only in cluster mode
    from ..cluster.membership import ClusterMembership
    from ..replication.manager import ReplicaManager

__all__ = ["Cluster", "Topic", "validate_topic_name"]

log = logging.getLogger(__name__)

TOPICS_FILE = "headwater-topics.json"
PENDING_FILE = "headwater-topics.pending.json"  # partitions being created: {"topic", "from", "to"}
PARTITION_METADATA = "partition.metadata"  # a replicated partition's topic id, as Kafka's PartitionMetadataFile


class Cluster:
    """Topics and partitions of this node, plus the waiters of long-polling fetches."""

    def __init__(self, config: BrokerConfig) -> None:
        self.static_config = config  # the properties file and --set
        self.config = config  # with the dynamic broker configs over it
        self.dynamic = DynamicBrokerConfigs(config.log_dir, config.node_id, zookeeper=bool(config.zookeeper_connect))
        self.log_dir = config.log_dir
        self.topics: dict[str, Topic] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self.defaults = config.topic_defaults()
        self.advertised: list[Listener] = config.advertised_listener_list()
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id
        self.data_waiters = DataWaiters()  # long-polling fetches, woken by every append
        self.stats = BrokerStats()  # all-topics and per-API counters (per-topic ones are on each Topic)
        self.fd_cache = DescriptorCache(self._fd_capacity())
        self.partition_count = 0  # of all topics, internal ones included (max.broker.partitions)
        # ZooKeeper membership (broker/cluster/), set by the server once registered; None: a single node
        self.membership: ClusterMembership | None = None
        # names of the topics whose partitions here are replicas of ZooKeeper's topics (broker/cluster/)
        self.replicated: set[str] = set()
        # Replication (broker/replication/), told every leadership change of a local replica; set by the server
        # with the membership; None: a single node
        self.replication: ReplicaManager | None = None

    def _fd_capacity(self) -> int:
        configured = self.config.log_open_files_max
        return configured if configured > 0 else default_capacity()

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
        self.fd_cache.capacity = self._fd_capacity()  # the open-files limit may have been raised since __init__
        self.fd_cache.own_from_this_thread()  # the event loop's: the thread that uses descriptors without a lock
        saved = read_json(self.log_dir / TOPICS_FILE)
        self._remove_unfinished(saved)
        if saved is None:
            return
        for name, meta in saved.get("topics", {}).items():
            config = self.defaults.with_overrides(meta.get("config", {}))
            topic = Topic(name, uuid.UUID(meta["id"]), dict(meta.get("config", {})), config)
            for p in range(meta["partitions"]):
                self._open_partition(topic, p)
            self._register(topic)
        log.info("loaded %d topics (%d partitions) from %s; segment files open at most %d (log.open.files.max)",
                 len(self.topics), self.partition_count, self.log_dir, self.fd_cache.capacity)

    def _remove_unfinished(self, saved: dict | None) -> None:
        """Remove the partitions a creation interrupted by a crash left behind (the topic file never got them)."""
        pending = read_json(self.log_dir / PENDING_FILE)
        if pending is None:
            return
        name, first, end = pending["topic"], int(pending["from"]), int(pending["to"])
        meta = (saved or {}).get("topics", {}).get(name)
        kept = int(meta["partitions"]) if meta is not None else 0
        removed = [i for i in range(max(first, kept), end) if (self.log_dir / f"{name}-{i}").exists()]
        for i in removed:
            shutil.rmtree(self.log_dir / f"{name}-{i}", ignore_errors=True)
        if removed:
            log.warning("removed %d partitions of %s whose creation was interrupted (%s-%d..%d)", len(removed),
                        name, name, removed[0], removed[-1])
        (self.log_dir / PENDING_FILE).unlink(missing_ok=True)

    def close(self) -> None:
        """Close every log: sealed and closed without an fsync each, then one sync of the filesystem, the recovery
        points, and another sync (80,000 fsyncs took minutes for 20,000 partitions)."""
        partitions = [p for topic in self.topics.values() for p in topic.partitions]
        for p in partitions:
            p.log.close(sync=False)
        sync_filesystem(self.log_dir)
        for p in partitions:
            p.log.write_recovery_point()
        sync_filesystem(self.log_dir)
        for p in partitions:
            if p.producers.producers:
                p.producers.snapshot(p.log.log_end_offset)

    def _open_partition(self, topic: Topic, index: int) -> None:
        directory = self.log_dir / f"{topic.name}-{index}"
        plog = PartitionLog.open(directory, topic.config, fd_cache=self.fd_cache)
        try:
            state, replayed = load_producer_state(directory, plog)
        except BaseException:
            plog.close()
            raise
        if replayed:
            log.info("%s-%d: replayed %d idempotent batches into producer state", topic.name, index, replayed)
        partition = Partition(index, plog, PartitionFlusher(plog), state,
                              functools.partial(self.notify_data, ((topic.name, index),)))
        parts = topic.partitions
        if not parts or parts[-1].index < index:
            parts.append(partition)
        else:  # a replica of a replicated topic, opened out of order
            parts.insert(bisect.bisect_left(parts, index, key=lambda p: p.index), partition)
        self.partition_count += 1

    def check_partition_limit(self, adding: int) -> None:
        """POLICY_VIOLATION naming ``max.broker.partitions`` when ``adding`` partitions would go over it."""
        limit = self.config.max_broker_partitions
        if self.partition_count + adding > limit:
            raise BrokerError(ErrorCode.POLICY_VIOLATION,
                              f"Adding {adding} partitions would give this broker {self.partition_count + adding} "
                              f"partitions, more than max.broker.partitions={limit}.")

    def _open_new_partitions(self, topic: Topic, count: int) -> None:
        """Open partitions ``len(topic.partitions)`` .. ``count - 1``, all or none: on any error the new ones are
        closed and removed, and the error is answered as KAFKA_STORAGE_ERROR naming what failed. The pending-
        creation file covers a crash meanwhile (``load`` removes them); the caller saves the topic file."""
        first = len(topic.partitions)
        pending = self.log_dir / PENDING_FILE
        write_json(pending, {"topic": topic.name, "from": first, "to": count})
        try:
            for p in range(first, count):
                self._open_partition(topic, p)
        except Exception as exc:
            failed = f"{topic.name}-{len(topic.partitions)}"
            self._remove_new_partitions(topic, first, count)
            pending.unlink(missing_ok=True)
            log.warning("creating %s failed; its new partitions were removed", failed, exc_info=True)
            raise BrokerError(ErrorCode.KAFKA_STORAGE_ERROR, self._storage_error(failed, exc)) from exc

    def _remove_new_partitions(self, topic: Topic, first: int, count: int) -> None:
        for partition in topic.partitions[first:]:
            partition.log.close()
        self.partition_count -= len(topic.partitions) - first
        del topic.partitions[first:]
        for p in range(first, count):
            shutil.rmtree(self.log_dir / f"{topic.name}-{p}", ignore_errors=True)

    def _storage_error(self, partition: str, exc: Exception) -> str:
        text = f"Could not create partition {partition}: {exc}. Nothing was created."
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            text += (f" The broker is out of file descriptors (open-files limit {soft}, hard {hard}; "
                     f"{self.fd_cache.open_files} segment files open, log.open.files.max={self.fd_cache.capacity}).")
        return text

    def _commit_partitions(self, topic: Topic, first: int, count: int) -> None:
        """Record the new partitions in the topic file, then drop the pending-creation file; if the topic file
        cannot be written, the new partitions are removed and the error answered (KAFKA_STORAGE_ERROR)."""
        try:
            self._save()
        except OSError as exc:
            if first == 0:
                self.topics.pop(topic.name, None)
                self.topics_by_id.pop(topic.topic_id, None)
            self._remove_new_partitions(topic, first, count)
            raise BrokerError(ErrorCode.KAFKA_STORAGE_ERROR,
                              f"Could not record the partitions of {topic.name} in "
                              f"{self.log_dir / TOPICS_FILE}: {exc}. Nothing was created.") from exc
        finally:
            (self.log_dir / PENDING_FILE).unlink(missing_ok=True)

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
        write_json(self.log_dir / TOPICS_FILE, {"topics": {name: t.metadata() for name, t in self.topics.items()
                                                           if name not in self.replicated}})

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
        config = self.topic_config(overrides)
        self.check_partition_limit(num_partitions)
        return config

    def create_topic(
        self, name: str, num_partitions: int = -1, replication_factor: int = -1,
        overrides: dict[str, str] | None = None,
    ) -> Topic:
        overrides = dict(overrides or {})
        config = self.check_new_topic(name, num_partitions, replication_factor, overrides)
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        topic = Topic(name, uuid.uuid4(), overrides, config)
        self._open_new_partitions(topic, num_partitions)
        self._register(topic)
        self._commit_partitions(topic, 0, num_partitions)
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
        self.partition_count -= len(topic.partitions)
        log.info("deleted topic %s", name)

    def add_partitions(self, name: str, count: int) -> None:
        topic = self.get_topic(name)
        if count <= len(topic.partitions):
            raise BrokerError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic currently has {len(topic.partitions)} partitions, {count} would not be an increase.",
            )
        first = len(topic.partitions)
        self.check_partition_limit(count - first)
        self._open_new_partitions(topic, count)
        self._commit_partitions(topic, first, count)

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
        """Partition ``index`` of topic ``name``; UnknownTopicOrPartition when there is none, and in a cluster
        NOT_LEADER_OR_FOLLOWER when the cluster has it but this broker holds no replica of it (as Kafka answers)."""
        topic = self.topics.get(name)
        if topic is not None and 0 <= index < len(topic.partitions):
            partition = topic.partitions[index]
            if partition.index == index:
                return partition
        found = self.local_partition(name, index)
        if found is not None:
            return found
        if self.membership is not None and self.membership.has_partition(name, index):
            raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              f"this broker holds no replica of {name}-{index}")
        raise UnknownTopicOrPartition()

    def local_partition(self, name: str, index: int) -> Partition | None:
        """This broker's replica of ``name``-``index``, if it holds one."""
        topic = self.topics.get(name)
        if topic is None:
            return None
        parts = topic.partitions
        if 0 <= index < len(parts) and parts[index].index == index:
            return parts[index]
        i = bisect.bisect_left(parts, index, key=lambda p: p.index)
        return parts[i] if i < len(parts) and parts[i].index == index else None

    def partitions_of(self, name: str) -> int:
        """The topic's partitions: in a ZooKeeper cluster the cluster's (this broker may hold only some of them),
        else this broker's; 0 while it does not exist."""
        membership = self.membership
        if membership is not None:
            meta = membership.sync.topics.get(name)
            return 0 if meta is None else meta.partition_count
        topic = self.topics.get(name)
        return 0 if topic is None else len(topic.partitions)

    def has_partition(self, name: str, index: int) -> bool:
        """Whether the topic has partition ``index``: here, or (in a cluster) anywhere in it."""
        if self.local_partition(name, index) is not None:
            return True
        return self.membership is not None and self.membership.has_partition(name, index)

    # -- replicas of a ZooKeeper cluster's topics (broker/cluster/topic_sync.py) ----------------

    def open_replica(self, name: str, topic_id: uuid.UUID, overrides: dict[str, str], index: int) -> Partition:
        """Open (creating when new) this broker's log of ``name``-``index``, a replicated topic's partition."""
        topic = self.topics.get(name)
        if topic is None:
            try:
                config = self.defaults.with_overrides(overrides)
            except BrokerError as exc:  # written by another tool: the replica still serves, on the defaults
                log.error("topic %s: config overrides %s ignored: %s", name, overrides, exc.message)
                config = self.defaults
            topic = Topic(name, topic_id, dict(overrides), config)
            self.replicated.add(name)
            self._register(topic)
        self._claim_directory(name, topic_id, index)
        self._open_partition(topic, index)
        partition = self.local_partition(name, index)
        assert partition is not None
        return partition

    def _claim_directory(self, name: str, topic_id: uuid.UUID, index: int) -> None:
        """Mark ``name``-``index``'s directory with the topic id in Kafka's partition.metadata file; a directory
        left by an earlier topic of the same name (deleted and made again while this broker was away) is
        removed first, so its records are never served as the new topic's."""
        directory = self.log_dir / f"{name}-{index}"
        marker = directory / PARTITION_METADATA
        wanted = f"version: 0\ntopic_id: {kafka_uuid(topic_id)}\n"
        if marker.exists() and marker.read_text() != wanted:
            log.warning("%s was left by an earlier topic named %s (%r); removed", directory, name, marker.read_text())
            shutil.rmtree(directory)
        if not marker.exists():
            directory.mkdir(parents=True, exist_ok=True)
            marker.write_text(wanted)

    def drop_replica(self, name: str, index: int) -> None:
        """Close and delete this broker's log of ``name``-``index`` (its topic went, or it is no replica)."""
        topic = self.topics.get(name)
        partition = self.local_partition(name, index)
        if topic is None or partition is None:
            return
        topic.partitions.remove(partition)
        self.partition_count -= 1
        partition.log.delete()
        if not topic.partitions:
            self.topics.pop(name, None)
            self.topics_by_id.pop(topic.topic_id, None)
            self.replicated.discard(name)

    def counters(self, name: str) -> tuple[TopicCounters, ...]:
        """What a Produce or Fetch on topic ``name`` adds to: the all-topics counters, and the topic's own
        when it exists (an unknown name gets none, so clients cannot grow them)."""
        topic = self.topics.get(name)
        return (self.stats.all_topics,) if topic is None else (self.stats.all_topics, topic.stats)

    # -- long-poll fetch support ----------------------------------------------------------

    def notify_data(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Wake the fetches waiting on ``partitions`` (topic, index) — every fetch when None — after an append;
        a fetch carried on by the server's answers reads and is answered within this call."""
        self.data_waiters.notify(partitions)

    async def wait_for_data(self, timeout: float, partitions: Iterable[tuple[str, int]]) -> None:
        """Until the next append to one of ``partitions`` (notify_data) or ``timeout`` seconds."""
        await self.data_waiters.wait(timeout, partitions)
