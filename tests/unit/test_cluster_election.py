"""The controller's decisions (broker/cluster/election.py) and Kafka's rack-unaware replica assignment
(broker/cluster/assignment.py), against the cases Kafka's own tests and controller define."""

from __future__ import annotations

import pytest

from headwater.broker.cluster.assignment import assign_replicas, check_assignment
from headwater.broker.cluster.election import decide
from headwater.broker.errors import BrokerError
from headwater.broker.replication.state import NO_LEADER, PartitionState
from headwater.kafka.errors import ErrorCode

R = (1, 2, 3)


def state(leader: int, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1, R, zk_version=4)


def test_new_partition_led_by_its_first_live_replica() -> None:
    assert decide(R, None, {2, 3}, 5, unclean=False, preferred=True) == PartitionState(2, 0, (2, 3), 5, R)
    assert decide(R, None, {4}, 5, unclean=False, preferred=True) is None  # no live replica: no state yet


def test_dead_leader_replaced_by_the_first_live_isr_member_in_assignment_order() -> None:
    new = decide(R, state(1, 3, (3, 1, 2)), {2, 3}, 7, unclean=False, preferred=True)
    assert new == PartitionState(2, 4, (3, 2), 7, R, zk_version=4)  # written over version 4


def test_no_live_isr_member_leaves_no_leader_and_keeps_the_last_in_sync() -> None:
    assert decide(R, state(1, 3, (1,)), {2, 3}, 7, unclean=False, preferred=True) == \
        PartitionState(NO_LEADER, 4, (1,), 7, R, zk_version=4)
    # nothing more to write until something changes
    assert decide(R, state(NO_LEADER, 4, (1,)), {2, 3}, 7, unclean=False, preferred=True) is None
    # the last in-sync replica returns: it leads, cleanly
    assert decide(R, state(NO_LEADER, 4, (1,)), {1, 2, 3}, 7, unclean=False, preferred=True) == \
        PartitionState(1, 5, (1,), 7, R, zk_version=4)


def test_unclean_election_takes_the_first_live_replica() -> None:
    assert decide(R, state(1, 3, (1,)), {2, 3}, 7, unclean=True, preferred=True) == \
        PartitionState(2, 4, (2,), 7, R, zk_version=4)


def test_dead_follower_leaves_the_isr_and_the_epoch_moves() -> None:
    assert decide(R, state(1, 3, (1, 2, 3)), {1, 3}, 7, unclean=False, preferred=True) == \
        PartitionState(1, 4, (1, 3), 7, R, zk_version=4)
    assert decide(R, state(1, 3, (1, 3)), {1, 3}, 7, unclean=False, preferred=True) is None


def test_preferred_replica_leads_again_once_in_the_isr() -> None:
    assert decide(R, state(2, 4, (2, 3)), {1, 2, 3}, 7, unclean=False, preferred=True) is None  # not in the ISR
    assert decide(R, state(2, 4, (2, 3, 1)), {1, 2, 3}, 7, unclean=False, preferred=True) == \
        PartitionState(1, 5, (2, 3, 1), 7, R, zk_version=4)
    assert decide(R, state(2, 4, (2, 3, 1)), {1, 2, 3}, 7, unclean=False, preferred=False) is None


def test_assignment_is_kafkas_round_robin() -> None:
    # AdminUtils' own test (fixed start index 0, five brokers, ten partitions, three replicas)
    assert assign_replicas(10, 3, range(5), start_index=0) == {
        0: (0, 1, 2), 1: (1, 2, 3), 2: (2, 3, 4), 3: (3, 4, 0), 4: (4, 0, 1),
        5: (0, 2, 3), 6: (1, 3, 4), 7: (2, 4, 0), 8: (3, 0, 1), 9: (4, 1, 2)}
    spread = assign_replicas(6, 2, [3, 1, 2])
    assert sorted(r[0] for r in spread.values()) == [1, 1, 2, 2, 3, 3]  # leaders spread evenly
    assert all(len(set(r)) == 2 for r in spread.values())


def test_replication_factor_and_manual_assignments_checked() -> None:
    with pytest.raises(BrokerError, match=r"Replication factor: 4 larger than available brokers: 3\.") as exc:
        assign_replicas(1, 4, [1, 2, 3])
    assert exc.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    for bad, words in [({0: [1, 1]}, "Duplicate replica"), ({0: [1], 2: [2]}, "consecutive"),
                       ({0: [1, 2], 1: [3]}, "same number of replicas"), ({0: [1, 9]}, "Unknown broker")]:
        with pytest.raises(BrokerError, match=words) as exc:
            check_assignment(bad, {1, 2, 3})
        assert exc.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
