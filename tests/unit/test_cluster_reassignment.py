"""Replica reassignment's decisions (broker/cluster/reassignment.py), the elections asked for
(broker/cluster/election.py's elect_preferred / elect_unclean) and their znodes' JSON (broker/cluster/znodes.py),
against Kafka's ReplicaAssignment, validateReplicas, election strategies and ZkData."""

from __future__ import annotations

import json
import uuid

import pytest

from headwater.broker.cluster.election import decide, elect_preferred, elect_unclean
from headwater.broker.cluster.reassignment import ReplicaAssignment, check_target, next_state
from headwater.broker.cluster.znodes import (
    parse_preferred_replica_election,
    parse_reassign_partitions,
    parse_reassigning,
    parse_topic,
    preferred_replica_election_data,
    reassign_partitions_data,
    topic_data,
)
from headwater.broker.errors import BrokerError
from headwater.broker.replication.state import NO_LEADER, PartitionState
from headwater.kafka.errors import ErrorCode


def state(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...], epoch: int = 3) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1, replicas, zk_version=6)


def test_reassign_to_is_kafkas_target_first_then_the_original_replicas() -> None:
    # KafkaController's own example: ORS {1,2,3}, TRS {4,5,6}
    moving = ReplicaAssignment((1, 2, 3)).reassign_to((4, 5, 6))
    assert moving == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert moving.origin == (1, 2, 3) and moving.target == (4, 5, 6) and moving.reassigning
    # overlapping: [1,2,3] -> [3,4,2] is encoded [3,4,2,1] (its original order cannot come back)
    overlap = ReplicaAssignment((1, 2, 3)).reassign_to((3, 4, 2))
    assert overlap == ReplicaAssignment((3, 4, 2, 1), (4,), (1,))
    # replaced while under way: the original replicas stay those before the first reassignment
    assert moving.reassign_to((1, 5)) == ReplicaAssignment((1, 5, 2, 3), (5,), (2, 3))
    # cancelled: back to the original replicas, nothing left to move
    assert moving.reassign_to(moving.origin) == ReplicaAssignment((1, 2, 3))
    assert not ReplicaAssignment((1, 2)).reassign_to((1, 2)).reassigning


def test_completion_needs_every_target_replica_in_the_isr() -> None:
    moving = ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert not moving.complete_in((1, 2))
    assert moving.complete_in((1, 2, 3)) and moving.completed() == ReplicaAssignment((2, 3))


