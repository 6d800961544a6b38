"""mm2.properties read as MirrorMaker 2 reads it: clusters, per-cluster and per-flow settings, enabled flows."""

from __future__ import annotations

import pytest

from headwater.connectors.mirror.dedicated import MirrorConfigError, MirrorMakerConfig, cluster_client_settings

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


def test_the_reverse_of_a_one_way_flow_runs_for_heartbeats_alone() -> None:
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
             "A->B.enabled": "true", "B->A.emit.heartbeats.interval.seconds": "5"}
    cfg = MirrorMakerConfig.from_properties(props)
    assert [f.name for f in cfg.flows] == ["A->B"]
    assert [f.name for f in cfg.heartbeat_flows] == ["B->A"]
    assert [f.name for f in cfg.herders] == ["A->B", "B->A"]
    beats = cfg.heartbeat_flows[0]
    assert beats.heartbeats_only and list(beats.connector_configs()) == ["MirrorHeartbeatConnector"]
    config = beats.connector_configs()["MirrorHeartbeatConnector"]
    assert (config["source.cluster.alias"], config["target.cluster.alias"]) == ("B", "A")
    assert config["emit.heartbeats.interval.seconds"] == "5"
    worker = beats.worker_settings()  # on A, with B's internal topic names, as MM2's B->A herder
    assert (worker["bootstrap.servers"], worker["group.id"]) == ("a:9092", "mm2-B-A")
    assert worker["config.storage.topic"] == "mm2-configs.B.internal"
    # the reverse enabled too: no heartbeats-only flow; only the flows into the clusters asked for
    assert MirrorMakerConfig.from_properties({**props, "B->A.enabled": "true"}).heartbeat_flows == []
    assert [f.name for f in MirrorMakerConfig.from_properties(props, ["B"]).herders] == ["A->B"]
    assert [f.name for f in MirrorMakerConfig.from_properties(props, ["A"]).herders] == ["B->A"]


@pytest.mark.parametrize("off", [{"emit.heartbeats.enabled": "false"}, {"B->A.emit.heartbeats.enabled": "false"}])
def test_heartbeats_turned_off_means_no_reverse_flow(off: dict[str, str]) -> None:
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
             "A->B.enabled": "true", **off}
    assert MirrorMakerConfig.from_properties(props).heartbeat_flows == []


def test_worker_config_layers() -> None:
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
             "B.security.protocol": "PLAINTEXT", "B.producer.linger.ms": "5",
             "A->B.enabled": "true", "A->B.offset.flush.interval.ms": "1000", "A->B.topics": "x",
             "offset.flush.interval.ms": "60000", "session.timeout.ms": "3000", "group.id": "shared",
             "bootstrap.servers": "elsewhere:9092", "offset.storage.partitions": "5", "topics": ".*"}
    flow = MirrorMakerConfig.from_properties(props).flows[0]
    worker = flow.worker_config(frozenset({"offset.flush.interval.ms", "session.timeout.ms", "listeners"}),
                                {"listeners": "http://127.0.0.1:0", "session.timeout.ms": "10000"})
    assert worker["offset.flush.interval.ms"] == "1000"  # the flow's own wins over the common one
    assert worker["session.timeout.ms"] == "3000"  # the file wins over the defaults
    assert worker["listeners"] == "http://127.0.0.1:0"
    assert worker["offset.storage.partitions"] == "5"  # MM2's worker prefixes
    assert (worker["group.id"], worker["bootstrap.servers"]) == ("mm2-A-B", "b:9092")  # never shared by flows
    assert worker["security.protocol"] == "PLAINTEXT" and "producer.linger.ms" not in worker
    assert worker["value.converter"] == "org.apache.kafka.connect.converters.ByteArrayConverter"
    assert "topics" not in worker
    assert flow.origin("topics") == "A->B.topics"
    assert flow.origin("tasks.max") == "tasks.max"
    assert flow.origin("source.cluster.bootstrap.servers") == "A.bootstrap.servers"


