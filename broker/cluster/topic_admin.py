"""CreateTopics, CreatePartitions and DeleteTopics in a ZooKeeper cluster: checked here against the live
brokers and the topics ZooKeeper holds, then written as Kafka's brokers write them (any broker may): a new
topic's /config/topics/<t> and /brokers/topics/<t> in one transaction, new partitions as a conditional
rewrite of /brokers/topics/<t>, a deletion as /admin/delete_topics/<t> for the controller to carry out.
The answer waits (up to the request's timeout) until this broker's view has the outcome: every new
partition with a leader, a deleted topic gone, as Kafka's DelayedCreatePartitions / DelayedDeleteTopics."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from headwater.kafka.errors import ErrorCode

from ..errors import BrokerError, UnknownTopicOrPartition
from ..topics.topic import validate_topic_name
from .assignment import assign_replicas, broker_racks, check_assignment
from .znodes import (
    Assignment,
    delete_topic_path,
    parse_reassigning,
    parse_topic,
    topic_config_data,
    topic_config_path,
    topic_data,
    topic_path,
)

if TYPE_CHECKING:
    from ..topics.cluster import Cluster
    from .membership import ClusterMembership

__all__ = ["add_partitions", "check_absent", "create_topic", "delete_topic", "wait_for_leaders", "wait_for_deletion"]


def _members(cluster: Cluster) -> ClusterMembership:
    membership = cluster.membership
    assert membership is not None
    return membership


def plan_topic(cluster: Cluster, name: str, partitions: int, replication_factor: int,
               assignment: Mapping[int, Sequence[int]] | None, overrides: dict[str, str]) -> Assignment:
    """The new topic's assignment, every input checked first (BrokerError in Kafka's words)."""
    membership = _members(cluster)
    validate_topic_name(name)
    if name in cluster.topics and name not in cluster.replicated:  # this broker's own (internal, single-node)
        raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    # whether the cluster has it is ZooKeeper's to say (this broker's view may lag): check_absent, create_topic
    cluster.topic_config(overrides)
    live = set(membership.view.brokers)
    if assignment:
        return check_assignment(assignment, live)
    if partitions == -1:
        partitions = cluster.config.num_partitions
    if partitions <= 0:
        raise BrokerError(ErrorCode.INVALID_PARTITIONS,
                          f"Number of partitions must be larger than 0 (got {partitions}).")
    if replication_factor == -1:
        replication_factor = cluster.config.default_replication_factor
    return assign_replicas(partitions, replication_factor, broker_racks(membership.view.brokers))


async def create_topic(cluster: Cluster, name: str, assignment: Assignment, overrides: dict[str, str]) -> None:
    """Write the topic's znodes (TOPIC_ALREADY_EXISTS when another broker wrote them first)."""
    zk = _members(cluster).zk
    await asyncio.to_thread(_write_topic, zk, name, uuid.uuid4(), assignment, overrides)


async def check_absent(cluster: Cluster, name: str) -> None:
    """TOPIC_ALREADY_EXISTS when ZooKeeper has the topic or its deletion mark (CreateTopics' validate_only)."""
    await asyncio.to_thread(_check_absent, _members(cluster).zk, name)


def _check_absent(zk: KazooClient, name: str) -> None:
    """As Kafka's AdminZkClient.validateTopicCreate: ZooKeeper itself, not a broker's view of it."""
    if zk.exists(delete_topic_path(name)) is not None:
        raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' is marked for deletion.")
    if zk.exists(topic_path(name)) is not None:
        raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")


def _write_topic(zk: KazooClient, name: str, topic_id: uuid.UUID, assignment: Assignment,
                 overrides: dict[str, str]) -> None:
    _check_absent(zk, name)
    tx = zk.transaction()
    if zk.exists(topic_config_path(name)) is not None:  # left by a tool: replaced, as Kafka's setOrCreate
        tx.set_data(topic_config_path(name), topic_config_data(overrides))
    else:
        tx.create(topic_config_path(name), topic_config_data(overrides))
    tx.create(topic_path(name), topic_data(topic_id, assignment))
    results = tx.commit()
    if any(isinstance(r, NodeExistsError) for r in results):
        raise BrokerError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    failed = next((r for r in results if isinstance(r, Exception)), None)
    if failed is not None:
        raise failed


