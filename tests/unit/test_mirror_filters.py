"""MM2's topic and group filters: whole-name regex lists, excludes winning, the defaults."""

from __future__ import annotations

import pytest

from headwater.connectors.mirror.filters import group_filter, topic_filter


def test_default_topic_filter_keeps_internal_topics_out() -> None:
    keep = topic_filter({})
    assert keep("orders") and keep("A.orders")
    for internal in ("mm2-offsets.A.internal", "connect-configs-internal", "orders.replica", "__consumer_offsets"):
        assert not keep(internal), internal


def test_topic_lists_match_whole_names_and_excludes_win() -> None:
    keep = topic_filter({"topics": "orders.*, payments", "topics.exclude": "orders-test"})
    assert keep("orders") and keep("orders-eu") and keep("payments")
    assert not keep("payments-eu")  # a whole-name match, as Java's matches()
    assert not keep("orders-test")
    assert not topic_filter({"topics": ""})("orders")  # an empty list mirrors nothing
    assert not topic_filter({"topics.blacklist": "orders"})("orders")  # the old name still works


def test_default_group_filter_leaves_connect_and_console_groups_out() -> None:
    keep = group_filter({})
    assert keep("billing")
    assert not keep("connect-lake") and not keep("console-consumer-1234") and not keep("__internal")
    assert group_filter({"groups.exclude": ""})("connect-lake")  # a user who wants sink groups synced


def test_a_bad_pattern_names_the_key() -> None:
    with pytest.raises(ValueError, match="topics.exclude"):
        topic_filter({"topics.exclude": "orders("})
