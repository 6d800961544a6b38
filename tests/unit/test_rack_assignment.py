"""Rack-aware replica assignment (``broker.rack``), as Kafka's AdminUtils.assignReplicasToBrokersRackAware."""

from __future__ import annotations

from collections import Counter

import pytest

from headwater.broker.cluster.assignment import assign_replicas, rack_alternated
from headwater.broker.errors import BrokerError
from headwater.kafka.errors import ErrorCode

KAFKA_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_rack_alternated_list_is_kafkas() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers and getRackAlternatedBrokerList's
    # own example
    assert rack_alternated(KAFKA_RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated({b: r for b, r in KAFKA_RACKS.items() if b != 5}) == [0, 3, 1, 4, 2]
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_assignment_is_kafkas() -> None:
    # the same test: seven partitions, three replicas, fixed start index 0; the seventh shifts its followers
    assert assign_replicas(7, 3, KAFKA_RACKS, start_index=0) == {
        0: (0, 3, 1), 1: (3, 1, 5), 2: (1, 5, 4), 3: (5, 4, 2), 4: (4, 2, 0), 5: (2, 0, 3), 6: (0, 4, 2)}


@pytest.mark.parametrize("replication_factor", [1, 2, 3, 4, 6])
def test_replicas_cover_as_many_racks_as_they_can(replication_factor: int) -> None:
    uneven = {1: "a", 2: "a", 3: "b", 4: "c", 5: "c", 6: "c"}
    for _ in range(20):  # random start and shift each time
        assignment = assign_replicas(12, replication_factor, uneven)
        assert sorted(assignment) == list(range(12))
        for replicas in assignment.values():
            assert len(replicas) == len(set(replicas)) == replication_factor
            assert len({uneven[b] for b in replicas}) == min(replication_factor, 3)
    # racks of one broker each: every broker leads as many partitions as the others
    even = {1: "a", 2: "b", 3: "c"}
    leaders = Counter(r[0] for r in assign_replicas(6, 3, even).values())
    assert leaders == {1: 2, 2: 2, 3: 2}


def test_added_partitions_carry_on_with_racks() -> None:
    first = assign_replicas(3, 2, KAFKA_RACKS, start_index=1)
    more = assign_replicas(4, 2, KAFKA_RACKS, start_partition=3, start_index=1)
    assert sorted(more) == [3, 4, 5, 6]
    assert {**first, **more} == assign_replicas(7, 2, KAFKA_RACKS, start_index=1)


def test_no_racks_is_the_round_robin_and_some_racks_are_refused() -> None:
    assert assign_replicas(5, 2, dict.fromkeys([1, 2, 3]), start_index=0) == assign_replicas(5, 2, [1, 2, 3],
                                                                                            start_index=0)
    with pytest.raises(BrokerError) as exc:
        assign_replicas(3, 2, {1: "a", 2: None, 3: "b"})
    assert exc.value.code == ErrorCode.UNKNOWN_SERVER_ERROR  # Kafka's AdminOperationException, not an ApiException
    assert exc.value.message == ("Not all brokers have rack information for replica rack aware assignment. "
                                 "Brokers without broker.rack: [2]; with one: [1, 3].")
    with pytest.raises(BrokerError, match=r"Replication factor: 4 larger than available brokers: 3\.") as exc:
        assign_replicas(1, 4, {1: "a", 2: "b", 3: "c"})
    assert exc.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
