"""One partition's replication state on this broker (``Partition.replica`` in a ZooKeeper cluster): its role,
and as leader the followers' positions, the ISR, the high watermark and the acks=all produces waiting on it.

The rules are Kafka's (Partition.scala, Replica.scala):

- A follower's position is the fetch offset of its last Fetch (its log end offset). It was *caught up* at the
  time of a fetch reaching the leader's log end, or at the time of the previous fetch when this one reaches
  the leader's log end as it was then (Replica.updateFetchState); it is out of sync once that is longer ago
  than ``replica.lag.time.max.ms`` and it is behind.
- The high watermark is the smallest log end offset of the ISR (the leader's own included); it never goes
  backwards. Consumers read below it; an acks=all produce is answered once it covers the records.
- A follower rejoins the ISR once its position reaches the high watermark and the start of this leader's
  epoch (Partition.isFollowerInSync).
"""

from __future__ import annotations

import asyncio
import enum
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode

from .state import PartitionState

if TYPE_CHECKING:
    from ..topics.topic import Partition

__all__ = ["FollowerPosition", "PartitionReplica", "Role"]


class Role(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    NONE = "none"  # neither: not a replica any more, or no leader elected (NO_LEADER)


class FollowerPosition:
    """What the leader knows of one follower (Kafka's Replica)."""

    __slots__ = ("last_caught_up_ms", "last_fetch_leader_end", "last_fetch_ms", "log_end_offset", "log_start_offset")

    def __init__(self, last_caught_up_ms: int) -> None:
        self.log_end_offset = -1  # unknown until it fetches
        self.log_start_offset = -1  # its log's start, as its last Fetch said (-1: unknown)
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_end = -1
        self.last_fetch_ms = 0

    def fetched(self, fetch_offset: int, leader_end: int, now_ms: int, log_start_offset: int = -1) -> None:
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms

    def caught_up(self, leader_end: int, now_ms: int, max_lag_ms: int) -> bool:
        return self.log_end_offset == leader_end or now_ms - self.last_caught_up_ms <= max_lag_ms


class PartitionReplica:
    """This broker's replica of ``topic``-``partition.index`` under ``state`` (the leadership it was handed)."""

    def __init__(self, topic: str, partition: Partition, broker_id: int, state: PartitionState,
                 high_watermark: int) -> None:
        self.topic = topic
        self.partition = partition
        self.broker_id = broker_id
        self.state = state
        self.role = Role.NONE
        plog = partition.log
        self.high_watermark = min(max(high_watermark, plog.log_start_offset), plog.log_end_offset)
        self.followers: dict[int, FollowerPosition] = {}
        self.epoch_start_offset = 0  # the leader's log end when it took this epoch
        self.isr_changing = False  # an ISR write is under way (one at a time)
        # the ISR that write proposes: until it lands, the high watermark waits for its members too (Kafka's maximal
        # ISR), so a follower taken in has every record acknowledged by the time another broker sees it in the ISR
        self.pending_isr: tuple[int, ...] = ()
        self.truncating = False  # follower: the log is cut to the leader's before the next fetch
        self.fetch_lag = 0  # follower: the leader's high watermark minus this log's end, as of the last fetch
        self._waiting: list[tuple[int, asyncio.Future[int]]] = []  # acks=all: (offset needed, answer)

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.partition.index

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    # -- role changes (ReplicaManager.apply) -------------------------------------------

    def become_leader(self, state: PartitionState, now_ms: int) -> None:
        """Lead under ``state``. A new epoch starts the followers afresh: ISR members count as caught up now,
        the others never (Partition.makeLeader); the same epoch (an ISR change) keeps what is known."""
        new_epoch = self.role is not Role.LEADER or state.leader_epoch != self.state.leader_epoch
        self.state = state
        self.role = Role.LEADER
        if new_epoch:
            self.epoch_start_offset = self.partition.log.log_end_offset
            self.followers = {r: FollowerPosition(now_ms if r in state.isr else 0)
                              for r in state.replicas if r != self.broker_id}
        else:
            for r in state.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerPosition(0)
            for r in [r for r in self.followers if r not in state.replicas]:
                del self.followers[r]  # reassigned away: no longer counted, nor taken into the ISR
        self.advance_high_watermark()

    def become_follower(self, state: PartitionState) -> None:
        self.state = state
        self.role = Role.FOLLOWER
        self.followers = {}
        self.fail_waiting(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    def stop(self, state: PartitionState) -> None:
        self.state = state
        self.role = Role.NONE
        self.followers = {}
        self.fail_waiting(ErrorCode.NOT_LEADER_OR_FOLLOWER)

    # -- leader ------------------------------------------------------------------------

    def follower_fetched(self, replica_id: int, fetch_offset: int, now_ms: int, log_start_offset: int = -1) -> None:
        """A follower's Fetch at ``fetch_offset`` (its log starting at ``log_start_offset``): its position moves, and
        the high watermark with it."""
        position = self.followers.get(replica_id)
        if position is None:  # not an assigned replica (Kafka answers it NOT_LEADER_OR_FOLLOWER before this)
            return
        position.fetched(fetch_offset, self.partition.log.log_end_offset, now_ms, log_start_offset)
        self.advance_high_watermark()

    def advance_high_watermark(self) -> bool:
        """Move the high watermark up to the smallest log end offset of the ISR (and of a proposed ISR's members
        while it is written); whether it moved. Consumers parked on the partition and acks=all produces it now
        covers are woken."""
        if self.role is not Role.LEADER:
            return False
        hw = self.partition.log.log_end_offset
        followers = self.followers
        for r in (self.state.isr if not self.pending_isr else (*self.state.isr, *self.pending_isr)):
            position = followers.get(r)
            if position is not None and position.log_end_offset < hw:
                hw = position.log_end_offset
        if hw <= self.high_watermark:
            return False
        self.high_watermark = hw
        if self._waiting:
            self._answer_covered()
        on_append = self.partition.on_append
        if on_append is not None:
            on_append()  # consumers parked on this partition may read more now
        return True

    def out_of_sync(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers that have not caught up within ``max_lag_ms`` (Partition.getOutOfSyncReplicas)."""
        end = self.partition.log.log_end_offset
        return [r for r in self.state.isr if r != self.broker_id and r in self.followers
                and not self.followers[r].caught_up(end, now_ms, max_lag_ms)]

    def ready_to_join(self) -> list[int]:
        """Followers outside the ISR whose position reached the high watermark and this epoch's start."""
        hw, start, isr = self.high_watermark, self.epoch_start_offset, self.state.isr
        return [r for r, p in self.followers.items()
                if r not in isr and p.log_end_offset >= hw and p.log_end_offset >= start]

    def min_insync(self) -> int:
        """min.insync.replicas, capped at the replica count (as the single node caps it at 1)."""
        return min(self.partition.log.config.min_insync_replicas, max(len(self.state.replicas), 1))

    # -- acks=all ----------------------------------------------------------------------

    def wait_for(self, offset: int) -> asyncio.Future[int]:
        """The error code to answer an acks=all produce whose records end before ``offset`` with, once the
        high watermark reaches it (Kafka's DelayedProduce): 0, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the
        ISR shrank below min.insync.replicas meanwhile; NOT_LEADER_OR_FOLLOWER when leadership moves first."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.role is not Role.LEADER:
            future.set_result(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        elif self.high_watermark >= offset:
            future.set_result(self._covered_code())
        else:
            self._waiting.append((offset, future))
        return future

    def _covered_code(self) -> int:
        return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if len(self.state.isr) < self.min_insync() else 0

    def _answer_covered(self) -> None:
        hw, code = self.high_watermark, self._covered_code()
        waiting = []
        for offset, future in self._waiting:
            if future.done():
                continue  # timed out
            if offset <= hw:
                future.set_result(code)
            else:
                waiting.append((offset, future))
        self._waiting = waiting

    def fail_waiting(self, code: int) -> None:
        waiting, self._waiting = self._waiting, []
        for _, future in waiting:
            if not future.done():
                future.set_result(code)

    # -- follower ----------------------------------------------------------------------

    def follow_high_watermark(self, leader_hw: int) -> None:
        """The leader's high watermark, as far as this log reaches. Consumers parked on this follower (fetching
        from the closest replica, KIP-392) are woken when it moves: they read below it."""
        hw = min(leader_hw, self.partition.log.log_end_offset)
        if hw > self.high_watermark:
            self.high_watermark = hw
            on_append = self.partition.on_append
            if on_append is not None:
                on_append()

    def truncated(self) -> None:
        """The log was cut: the high watermark cannot stay above its end."""
        self.high_watermark = min(self.high_watermark, self.partition.log.log_end_offset)