@pytest.mark.parametrize(("replicas", "code", "words"), [
    ((), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."),
    ((2, 2), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica ids in partition reassignment replica list"),
    ((2, -1), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Invalid broker id in replica list: [2, -1]"),
    ((2, 4), ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica assignment has brokers that are not alive. "
                                                   "Replica list: [4], live broker list: [1, 2, 3]"),
])
def test_targets_checked_as_kafkas_validate_replicas(replicas: tuple[int, ...], code: int, words: str) -> None:
    with pytest.raises(BrokerError) as raised:
        check_target(ReplicaAssignment((1, 2)), replicas, {1, 2, 3})
    assert raised.value.code == code and words in raised.value.message


def test_dead_original_replicas_may_stay_and_the_factor_change_may_be_forbidden() -> None:
    check_target(ReplicaAssignment((1, 4)), (4, 2), {1, 2, 3})  # 4 is not live, but it is not being added
    with pytest.raises(BrokerError) as raised:
        check_target(ReplicaAssignment((1, 2)), (1, 2, 3), {1, 2, 3}, allow_replication_factor_change=False)
    assert raised.value.code == ErrorCode.INVALID_REPLICATION_FACTOR
    check_target(ReplicaAssignment((1, 2)), (2, 3), {1, 2, 3}, allow_replication_factor_change=False)


def test_start_raises_the_epoch_and_keeps_leader_and_isr() -> None:
    current = ReplicaAssignment((1, 2))
    new = current.reassign_to((2, 3))
    assert next_state(state(1, (1, 2), (1, 2)), current, new, {1, 2, 3}, 9) == \
        PartitionState(1, 4, (1, 2), 9, (2, 3, 1), zk_version=6)


def test_completion_moves_the_leader_into_the_target_and_drops_the_removed_from_the_isr() -> None:
    current = ReplicaAssignment((2, 3, 1), (3,), (1,))
    done = current.completed()
    assert next_state(state(1, (1, 2, 3), (2, 3, 1)), current, done, {1, 2, 3}, 9) == \
        PartitionState(2, 4, (2, 3), 9, (2, 3), zk_version=6)
    # a leader inside the target stays
    assert next_state(state(3, (1, 2, 3), (2, 3, 1)), current, done, {1, 2, 3}, 9) == \
        PartitionState(3, 4, (2, 3), 9, (2, 3), zk_version=6)
    # a leader inside the target but not live gives way
    assert next_state(state(3, (1, 2, 3), (2, 3, 1)), current, done, {1, 2}, 9).leader == 2  # type: ignore[union-attr]
    # no target replica live and in sync: the completion waits
    assert next_state(state(1, (1, 2, 3), (2, 3, 1)), current, done, {1}, 9) is None


def test_cancel_drops_the_added_replicas_and_a_leader_among_them() -> None:
    current = ReplicaAssignment((3, 1, 2), (3,), (2,))
    back = current.reassign_to(current.origin)
    assert back == ReplicaAssignment((1, 2))
    assert next_state(state(3, (1, 2, 3), (3, 1, 2)), current, back, {1, 2, 3}, 9) == \
        PartitionState(1, 4, (1, 2), 9, (1, 2), zk_version=6)


def test_an_isr_member_reassigned_away_leaves_the_isr() -> None:
    # its leader took it in again before it learned of the move: the controller takes it out
    assert decide((2, 3), state(2, (3, 2, 1), (2, 3)), {1, 2, 3}, 9, unclean=False, preferred=False) == \
        PartitionState(2, 4, (3, 2), 9, (2, 3), zk_version=6)


def test_preferred_election_needs_the_preferred_replica_live_and_in_sync() -> None:
    replicas = (1, 2, 3)
    assert elect_preferred(replicas, state(2, (2, 3, 1), replicas), {1, 2, 3}, 9) == \
        PartitionState(1, 4, (2, 3, 1), 9, replicas, zk_version=6)
    assert elect_preferred(replicas, state(2, (2, 3), replicas), {1, 2, 3}, 9) is None
    assert elect_preferred(replicas, state(2, (2, 3, 1), replicas), {2, 3}, 9) is None


def test_unclean_election_prefers_the_isr_then_any_live_replica() -> None:
    replicas = (1, 2, 3)
    assert elect_unclean(replicas, state(NO_LEADER, (1, 3), replicas), {2, 3}, 9) == \
        PartitionState(3, 4, (3,), 9, replicas, zk_version=6)
    assert elect_unclean(replicas, state(NO_LEADER, (1,), replicas), {2, 3}, 9) == \
        PartitionState(2, 4, (2,), 9, replicas, zk_version=6)
    assert elect_unclean(replicas, state(NO_LEADER, (1,), replicas), {4}, 9) is None


def test_znodes_in_kafkas_json() -> None:
    topic_id = uuid.uuid4()
    raw = topic_data(topic_id, {0: (2, 3, 1), 1: (1, 2)}, {0: (3,), 1: ()}, {0: (1,)})
    data = json.loads(raw)
    assert data["adding_replicas"] == {"0": [3]} and data["removing_replicas"] == {"0": [1]}  # only those moving
    assert parse_topic("t", raw) == (topic_id, {0: (2, 3, 1), 1: (1, 2)})
    assert parse_reassigning("t", raw) == ({0: (3,)}, {0: (1,)})
    assert parse_reassigning("t", b'{"version":1,"partitions":{"0":[1]}}') == ({}, {})  # older versions: none

    legacy = reassign_partitions_data({("t", 0): (2, 3)})
    assert json.loads(legacy) == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}
    assert parse_reassign_partitions(b'{"version":1,"partitions":[{"topic":"t","partition":1,"replicas":[3],'
                                     b'"log_dirs":["any"]}]}') == {("t", 1): (3,)}
    with pytest.raises(ValueError, match="/admin/reassign_partitions is not a partition reassignment"):
        parse_reassign_partitions(b'{"version":1}')

    election = preferred_replica_election_data({("t", 0), ("u", 2)})
    assert json.loads(election) == {"version": 1, "partitions": [{"topic": "t", "partition": 0},
                                                                 {"topic": "u", "partition": 2}]}
    assert parse_preferred_replica_election(election) == {("t", 0), ("u", 2)}
    with pytest.raises(ValueError, match="/admin/preferred_replica_election is not a preferred replica election"):
        parse_preferred_replica_election(b"[]")
