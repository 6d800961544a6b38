"""What Produce, Fetch and ListOffsets ask of a partition's replica in a ZooKeeper cluster (apis/k00_produce.py,
k01_fetch.py, k02_list_offsets.py call these only when ``Partition.replica`` is set)."""

from __future__ import annotations

import asyncio
from typing import Any

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from ..topics.topic import Partition
from .replica import PartitionReplica

__all__ = ["consumer_bounds", "follower_bounds", "leader_refusal", "wait_for_isr"]


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


def consumer_bounds(partition: Partition, replica: PartitionReplica) -> tuple[int, int]:
    """A consumer's (high watermark, last stable offset) on the partition's leader: it reads below the high
    watermark only. BrokerError(NOT_LEADER_OR_FOLLOWER) on any other broker."""
    if not replica.is_leader:
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    hw = replica.high_watermark
    return hw, min(partition.last_stable_offset(), hw)


def follower_bounds(cluster: Any, partition: Partition, replica: PartitionReplica, follower: int,
                    fetch_offset: int) -> tuple[int, int]:
    """A follower's Fetch on the leader: its position moves (and with it the high watermark and the ISR);
    the (high watermark, last stable offset) it is told. BrokerError(NOT_LEADER_OR_FOLLOWER) when this broker
    does not lead the partition or ``follower`` is not one of its replicas."""
    manager = cluster.replication
    if manager is None or not replica.is_leader or follower not in replica.followers:
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    manager.follower_fetched(replica, follower, fetch_offset)
    hw = replica.high_watermark
    return hw, min(partition.last_stable_offset(), hw)
