"""What Produce, Fetch and ListOffsets ask of a partition's replica in a ZooKeeper cluster (apis/k00_produce.py,
k01_fetch.py, k02_list_offsets.py call these only when ``Partition.replica`` is set), and which replica a consumer
should fetch from (KIP-392: replica_selector.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from ..topics.topic import Partition
from .replica import PartitionReplica, Role
from .replica_selector import ReplicaView, select

__all__ = ["consumer_bounds", "follower_bounds", "leader_refusal", "preferred_read_replica", "wait_for_isr"]

NO_PREFERRED_REPLICA = -1  # what a Fetch answer's preferred_read_replica says when the consumer should stay


def leader_refusal(replica: PartitionReplica, acks: int) -> int:
    """Why this broker may not append to the partition now (0: it may): NOT_LEADER_OR_FOLLOWER on a broker
    that does not lead it; for acks=-1, NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas
    (Kafka checks this before the append: Partition.appendRecordsToLeader)."""
    if not replica.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if acks == -1 and len(replica.state.isr) < replica.min_insync():
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return 0


async def wait_for_isr(waits: list[tuple[dict[str, Any], asyncio.Future[int]]], timeout_ms: int) -> None:
    """Hold an acks=-1 answer until every partition's ISR has its records (Kafka's DelayedProduce): each entry
    gets the code its wait ended with, or REQUEST_TIMED_OUT after ``timeout_ms``."""
    futures = [future for _, future in waits]
    if not all(f.done() for f in futures):
        await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    for entry, future in waits:
        if future.done():
            code = future.result()
        else:
            future.cancel()
            code = ErrorCode.REQUEST_TIMED_OUT
        if code:
            entry["error_code"] = code


def consumer_bounds(partition: Partition, replica: PartitionReplica, on_follower: bool = False) -> tuple[int, int]:
    """A consumer's (high watermark, last stable offset) on the partition's leader, or with ``on_follower`` (a
    Fetch v11+, KIP-392) on a follower too, whose high watermark is the leader's as far as its log reaches: it
    reads below the high watermark only. BrokerError(NOT_LEADER_OR_FOLLOWER) on any other broker."""
    if not (replica.is_leader or (on_follower and replica.role is Role.FOLLOWER)):
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    hw = replica.high_watermark
    return hw, min(partition.last_stable_offset(), hw)


def follower_bounds(cluster: Any, partition: Partition, replica: PartitionReplica, follower: int,
                    fetch_offset: int, log_start_offset: int = -1) -> tuple[int, int]:
    """A follower's Fetch on the leader: its position moves (and with it the high watermark and the ISR);
    the (high watermark, last stable offset) it is told. BrokerError(NOT_LEADER_OR_FOLLOWER) when this broker
    does not lead the partition or ``follower`` is not one of its replicas."""
    manager = cluster.replication
    if manager is None or not replica.is_leader or follower not in replica.followers:
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    manager.follower_fetched(replica, follower, fetch_offset, log_start_offset)
    hw = replica.high_watermark
    return hw, min(partition.last_stable_offset(), hw)


def preferred_read_replica(cluster: Any, replica: PartitionReplica, client_rack: str, fetch_offset: int,
                           listener: str) -> int:
    """The broker a consumer fetching at ``fetch_offset`` on the connection's ``listener`` should fetch from
    instead of this leader, as ``replica.selector.class`` chooses (ReplicaManager.findPreferredReadReplica);
    NO_PREFERRED_REPLICA for this broker itself (or no selector, or not the leader). Offered: the in-sync followers
    that hold the offset (their log end at or past it, their log start at or before it) and are live on that
    listener, so the consumer can reach them."""
    selector = cluster.config.replica_selector_class
    membership = cluster.membership
    if selector is None or membership is None or not replica.is_leader:
        return NO_PREFERRED_REPLICA
    brokers = membership.view.brokers
    now_ms = time.time_ns() // 1_000_000
    isr = replica.state.isr
    followers = []
    for broker_id, position in replica.followers.items():
        registered = brokers.get(broker_id)
        if broker_id in isr and registered is not None and listener in registered.endpoints and \
                position.log_start_offset <= fetch_offset <= position.log_end_offset:
            followers.append(ReplicaView(broker_id, registered.rack, position.log_end_offset,
                                         now_ms - position.last_caught_up_ms))
    leader = ReplicaView(replica.broker_id, cluster.config.broker_rack, replica.partition.log.log_end_offset, 0)
    chosen = select(selector, client_rack, leader, followers)
    return NO_PREFERRED_REPLICA if chosen is leader else chosen.broker_id
