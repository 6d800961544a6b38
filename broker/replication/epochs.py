"""Leader epochs as the request handlers see them: the partition's current epoch and the checks of the epoch a
client or follower believes current (Kafka's Partition.checkCurrentLeaderEpoch, KIP-320).

A partition's leader epoch is the controller's (``partition.state.leader_epoch``) in a ZooKeeper cluster; on a
single node (``state`` None) this broker has led every partition since it was made: epoch 0, which Metadata
announces and every batch appended is stamped with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError

if TYPE_CHECKING:
    from ..topics.topic import Partition

__all__ = ["NO_EPOCH", "check_leader_epoch", "current_leader_epoch", "leads", "record_leader_epoch"]

NO_EPOCH = -1  # what a request sends when it does not know (or predates) leader epochs


def current_leader_epoch(partition: Partition) -> int:
    state = partition.state
    return 0 if state is None else state.leader_epoch


def check_leader_epoch(partition: Partition, requested: int) -> None:
    """Refuse a request made with another leader epoch than the partition's: an older one is
    FENCED_LEADER_EPOCH (the sender's metadata is stale), a newer one UNKNOWN_LEADER_EPOCH (this broker has
    not heard of it yet); -1 (no epoch; requests before Fetch v9, ListOffsets v4, OffsetForLeaderEpoch v2)
    passes."""
    if requested == NO_EPOCH:
        return
    state = partition.state
    current = 0 if state is None else state.leader_epoch
    if requested < current:
        raise BrokerError(ErrorCode.FENCED_LEADER_EPOCH,
                          f"leader epoch {requested} is older than the partition's current {current}")
    if requested > current:
        raise BrokerError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                          f"leader epoch {requested} is newer than the partition's current {current}")


def leads(partition: Partition, node_id: int) -> bool:
    """Whether this broker (``node_id``) is the partition's leader: always on a single node."""
    state = partition.state
    return state is None or state.leader == node_id


def record_leader_epoch(partition: Partition) -> None:
    """A leader's epoch starts at its log end when it takes over (Kafka's makeLeader): recorded at the latest
    when it is first asked about, so that the current epoch is known even before anything was appended in it
    (an empty partition, or a log written before batches carried epochs)."""
    epoch = current_leader_epoch(partition)
    cache = partition.log.leader_epochs
    if cache.latest < epoch:
        cache.assign(epoch, partition.log.log_end_offset)
