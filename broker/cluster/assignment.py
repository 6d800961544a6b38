"""Replica assignment as Kafka's AdminUtils.assignReplicasToBrokers does it, with or without racks
(``broker.rack``), and the checks of an assignment a client gives (CreateTopics' and CreatePartitions'
``assignments``).

Without racks, round-robin: partition p's first replica is broker ``(p + start) % n`` of the sorted live
brokers, and its other replicas follow at a shift that grows by one every n partitions, so leaders and
followers both spread evenly. ``start`` is random for a new topic (as Kafka's) and, when partitions are added,
the position of partition 0's first replica, so the new partitions carry on the topic's pattern.

With racks (every live broker has one), the same round-robin runs over the *rack-alternated* broker list (the
racks sorted, each rack's brokers sorted, taken one per rack in turn: racks a:{1,2} b:{3} c:{4} give 1, 3, 4,
2), and a follower is skipped while its rack already holds a replica of the partition and some rack holds
none, or its broker does and some broker holds none (AdminUtils.assignReplicasToBrokersRackAware). So a
partition's replicas cover min(replication factor, racks) racks. Some brokers with a rack and some without is
refused, as Kafka refuses it.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError
from .znodes import Assignment

if TYPE_CHECKING:
    from .znodes import RegisteredBroker

__all__ = ["assign_replicas", "broker_racks", "check_assignment", "check_replication_factor",
           "rack_alternated"]

# Kafka's AdminOperationException text (not an ApiException: a broker answers it UNKNOWN_SERVER_ERROR)
MIXED_RACKS = "Not all brokers have rack information for replica rack aware assignment."


def check_replication_factor(replication_factor: int, live: Collection[int]) -> None:
    """INVALID_REPLICATION_FACTOR in Kafka's words when ``live`` brokers cannot hold that many replicas."""
    if replication_factor <= 0:
        raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(live):
        raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR,
                          f"Replication factor: {replication_factor} larger than available brokers: {len(live)}.")


def broker_racks(brokers: Mapping[int, RegisteredBroker]) -> dict[int, str | None]:
    """Each live broker's ``broker.rack`` (None: none), as its registration says: what assign_replicas takes."""
    return {broker_id: registered.rack for broker_id, registered in brokers.items()}


def assign_replicas(partitions: int, replication_factor: int, live: Iterable[int] | Mapping[int, str | None],
                    start_partition: int = 0, start_index: int = -1) -> Assignment:
    """Replicas for partitions ``start_partition`` .. ``start_partition + partitions - 1`` over the ``live``
    brokers (checked first: check_replication_factor). ``live`` as a mapping carries each broker's rack: rack-aware
    when every broker has one, BrokerError(UNKNOWN_SERVER_ERROR) when only some have (Kafka's
    AdminOperationException)."""
    racks: Mapping[int, str | None] = live if isinstance(live, Mapping) else dict.fromkeys(live)
    brokers = sorted(racks)
    check_replication_factor(replication_factor, brokers)
    with_rack = [b for b in brokers if racks[b] is not None]
    if not with_rack:
        return _round_robin(partitions, replication_factor, brokers, start_partition, start_index)
    if len(with_rack) < len(brokers):
        without = [b for b in brokers if racks[b] is None]
        raise BrokerError(ErrorCode.UNKNOWN_SERVER_ERROR, f"{MIXED_RACKS} Brokers without broker.rack: {without}; "
                                                          f"with one: {with_rack}.")
    return _rack_aware(partitions, replication_factor, {b: str(racks[b]) for b in brokers}, start_partition,
                       start_index)


def _first_replicas(partitions: int, n: int, start_partition: int, start_index: int) -> Iterator[tuple[int, int, int]]:
    """(partition, its first replica's index in the broker list, the followers' shift) of each partition: the
    first replicas round-robin from ``start_index``, the shift one more every ``n`` partitions (both random for a
    new topic)."""
    start, shift = (start_index, start_index) if start_index >= 0 else (random.randrange(n), random.randrange(n))
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        yield p, (p + start) % n, shift


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    """AdminUtils.replicaIndex: the j-th follower's index after the first replica's, at ``shift``."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _round_robin(partitions: int, replication_factor: int, brokers: list[int], start_partition: int,
                 start_index: int) -> Assignment:
    n = len(brokers)
    return {p: (brokers[first], *(brokers[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1)))
            for p, first, shift in _first_replicas(partitions, n, start_partition, start_index)}


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: one broker of each rack in turn (racks and brokers sorted)."""
    by_rack: dict[str, list[int]] = {}
    for broker in sorted(racks):
        by_rack.setdefault(racks[broker], []).append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns))) for column in columns if i < len(column)]


def _rack_aware(partitions: int, replication_factor: int, racks: Mapping[int, str], start_partition: int,
                start_index: int) -> Assignment:
    arranged = rack_alternated(racks)
    n, rack_count = len(arranged), len(set(racks.values()))
    assignment: Assignment = {}
    for p, first, shift in _first_replicas(partitions, n, start_partition, start_index):
        leader = arranged[first]
        replicas = [leader]
        racks_used, brokers_used = {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, k, n)]
                rack = racks[broker]
                k += 1
                # skip a broker whose rack has a replica while some rack has none, or that has one while
                # some broker has none
                if (rack not in racks_used or len(racks_used) == rack_count) and \
                        (broker not in brokers_used or len(brokers_used) == n):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
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
