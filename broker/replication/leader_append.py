"""A coordinator's own records in an internal topic partition it leads, and its wait for the ISR to have them.

Kafka's coordinators append to ``__transaction_state`` (and ``__consumer_offsets``) through the ReplicaManager
as a leader with acks=-1: the batch is stamped with the partition's leader epoch, and the coordinator answers
only once the high watermark covers it. On a single node (``Partition.replica`` None) the append is the whole
of it.
"""

from __future__ import annotations

from typing import Any

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import parse_header

from ..errors import BrokerError
from ..topics.topic import Partition
from .epochs import current_leader_epoch
from .produce import wait_for_isr

__all__ = ["append_as_leader", "isr_has"]


def append_as_leader(partition: Partition, batch: bytearray) -> int:
    """Append ``batch`` (waking the fetches parked on the partition); the offset after it.
    BrokerError(NOT_LEADER_OR_FOLLOWER) when this broker no longer leads the partition (its leadership moved
    while the caller waited)."""
    replica = partition.replica
    if replica is None:  # one node
        partition.log.append(batch, parse_header(batch))
        return partition.log.log_end_offset
    if not replica.is_leader:
        raise BrokerError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "this broker no longer leads the partition")
    partition.log.append(batch, parse_header(batch), current_leader_epoch(partition))
    replica.advance_high_watermark()  # an ISR of the leader alone has it now
    if partition.on_append is not None:
        # the followers' fetches parked on the partition take the batch now, not after their
        # replica.fetch.wait.max.ms: the caller's answer waits for them
        partition.on_append()
    return partition.log.log_end_offset


async def isr_has(partition: Partition, end_offset: int, timeout_ms: int) -> int:
    """Once the partition's ISR holds its log up to ``end_offset`` (the acks=all wait of Produce): 0, or the
    code the wait ended with (NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT).
    At once on one node."""
    if partition.replica is None or end_offset < 0:
        return 0
    entry: dict[str, Any] = {"error_code": 0}
    await wait_for_isr([(entry, partition.replica.wait_for(end_offset))], timeout_ms)
    return int(entry["error_code"])
