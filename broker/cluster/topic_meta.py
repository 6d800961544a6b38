"""A replicated topic as ZooKeeper last said: its id, assignment (and reassignments under way), config overrides
and partition states.
Every broker keeps one per topic (broker/cluster/topic_sync.py), read by Metadata and by the controller."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from ..replication.state import PartitionState
from .znodes import Assignment

__all__ = ["TopicMeta"]


@dataclass
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    assignment: Assignment  # partition -> replicas, the preferred leader first
    overrides: dict[str, str]
    zk_version: int  # of /brokers/topics/<t>: CreatePartitions writes on it conditionally
    czxid: int  # the topic znode's creation: a state znode made before it is an earlier topic's of the same name
    states: dict[int, PartitionState] = field(default_factory=dict)  # partitions with a state znode yet
    # a reassignment's replicas being added and removed, by partition (only those being reassigned): the topic
    # znode's adding_replicas / removing_replicas (broker/cluster/reassignment.py)
    adding: Assignment = field(default_factory=dict)
    removing: Assignment = field(default_factory=dict)
    # partitions without a state or whose state has no leader (kept by topic_sync.py on every change, so a
    # wait for leaders does not look at every partition on every change)
    leaderless: set[int] = field(default_factory=set)
    # Metadata's partition entries as (the ClusterView they were built for, the entries), rebuilt on any change
    metadata_partitions: tuple[Any, Any] | None = field(default=None, repr=False)

    @property
    def partition_count(self) -> int:
        return len(self.assignment)

    @property
    def replication_factor(self) -> int:
        return len(self.assignment.get(0, ()))

    def reassigning(self) -> bool:
        """Some partition is being reassigned."""
        return bool(self.adding or self.removing)

    def has_leaders(self) -> bool:
        """Every partition has a state with a leader: what CreateTopics and CreatePartitions wait for."""
        return not self.leaderless
