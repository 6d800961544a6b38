"""mm2.properties read as MirrorMaker 2 reads it: clusters, per-cluster and per-flow settings, enabled flows."""

from __future__ import annotations

import pytest

from headwater.connectors.mirror.dedicated import MirrorConfigError, MirrorMakerConfig

PROPS = {
    "clusters": "A, B, C",
    "A.bootstrap.servers": "a:9092",
    "B.bootstrap.servers": "b:9092",
    "C.bootstrap.servers": "c:9092",
    "B.consumer.max.poll.records": "500",
    "A->B.enabled": "true",
    "A->B.topics": "orders.*",
    "B->A.enabled": "true",
    "A->C.enabled": "false",
    "replication.factor": "1",
    "topics": ".*",
    "sync.group.offsets.enabled": "true",
}


def test_enabled_flows_with_their_settings() -> None:
    cfg = MirrorMakerConfig.from_properties(PROPS)
    assert cfg.clusters == ["A", "B", "C"]
    assert [f.name for f in cfg.flows] == ["A->B", "B->A"]
    ab = cfg.flows[0].connector_configs()
    assert sorted(ab) == ["MirrorCheckpointConnector", "MirrorHeartbeatConnector", "MirrorSourceConnector"]
    source = ab["MirrorSourceConnector"]
    assert source["connector.class"] == "org.apache.kafka.connect.mirror.MirrorSourceConnector"
    assert (source["source.cluster.alias"], source["target.cluster.alias"]) == ("A", "B")
    assert source["topics"] == "orders.*"  # the flow's override wins over the common setting
    assert source["source.cluster.bootstrap.servers"] == "a:9092"
    assert source["target.cluster.bootstrap.servers"] == "b:9092"
    assert source["target.cluster.consumer.max.poll.records"] == "500"
    assert source["replication.factor"] == "1" and "enabled" not in source
    ba = cfg.flows[1].connector_configs()["MirrorSourceConnector"]
    assert ba["topics"] == ".*"
    worker = cfg.flows[0].worker_settings()
    assert worker["bootstrap.servers"] == "b:9092"
    assert worker["offset.storage.topic"] == "mm2-offsets.A.internal"
    assert worker["config.storage.topic"] == "mm2-configs.A.internal"
    assert worker["status.storage.topic"] == "mm2-status.A.internal"


def test_only_the_flows_into_the_clusters_asked_for() -> None:
    assert [f.name for f in MirrorMakerConfig.from_properties(PROPS, ["A"]).flows] == ["B->A"]


@pytest.mark.parametrize("change, words", [
    ({"clusters": ""}, "clusters"),
    ({"A->D.enabled": "true"}, "A->D.enabled"),
    ({"A->A.enabled": "true"}, "itself"),
    ({"C->B.enabled": "true", "C.bootstrap.servers": None}, "C.bootstrap.servers"),
    ({"clusters": "A, B c"}, "alias"),
])
def test_bad_files_name_the_key(change: dict[str, str | None], words: str) -> None:
    props = {**PROPS}
    for k, v in change.items():
        if v is None:
            props.pop(k)
        else:
            props[k] = v
    with pytest.raises(MirrorConfigError, match=words.replace(".", r"\.").replace(">", ">")):
        MirrorMakerConfig.from_properties(props)


def test_unknown_target_in_clusters_flag() -> None:
    with pytest.raises(MirrorConfigError, match="--clusters"):
        MirrorMakerConfig.from_properties(PROPS, ["Z"])
