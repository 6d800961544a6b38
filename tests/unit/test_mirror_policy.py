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
    for i in range(1, 1001):  # every run is broken: 10 upstream offsets become 9 downstream (a compacted gap)
        store.add(OffsetSync("t", 0, i * 10, i * 9))
    assert store.translate("t", 0, 10_000) == 9_000
    # a group far behind gets the sync it passed (10 -> 9, so 10) or none, never an offset ahead of it
    assert store.translate("t", 0, 15) in (None, 10)
    assert store.translate("t", 0, 9_995) == 8_992


def test_translation_is_exact_inside_a_run() -> None:
    """Two syncs one run apart (both sides advanced by the same count): every offset between maps exactly."""
    store = OffsetSyncStore()
    store.read_to_end = True
    store.add(OffsetSync("t", 0, 100, 1000))
    store.add(OffsetSync("t", 0, 199, 1099))  # the end of the batch: 100 records, contiguous on both sides
    assert [store.translate("t", 0, u) for u in (100, 101, 150, 199, 200)] == [1000, 1001, 1050, 1099, 1100]
    store.add(OffsetSync("t", 0, 205, 1100))  # 200..204 compacted away upstream: a new run starts
    assert store.translate("t", 0, 202) == 1100  # in the gap: the next record's offset, nothing skipped
    assert store.translate("t", 0, 205) == 1100
    store.add(OffsetSync("t", 0, 210, 1107))  # 5 records upstream, 7 downstream: re-sent records between
    assert store.translate("t", 0, 207) == 1101  # not one run: one past the sync, never ahead


def test_thinning_never_joins_two_runs_into_one() -> None:
    store = OffsetSyncStore()
    store.read_to_end = True
    up = down = 0
    for _ in range(200):  # alternating: a run of 10, then a jump of 5 upstream only
        store.add(OffsetSync("t", 0, up, down))
        store.add(OffsetSync("t", 0, up + 9, down + 9))
        up, down = up + 15, down + 10
    for u in range(0, up - 15):
        got = store.translate("t", 0, u)
        if got is None:
            continue
        block, within = divmod(u, 15)
        exact = block * 10 + min(within, 10)  # the first record at or after u
        assert got <= exact, (u, got, exact)  # never skips a record
