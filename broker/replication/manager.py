"""This broker's part in replication (Kafka's ReplicaManager): the partitions it leads, follows or neither,
as the cluster code hands their state over (``apply``); one fetcher per leader broker for those it follows;
the ISR kept by the leaders (shrunk after ``replica.lag.time.max.ms``, grown when a follower catches up,
written through an ``IsrWriter``); the high watermarks checkpointed in ``replication-offset-checkpoint``.

Only a broker with ``zookeeper.connect`` has one (``Cluster.replication``); a single node never builds it, and
its produce and fetch paths test ``Partition.replica`` (None there) and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from bisect import bisect_left
from typing import TYPE_CHECKING, Protocol

from headwater.kafka.errors import ErrorCode

from ..metrics.stats import ReplicationStats
from ..security.inter_broker import inter_broker_listener, inter_broker_security
from ..server.background import start_background
from .checkpoint import HIGH_WATERMARK_FILE, read_checkpoint, write_checkpoint
from .fetch_sessions import FetchSessionCache
from .fetcher import LeaderFetcher
from .leadership import LeadershipListener
from .replica import PartitionReplica, Role
from .state import NO_LEADER, IsrWriter, PartitionState

if TYPE_CHECKING:
    from pathlib import Path

    from ..cluster.membership import ClusterMembership
    from ..config.broker_config import BrokerConfig
    from ..log.fd_cache import DescriptorCache
    from ..topics.topic import Partition, Topic


class ReplicaHost(Protocol):
    """What the manager needs of the broker's topic registry (topics/cluster.py's Cluster, which holds the
    manager: named by this protocol, not imported, so the two modules do not import each other)."""

    topics: dict[str, Topic]
    log_dir: Path
    fd_cache: DescriptorCache

    @property
    def membership(self) -> ClusterMembership | None: ...

__all__ = ["ReplicaManager", "inter_broker_listener", "topic_of"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def topic_of(partition: Partition) -> str:
    """The partition's topic: its log directory is ``<topic>-<index>`` (topics/cluster.py)."""
    return partition.log.directory.name.rpartition("-")[0]


