"""Fetching from the closest replica (KIP-392): Kafka's RackAwareReplicaSelector (broker/replication/
replica_selector.py), the replicas a leader offers it (produce.preferred_read_replica, as Kafka's
ReplicaManager.findPreferredReadReplica) and a follower's bounds for a consumer."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_replica_state import _append, _leader, _partition

from headwater.broker.cluster.znodes import ClusterView, RegisteredBroker
from headwater.broker.errors import BrokerError
from headwater.broker.replication.produce import NO_PREFERRED_REPLICA, consumer_bounds, preferred_read_replica
from headwater.broker.replication.replica import PartitionReplica
from headwater.broker.replication.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    check_selector_class,
    select,
)
from headwater.broker.replication.state import PartitionState
from headwater.kafka.errors import ErrorCode
from headwater.properties import ConfigError

LEADER = ReplicaView(1, "a", 100, 0)


def test_rack_aware_selector_is_kafkas() -> None:
    b = ReplicaView(2, "b", 100, 50)
    assert select(RACK_AWARE_SELECTOR, "b", LEADER, [b]) is b
    assert select(RACK_AWARE_SELECTOR, "a", LEADER, [b, ReplicaView(3, "a", 100, 0)]) is LEADER  # its rack: leader
    assert select(RACK_AWARE_SELECTOR, "z", LEADER, [b]) is LEADER  # no replica in that rack
    assert select(RACK_AWARE_SELECTOR, "", LEADER, [b]) is LEADER  # no client.rack
    assert select(LEADER_SELECTOR, "b", LEADER, [b]) is LEADER
    # several in the rack: the most caught up (largest log end, then most recently caught up, then largest id)
    behind, recent, stale = ReplicaView(2, "c", 90, 0), ReplicaView(3, "c", 100, 10), ReplicaView(4, "c", 100, 20)
    assert select(RACK_AWARE_SELECTOR, "c", LEADER, [behind, stale, recent]) is recent
    tie = ReplicaView(5, "c", 100, 10)
    assert select(RACK_AWARE_SELECTOR, "c", LEADER, [recent, tie]) is tie


def test_selector_class_property() -> None:
    assert check_selector_class(None) is None and check_selector_class(" ") is None
    assert check_selector_class(f" {RACK_AWARE_SELECTOR} ") == RACK_AWARE_SELECTOR
    from headwater.broker.config.broker_config import load_broker_config
    with pytest.raises(ConfigError, match=r"replica\.selector\.class: .*Class com\.example\.Nearest cannot be found"):
        load_broker_config(None, ["replica.selector.class=com.example.Nearest"])


def _cluster(selector: str | None, racks: dict[int, str], listener: str = "PLAINTEXT") -> Any:
    brokers = {b: RegisteredBroker(b, {listener: ("127.0.0.1", 9000 + b)}, rack) for b, rack in racks.items()}
    return SimpleNamespace(config=SimpleNamespace(replica_selector_class=selector, broker_rack=racks.get(1)),
                           membership=SimpleNamespace(view=ClusterView(brokers, 1)))


def _caught_up_leader(tmp_path: Path) -> PartitionReplica:
    replica, _ = _leader(tmp_path)  # broker 1 leads, replicas and ISR 1, 2, 3
    _append(replica.partition, 10)
    for follower in (2, 3):
        replica.follower_fetched(follower, 10, 10_100, log_start_offset=0)
    return replica


def test_leader_offers_in_sync_followers_holding_the_offset(tmp_path: Path) -> None:
    replica = _caught_up_leader(tmp_path)
    racks = {1: "a", 2: "b", 3: "c"}
    cluster = _cluster(RACK_AWARE_SELECTOR, racks)
    assert preferred_read_replica(cluster, replica, "c", 4, "PLAINTEXT") == 3
    assert preferred_read_replica(cluster, replica, "a", 4, "PLAINTEXT") == NO_PREFERRED_REPLICA  # the leader's
    assert preferred_read_replica(cluster, replica, "c", 4, "INTERNAL") == NO_PREFERRED_REPLICA  # not reachable
    assert preferred_read_replica(_cluster(None, racks), replica, "c", 4, "PLAINTEXT") == NO_PREFERRED_REPLICA
    gone = _cluster(RACK_AWARE_SELECTOR, racks)
    del gone.membership.view.brokers[3]  # its registration went: not live
    assert preferred_read_replica(gone, replica, "c", 4, "PLAINTEXT") == NO_PREFERRED_REPLICA
    replica.follower_fetched(3, 6, 10_200, log_start_offset=5)  # behind the offset, and past it at its start
    assert preferred_read_replica(cluster, replica, "c", 8, "PLAINTEXT") == NO_PREFERRED_REPLICA
    assert preferred_read_replica(cluster, replica, "c", 4, "PLAINTEXT") == NO_PREFERRED_REPLICA
    assert preferred_read_replica(cluster, replica, "c", 5, "PLAINTEXT") == 3
    replica.state = PartitionState(1, 1, (1, 2), 1, (1, 2, 3), 1)  # out of the ISR
    assert preferred_read_replica(cluster, replica, "c", 5, "PLAINTEXT") == NO_PREFERRED_REPLICA


def test_follower_bounds_for_a_consumer(tmp_path: Path) -> None:
    partition, woken = _partition(tmp_path)
    replica = PartitionReplica("t", partition, 3, PartitionState(1, 1, (1, 2, 3), 1, (1, 2, 3), 0), 0)
    replica.become_follower(replica.state)
    _append(partition, 5)
    replica.follow_high_watermark(3)
    assert woken  # consumers parked on this follower read on
    assert consumer_bounds(partition, replica, on_follower=True) == (3, 3)  # below the high watermark
    with pytest.raises(BrokerError) as exc:  # a Fetch before v11, and ListOffsets, go to the leader
        consumer_bounds(partition, replica)
    assert exc.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    replica.stop(PartitionState(-1, 2, (1,), 1, (1, 2, 3), 1))  # no leader: neither
    with pytest.raises(BrokerError):
        consumer_bounds(partition, replica, on_follower=True)
