"""Replication policies, the cycle check and offset translation, against the behaviour of Kafka's own."""

from __future__ import annotations

import pytest

from headwater.connectors.mirror.policy import is_cycle, replication_policy
from headwater.connectors.mirror.translate import OffsetSyncStore
from headwater.kafka.mirror import OffsetSync


def test_default_policy_names() -> None:
    p = replication_policy("org.apache.kafka.connect.mirror.DefaultReplicationPolicy")
    assert p.format_remote_topic("A", "orders") == "A.orders"
    assert (p.topic_source("A.orders"), p.upstream_topic("A.orders")) == ("A", "orders")
    assert p.topic_source("orders") is None and p.upstream_topic("orders") is None
    assert p.original_topic("B.A.orders") == "orders"
    assert p.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert p.checkpoints_topic("A") == "A.checkpoints.internal"
    assert p.is_heartbeats_topic("A.heartbeats") and p.is_heartbeats_topic("heartbeats")
    for internal in ("mm2-offset-syncs.B.internal", "A.checkpoints.internal", "__consumer_offsets",
                     "connect-configs-internal", "mm2-configs.A.internal", ".hidden"):
        assert p.is_internal_topic(internal), internal
    assert not p.is_internal_topic("orders") and not p.is_internal_topic("A.heartbeats")
    dashes = replication_policy("DefaultReplicationPolicy", "_")
    assert dashes.format_remote_topic("A", "orders") == "A_orders" and dashes.topic_source("A_orders") == "A"


def test_identity_policy_keeps_names_but_traces_heartbeats() -> None:
    p = replication_policy("IdentityReplicationPolicy")
    assert p.format_remote_topic("A", "orders") == "orders"
    assert p.topic_source("orders") is None and p.topic_source("A.orders") is None
    assert p.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert p.topic_source("A.heartbeats") == "A" and p.upstream_topic("A.heartbeats") == "heartbeats"


def test_cycle_check_stops_a_to_b_to_a() -> None:
    p = replication_policy()
    assert is_cycle(p, "B.orders", "B")  # came from B: never back into B
    assert is_cycle(p, "C.B.orders", "B")  # through C, still from B
    assert not is_cycle(p, "orders", "B") and not is_cycle(p, "C.orders", "B")
    assert not is_cycle(replication_policy("IdentityReplicationPolicy"), "orders", "B")  # identity cannot tell


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="replication.policy.class"):
        replication_policy("CustomPolicy")


def test_translation_follows_kafka_rules() -> None:
    store = OffsetSyncStore()
    store.add(OffsetSync("orders", 0, 100, 50))
    store.add(OffsetSync("orders", 0, 200, 140))
    assert store.translate("orders", 0, 150) is None  # the syncs topic is not read to the end yet
    store.read_to_end = True
    assert store.translate("orders", 0, 200) == 140  # exactly a sync: its downstream offset
    assert store.translate("orders", 0, 150) == 51  # between syncs: one past the earlier one, never ahead
    assert store.translate("orders", 0, 5000) == 141
    assert store.translate("orders", 0, 99) is None  # behind every sync known
    assert store.translate("orders", 1, 150) is None  # no sync for the partition
    store.add(OffsetSync("orders", 0, 10, 3))  # upstream went backwards: recreated, start over
    assert store.translate("orders", 0, 150) == 4


def test_translation_keeps_old_syncs_thinned_for_lagging_groups() -> None:
    store = OffsetSyncStore()
    store.read_to_end = True
    for i in range(1, 1001):
        store.add(OffsetSync("t", 0, i * 10, i * 10 - 5))
    assert store.translate("t", 0, 10_000) == 9_995
    # a group far behind gets the sync it passed (10 -> 5, so 6) or none, never an offset ahead of it
    assert store.translate("t", 0, 15) in (None, 6)
    assert store.translate("t", 0, 9_995) == 9_986