def test_cluster_client_settings_for_translate_offsets() -> None:
    props = {"clusters": "A, B", "B.bootstrap.servers": "b:9092", "B.consumer.client.id": "reader",
             "B.producer.linger.ms": "5", "replication.policy.separator": "_", "A->B.replication.policy.separator": "-"}
    settings = cluster_client_settings(props, "B", "A")
    assert settings == {"bootstrap.servers": "b:9092", "client.id": "reader", "replication.policy.separator": "-"}
    assert cluster_client_settings(props, "B")["replication.policy.separator"] == "_"
    with pytest.raises(MirrorConfigError, match="clusters"):
        cluster_client_settings(props, "C")


def _file(**extra: str) -> dict[str, str]:
    return {"clusters": "A, B", "A.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": "127.0.0.1:2",
            "A->B.enabled": "true", **{k.replace("__", "->").replace("_", "."): v for k, v in extra.items()}}


def test_plan_checks_workers_and_connectors_before_anything_runs() -> None:
    from headwater.connectors.mirror.runner import plan_mirror

    plans = plan_mirror(_file(tasks_max="4"))
    assert [p.label for p in plans] == ["A->B", "B->A (heartbeats only)"]
    assert plans[0].worker.group_id == "mm2-A-B" and plans[0].worker.rest_host_port() == ("127.0.0.1", 0)
    assert plans[0].connectors["MirrorSourceConnector"]["tasks.max"] == "4"
    for props, words in [
        (_file(**{"A->B.topics": "x["}), r"A->B\.topics: .*MirrorSourceConnector of the flow A->B"),
        (_file(offset_flush_interval_ms="soon"), r"offset\.flush\.interval\.ms: .*the worker of the flow A->B"),
        (_file(listeners="http://127.0.0.1:8099"), r"listeners: .*port 8099"),
        (_file(**{"A->B.enabled": "false"}), r"no flow is enabled"),
    ]:
        with pytest.raises(MirrorConfigError, match=words):
            plan_mirror(props)
    with pytest.raises(MirrorConfigError, match="--clusters: no enabled flow goes into C"):
        plan_mirror({**_file(), "clusters": "A, B, C", "C.bootstrap.servers": "c:1", "A->B.emit.heartbeats.enabled":
                     "false", "B->A.emit.heartbeats.enabled": "false"}, ["C"])


class _Herder:
    """What the runner uses of a distributed herder: the stored configs and the leader's writes."""

    def __init__(self, configs: dict[str, dict[str, str]], leader: bool) -> None:
        self.configs = configs
        self.membership = type("Membership", (), {"is_leader": leader})()
        self.writes: list[str] = []

    def connector_config(self, name: str) -> dict[str, str] | None:
        return self.configs.get(name)

    async def put_connector_config(self, name: str, config: dict[str, str], allow_replace: bool) -> bool:
        assert allow_replace
        self.writes.append(f"put {name}")
        created = name not in self.configs
        self.configs[name] = config
        return created

    async def delete_connector(self, name: str) -> None:
        self.writes.append(f"delete {name}")
        del self.configs[name]


def test_the_leader_writes_what_differs_and_a_follower_waits_for_it() -> None:
    import asyncio

    from headwater.connectors.mirror import runner

    plans = runner.plan_mirror(_file())
    flow, beats = plans

    async def scenario() -> None:
        halt = asyncio.Event()
        stored = dict(flow.connectors)
        stored["MirrorSourceConnector"] = {**stored["MirrorSourceConnector"], "topics": "old"}
        leader = _Herder(dict(stored), leader=True)
        await runner._configure(flow, leader, halt)  # type: ignore[arg-type]  # a fake herder
        assert leader.writes == ["put MirrorSourceConnector"] and leader.configs == flow.connectors
        # a follower writes nothing, until it becomes the leader with the configs still not stored
        follower = _Herder({}, leader=False)
        task = asyncio.ensure_future(runner._configure(flow, follower, halt))  # type: ignore[arg-type]
        await asyncio.sleep(0.05)
        assert follower.writes == [] and not task.done()
        follower.membership.is_leader = True
        await asyncio.wait_for(task, 5)
        assert sorted(follower.writes) == sorted(f"put {name}" for name in flow.connectors)
        # a flow now heartbeats-only: its other MirrorMaker connectors are removed
        was_enabled = _Herder({"MirrorSourceConnector": {}, "MirrorCheckpointConnector": {},
                               **beats.connectors}, leader=True)
        await runner._configure(beats, was_enabled, halt)  # type: ignore[arg-type]
        assert sorted(was_enabled.writes) == ["delete MirrorCheckpointConnector", "delete MirrorSourceConnector"]

    asyncio.run(scenario())