def plan_partitions(cluster: Cluster, name: str, count: int,
                    assignment: Sequence[Sequence[int]] | None) -> Assignment:
    """The new partitions' replicas (BrokerError in Kafka's words when they cannot be added as asked)."""
    membership = _members(cluster)
    meta = membership.sync.topics.get(name)
    if meta is None:
        raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
    if name in membership.sync.deleting:
        raise BrokerError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' is marked for deletion.")
    if meta.reassigning():  # as Kafka's ZkAdminManager: the controller rewrites the assignment meanwhile
        raise BrokerError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                          f"A partition reassignment is in progress for the topic '{name}'.")
    current = meta.partition_count
    if count <= current:
        raise BrokerError(ErrorCode.INVALID_PARTITIONS,
                          f"Topic currently has {current} partitions, which is higher than or equal to the "
                          f"requested {count}.")
    live = sorted(membership.view.brokers)
    if assignment:
        if len(assignment) != count - current:
            raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                              f"Increasing the number of partitions by {count - current} but {len(assignment)} "
                              f"assignments provided.")
        return check_assignment({current + i: a for i, a in enumerate(assignment)}, live, current,
                                meta.replication_factor)
    first = meta.assignment[0][0]
    start = max(0, next((i for i, b in enumerate(live) if b >= first), 0))
    return assign_replicas(count - current, meta.replication_factor, broker_racks(membership.view.brokers),
                           start_partition=current, start_index=start)


async def add_partitions(cluster: Cluster, name: str, added: Assignment) -> None:
    """Rewrite the topic's assignment with ``added``, conditionally on the version last read."""
    zk = _members(cluster).zk
    await asyncio.to_thread(_write_partitions, zk, name, added)


def _write_partitions(zk: KazooClient, name: str, added: Assignment) -> None:
    try:
        raw, stat = zk.get(topic_path(name))
    except NoNodeError:
        raise UnknownTopicOrPartition(f"topic {name!r} does not exist") from None
    topic_id, assignment = parse_topic(name, raw)
    if any(parse_reassigning(name, raw)):  # begun since the view was read: the rewrite would lose it
        raise BrokerError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                          f"A partition reassignment is in progress for the topic '{name}'.")
    if set(added) & set(assignment):
        raise BrokerError(ErrorCode.INVALID_PARTITIONS, f"Topic {name}'s partitions changed meanwhile; try again.")
    try:
        zk.set(topic_path(name), topic_data(topic_id, {**assignment, **added}), version=stat.version)
    except BadVersionError:
        raise BrokerError(ErrorCode.INVALID_PARTITIONS,
                          f"Topic {name}'s partitions changed meanwhile; try again.") from None


async def delete_topic(cluster: Cluster, name: str) -> None:
    """Mark the topic for deletion (the controller deletes it)."""
    membership = _members(cluster)
    if name not in membership.sync.topics:
        raise UnknownTopicOrPartition(f"topic {name!r} does not exist")
    try:
        await asyncio.to_thread(membership.zk.create, delete_topic_path(name), b"", makepath=True)
    except NodeExistsError:
        pass  # already marked


async def wait_for_leaders(cluster: Cluster, names: Sequence[str], timeout: float) -> set[str]:
    """Wait until every partition of ``names`` has a leader in this broker's view; the names still without."""
    sync = _members(cluster).sync

    def missing() -> set[str]:
        return {n for n in names if n not in sync.topics or not sync.topics[n].has_leaders()}
    await sync.wait_for(lambda: not missing(), timeout)
    return missing()


async def wait_for_deletion(cluster: Cluster, names: Sequence[str], timeout: float) -> set[str]:
    """Wait until ``names`` are gone from this broker's view; those still there."""
    sync = _members(cluster).sync
    await sync.wait_for(lambda: not any(n in sync.topics for n in names), timeout)
    return {n for n in names if n in sync.topics}
