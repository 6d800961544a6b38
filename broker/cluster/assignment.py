"""Replica assignment as Kafka's AdminUtils.assignReplicasToBrokers does it without racks, and the checks
of an assignment a client gives (CreateTopics' and CreatePartitions' ``assignments``).

Round-robin: partition p's first replica is broker ``(p + start) % n`` of the sorted live brokers, and its
other replicas follow at a shift that grows by one every n partitions, so leaders and followers both spread
evenly. ``start`` is random for a new topic (as Kafka's) and, when partitions are added, the position of
partition 0's first replica, so the new partitions carry on the topic's pattern.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, Sequence

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from .znodes import Assignment

__all__ = ["assign_replicas", "check_assignment", "check_replication_factor"]


def check_replication_factor(replication_factor: int, live: Collection[int]) -> None:
    """INVALID_REPLICATION_FACTOR in Kafka's words when ``live`` brokers cannot hold that many replicas."""
    if replication_factor <= 0:
        raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(live):
        raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                          f"Replication factor: {replication_factor} larger than available brokers: {len(live)}.")


def assign_replicas(partitions: int, replication_factor: int, live: Iterable[int], start_partition: int = 0,
                    start_index: int = -1) -> Assignment:
    """Replicas for partitions ``start_partition`` .. ``start_partition + partitions - 1`` over ``live``
    (checked first: check_replication_factor)."""
    brokers = sorted(live)
    check_replication_factor(replication_factor, brokers)
    n = len(brokers)
    start = start_index if start_index >= 0 else random.randrange(n)
    shift = start_index if start_index >= 0 else random.randrange(n)
    assignment: Assignment = {}
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (shift + j) % (n - 1)) % n])
        assignment[p] = tuple(replicas)
    return assignment


def check_assignment(assignment: Mapping[int, Sequence[int]], live: Collection[int], first_partition: int = 0,
                     replication_factor: int | None = None) -> Assignment:
    """A client's assignment checked as Kafka checks it (INVALID_REPLICA_ASSIGNMENT naming the problem):
    partitions numbered on from ``first_partition`` without gaps, no broker twice in a partition, every
    partition with the same number of replicas (``replication_factor`` when given), only live brokers."""
    if sorted(assignment) != list(range(first_partition, first_partition + len(assignment))):
        raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                          f"Partitions should be a consecutive 0-based integer sequence from {first_partition}, "
                          f"got {sorted(assignment)}.")
    checked: Assignment = {}
    for p, replicas in sorted(assignment.items()):
        if not replicas:
            raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Partition {p} has no replicas.")
        if len(set(replicas)) != len(replicas):
            raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"Duplicate replica assignment found: partition {p} has replicas {list(replicas)}.")
        if replication_factor is None:
            replication_factor = len(replicas)
        if len(replicas) != replication_factor:
            raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"All partitions should have the same number of replicas ({replication_factor}); "
                              f"partition {p} has {len(replicas)}.")
        unknown = sorted(set(replicas) - set(live))
        if unknown:
            raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))} "
                              f"(live brokers: {sorted(live)}).")
        checked[p] = tuple(replicas)
    return checked
