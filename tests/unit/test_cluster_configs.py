"""What a broker does with a config read from ZooKeeper (broker/cluster/config_sync.py), without processes: its
own broker levels taken (what it cannot take left out and counted), other brokers' ignored, a topic's config
into its view with the controller told when unclean.leader.election.enable changes, and the single-node file
of dynamic broker configs left unused in a cluster."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from headwater.broker.cluster.config_sync import ClusterConfigs
from headwater.broker.cluster.topic_meta import TopicMeta
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.topics.cluster import Cluster


class _Controller:
    def __init__(self) -> None:
        self.marked: list[set[tuple[str, int]]] = []

    def mark(self, keys: set[tuple[str, int]]) -> None:
        self.marked.append(keys)


class _Sync:
    def __init__(self) -> None:
        self.topics: dict[str, TopicMeta] = {}


class _Membership:
    def __init__(self) -> None:
        self.controller = _Controller()
        self.sync = _Sync()


def _configs(tmp_path: Path) -> tuple[ClusterConfigs, Cluster, _Membership]:
    cluster = Cluster(BrokerConfig(**{"log.dirs": str(tmp_path), "node.id": "2",
                                      "zookeeper.connect": "127.0.0.1:2181"}))
    membership = _Membership()
    membership_any: Any = membership
    return ClusterConfigs(cluster, membership_any), cluster, membership


def test_own_broker_levels_taken_others_ignored_bad_names_left_out(tmp_path: Path) -> None:
    configs, cluster, _ = _configs(tmp_path)
    configs.apply_broker("<default>", {"log.retention.ms": "7000"})
    configs.apply_broker("3", {"log.retention.ms": "1"})  # broker 3's own
    assert (cluster.dynamic.default, cluster.dynamic.per_broker) == ({"log.retention.ms": "7000"}, {})
    assert cluster.defaults.retention_ms == 7000
    configs.apply_broker("2", {"log.retention.ms": "5000", "no.such.property": "1", "log.segment.bytes": "x"})
    assert cluster.dynamic.per_broker == {"log.retention.ms": "5000"}
    assert cluster.defaults.retention_ms == 5000
    assert configs.failures == 2
    configs.apply_broker("<default>", {})
    assert cluster.dynamic.default == {}
    assert not (tmp_path / "headwater-broker-configs.json").exists()  # ZooKeeper's, not the file's


def test_a_topic_config_replaces_the_view_and_tells_the_controller_of_unclean_election(tmp_path: Path) -> None:
    configs, _, membership = _configs(tmp_path)
    meta = TopicMeta("t", uuid.uuid4(), {0: (1, 2), 1: (2, 3)}, {"retention.ms": "5"}, 0, 0)
    membership.sync.topics["t"] = meta

    async def scenario() -> None:
        configs.apply_topic("t", {"retention.ms": "6"})
        assert meta.overrides == {"retention.ms": "6"} and membership.controller.marked == []
        configs.apply_topic("t", {"retention.ms": "6", "unclean.leader.election.enable": "true"})
        assert membership.controller.marked == [{("t", 0), ("t", 1)}]
        configs.apply_topic("later", {"retention.ms": "1"})  # not in the view yet: read again once it is
        assert "later" in configs._pending
        await configs.stop()

    asyncio.run(scenario())


def test_the_single_node_file_is_not_used_in_a_cluster(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "headwater-broker-configs.json"
    path.write_text(json.dumps({"brokers": {"2": {"log.retention.ms": "1"}}, "default": {}}))
    _, cluster, _ = _configs(tmp_path)
    with caplog.at_level(logging.WARNING):
        cluster.load()
    assert cluster.dynamic.per_broker == {}
    assert f"{path}: dynamic broker configs from single-node use are not used" in caplog.text