def test_top_level_security_keys_are_every_clusters_under_its_own() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:9096", "B.bootstrap.servers": "b:9092",
             "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas,
             "B.security.protocol": "SASL_PLAINTEXT", "A->B.enabled": "true"}
    (flow,) = MirrorMakerConfig.from_properties(props).flows
    assert (flow.source_cluster["security.protocol"], flow.target_cluster["security.protocol"]) == \
        ("SASL_SSL", "SASL_PLAINTEXT")
    assert flow.target_cluster["sasl.jaas.config"] == jaas and "security.protocol" not in flow.settings
    worker = flow.worker_config(frozenset({"group.id"}))
    assert worker["security.protocol"] == "SASL_PLAINTEXT" and worker["sasl.mechanism"] == "PLAIN"
    assert cluster_client_settings(props, "A")["security.protocol"] == "SASL_SSL"


def test_a_mirror_connector_refuses_a_clusters_security_key_it_cannot_honour() -> None:
    from pydantic import ValidationError

    from headwater.connectors.mirror.config import MirrorSourceConfig

    config = {"name": "m", "connector.class": "MirrorSourceConnector", "source.cluster.alias": "A",
              "source.cluster.bootstrap.servers": "a:9096", "target.cluster.bootstrap.servers": "b:9092",
              "source.cluster.security.protocol": "SASL_SSL", "source.cluster.sasl.mechanism": "GSSAPI"}
    with pytest.raises(ValidationError, match="source.cluster.sasl.mechanism=GSSAPI"):
        MirrorSourceConfig.model_validate(config)
    with pytest.raises(ValidationError, match="source.cluster.consumer.ssl.truststore.type=JKS"):
        MirrorSourceConfig.model_validate({**config, "source.cluster.sasl.mechanism": "PLAIN",
                                           "source.cluster.sasl.username": "u", "source.cluster.sasl.password": "p",
                                           "source.cluster.consumer.ssl.truststore.type": "JKS",
                                           "source.cluster.consumer.ssl.truststore.location": "/x.jks"})


@pytest.mark.parametrize("key", ["A.consumer.isolation.level", "A->B.source.consumer.isolation.level",
                                 "source.consumer.isolation.level", "consumer.isolation.level",
                                 "A->B.consumer.isolation.level"])
def test_source_consumer_isolation_level_keys(key: str) -> None:
    """Each place mm2.properties (or the connector config) may set the source consumer's isolation.level
    reaches the consumer the source task fetches with."""
    from headwater.connectors.mirror.config import MirrorSourceConfig

    props = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1", "A->B.enabled": "true"}
    [flow] = MirrorMakerConfig.from_properties({**props, key: "read_committed"}).flows
    config = MirrorSourceConfig.model_validate(flow.connector_configs()["MirrorSourceConnector"])
    assert config.source_consumer()["isolation.level"] == "read_committed"
    [flow] = MirrorMakerConfig.from_properties({**props, key: "committed"}).flows
    with pytest.raises(ValueError, match="isolation.level must be read_uncommitted or read_committed, not 'committed'"):
        MirrorSourceConfig.model_validate(flow.connector_configs()["MirrorSourceConnector"])


@pytest.mark.parametrize("key", ["exactly.once.source.support", "B.exactly.once.source.support",
                                 "A->B.exactly.once.source.support"])
def test_exactly_once_source_support_reaches_the_flows_worker(key: str) -> None:
    """KIP-618 in dedicated mode: the worker of a flow into B gets exactly.once.source.support from the
    file's top level (every flow), from B's settings (flows into B, as Kafka's docs show it) or the flow's."""
    props = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1", "A->B.enabled": "true",
             "B->A.enabled": "true", key: "enabled"}
    flows = {f.name: f for f in MirrorMakerConfig.from_properties(props).flows}
    assert flows["A->B"].worker_config(frozenset()).get("exactly.once.source.support") == "enabled"
    into_a = flows["B->A"].worker_config(frozenset()).get("exactly.once.source.support")
    assert into_a == ("enabled" if key == "exactly.once.source.support" else None)