class ReplicaManager:
    def __init__(self, cluster: ReplicaHost, config: BrokerConfig, isr_writer: IsrWriter | None = None) -> None:
        self.cluster = cluster
        self.config = config
        self.broker_id = config.node_id
        self.isr_writer = isr_writer  # None: the membership's (ZooKeeper), looked up when an ISR changes
        self.listener = inter_broker_listener(config)
        inter_broker_security(config)  # ConfigError now (nothing started) for settings the fetchers cannot use
        self.replicas: dict[tuple[str, int], PartitionReplica] = {}
        self.fetchers: dict[int, LeaderFetcher] = {}
        self._checkpoint = cluster.log_dir / HIGH_WATERMARK_FILE
        self._saved = read_checkpoint(self._checkpoint)
        self._tasks: list[asyncio.Task[None]] = []
        self._isr_writes: set[asyncio.Task[None]] = set()
        self.listeners: list[LeadershipListener] = []  # told when this broker starts or stops leading a partition
        # the followers' fetch sessions with this broker (KIP-227)
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.stats = ReplicationStats()  # ISR shrinks, expands and failed ISR writes (the metrics read them)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        """The ISR expiration and checkpoint tasks (on the running loop)."""
        self._tasks = [start_background("ISR expiration", self._expire_isr, log),
                       start_background("high watermark checkpoint", self._checkpoint_loop, log)]

    async def stop(self) -> None:
        for task in [*self._tasks, *self._isr_writes]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._isr_writes, return_exceptions=True)
        for fetcher in self.fetchers.values():
            await fetcher.stop()
        self.fetchers.clear()
        for replica in self.replicas.values():
            replica.fail_waiting(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        self.write_checkpoint()

    # -- roles ---------------------------------------------------------------------------

    async def apply(self, partition: Partition, state: PartitionState) -> None:
        """Make this broker leader, follower or neither of ``partition`` as ``state`` says."""
        topic = topic_of(partition)
        key = (topic, partition.index)
        replica = partition.replica
        if replica is None:
            replica = PartitionReplica(topic, partition, self.broker_id, state, self._saved.get(key, 0))
            partition.replica = replica
        former = self.replicas.get(key)
        if former is not None and former is not replica:  # the partition was removed and made again
            self.forget(former.partition)
        self.replicas[key] = replica
        partition.state = state
        was_leader = replica.role is Role.LEADER
        try:
            self._take_role(replica, state)
        finally:
            if was_leader != (replica.role is Role.LEADER):
                self._tell(replica)

    def _take_role(self, replica: PartitionReplica, state: PartitionState) -> None:
        partition, topic = replica.partition, replica.topic
        if state.leader == self.broker_id:
            self._unfollow(replica)
            if replica.role is not Role.LEADER or replica.state.leader_epoch != state.leader_epoch:
                partition.log.leader_epochs.assign(state.leader_epoch, partition.log.log_end_offset)
                log.info("%s-%d: leader at epoch %d, ISR %s, from offset %d (high watermark %d)", topic,
                         partition.index, state.leader_epoch, list(state.isr), partition.log.log_end_offset,
                         replica.high_watermark)
            replica.become_leader(state, _now_ms())
        elif state.leader != NO_LEADER and self.broker_id in state.replicas:
            if replica.role is Role.FOLLOWER and replica.state.leader == state.leader and \
                    replica.state.leader_epoch == state.leader_epoch:
                replica.state = state  # the same leadership (an ISR change): keep fetching
                return
            self._unfollow(replica)
            replica.become_follower(state)
            self._fetcher(state.leader).add(replica)
            log.info("%s-%d: follower of broker %d at epoch %d", topic, partition.index, state.leader,
                     state.leader_epoch)
        else:
            self._unfollow(replica)
            replica.stop(state)

    def forget(self, partition: Partition) -> None:
        """``partition`` is gone from this broker (its topic deleted, or it was moved away)."""
        replica = partition.replica
        if replica is not None:
            was_leader = replica.role is Role.LEADER
            self._unfollow(replica)
            replica.stop(replica.state)
            self.replicas.pop(replica.key, None)
            if was_leader:
                self._tell(replica)

    def _tell(self, replica: PartitionReplica) -> None:
        """The listeners, of a change of this broker's leadership of ``replica``'s partition (one failing is
        logged; the others are told still)."""
        leads = replica.role is Role.LEADER
        for listener in self.listeners:
            try:
                if leads:
                    listener.became_leader(replica.topic, replica.partition)
                else:
                    listener.resigned(replica.topic, replica.partition)
            except Exception:
                log.exception("%s-%d: a leadership listener failed", replica.topic, replica.partition.index)

    def _fetcher(self, leader: int) -> LeaderFetcher:
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = LeaderFetcher(leader, self.broker_id, self.config, self._address,
                                                           self.cluster.fd_cache)
        return fetcher

    def _unfollow(self, replica: PartitionReplica) -> None:
        if replica.role is Role.FOLLOWER:
            fetcher = self.fetchers.get(replica.state.leader)
            if fetcher is not None:
                fetcher.remove(replica.key)

    def _address(self, broker: int) -> tuple[str, int] | None:
        membership = self.cluster.membership
        registered = membership.view.brokers.get(broker) if membership is not None else None
        return registered.endpoints.get(self.listener) if registered is not None else None

    # -- the leader's side of a follower fetch -------------------------------------------

    def follower_fetched(self, replica: PartitionReplica, replica_id: int, fetch_offset: int,
                         log_start_offset: int = -1) -> None:
        """A follower's Fetch reached the leader: its position, the high watermark, and the ISR when it has
        caught up."""
        replica.follower_fetched(replica_id, fetch_offset, _now_ms(), log_start_offset)
        if replica_id not in replica.state.isr and not replica.isr_changing:
            joining = replica.ready_to_join()
            if joining:
                self._write_isr(replica, (*replica.state.isr, *sorted(joining)))

    # -- the ISR -------------------------------------------------------------------------

    async def _expire_isr(self) -> None:
        """Kafka's isr-expiration task, every half of replica.lag.time.max.ms."""
        max_lag = self.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max_lag / 2000)
            now = _now_ms()
            for replica in list(self.replicas.values()):
                if not self._hosted(replica):  # its topic was deleted meanwhile
                    self.forget(replica.partition)
                    continue
                if replica.role is not Role.LEADER or replica.isr_changing:
                    continue
                lagging = replica.out_of_sync(now, max_lag)
                if lagging:
                    log.info("%s-%d: followers %s have not caught up within replica.lag.time.max.ms=%d; shrinking "
                             "the ISR", replica.topic, replica.partition.index, lagging, max_lag)
                    self._write_isr(replica, tuple(r for r in replica.state.isr if r not in lagging))

    def _write_isr(self, replica: PartitionReplica, isr: tuple[int, ...]) -> None:
        replica.isr_changing = True
        replica.pending_isr = isr
        task = asyncio.get_running_loop().create_task(self._isr_write(replica, isr))
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    async def _isr_write(self, replica: PartitionReplica, isr: tuple[int, ...]) -> None:
        state = replica.state
        writer = self.isr_writer or getattr(self.cluster.membership, "isr_writer", None)
        try:
            if writer is None:
                self.stats.failed_isr_updates += 1
                log.error("%s-%d: the ISR cannot change to %s: no ISR writer (ZooKeeper) is available",
                          replica.topic, replica.partition.index, list(isr))
                return
            written = await writer.write_isr(replica.topic, replica.partition.index, state, isr)
        except asyncio.CancelledError:
            raise
        except Exception:
            self.stats.failed_isr_updates += 1
            log.exception("%s-%d: writing ISR %s failed; tried again at the next change", replica.topic,
                          replica.partition.index, list(isr))
            return
        finally:
            replica.isr_changing = False
            replica.pending_isr = ()
        if written is None:
            self.stats.failed_isr_updates += 1
            log.info("%s-%d: ISR change to %s not written: the partition's state changed first (its new state "
                     "is on its way)", replica.topic, replica.partition.index, list(isr))
            return
        self.stats.isr_written(state.isr, written.isr)
        log.info("%s-%d: ISR %s -> %s", replica.topic, replica.partition.index, list(state.isr), list(written.isr))
        if replica.role is Role.LEADER and replica.state.leader_epoch == written.leader_epoch:
            replica.partition.state = written
            replica.become_leader(written, _now_ms())  # the same epoch: positions kept, the HW may move

    # -- high watermark checkpoint -------------------------------------------------------

    async def _checkpoint_loop(self) -> None:
        interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await asyncio.to_thread(write_checkpoint, self._checkpoint, self._high_watermarks())

    def _high_watermarks(self) -> dict[tuple[str, int], int]:
        topics = self.cluster.topics
        offsets = {k: o for k, o in self._saved.items() if k[0] in topics}
        for key, replica in self.replicas.items():
            if self._hosted(replica):
                offsets[key] = replica.high_watermark
            else:  # deleted since
                offsets.pop(key, None)
        return offsets

    def _hosted(self, replica: PartitionReplica) -> bool:
        """Whether ``replica``'s partition is still this broker's (not deleted, nor deleted and made again)."""
        topic = self.cluster.topics.get(replica.topic)
        if topic is None:
            return False
        parts = topic.partitions  # by index (a cluster's broker may hold only some of them)
        i = bisect_left(parts, replica.partition.index, key=lambda p: p.index)
        return i < len(parts) and parts[i] is replica.partition

    def write_checkpoint(self) -> None:
        with contextlib.suppress(FileNotFoundError):  # the log directory removed under a stopping broker
            write_checkpoint(self._checkpoint, self._high_watermarks())
