"""The replication and controller figures (broker/metrics/replication.py, prometheus.py) worked out from a broker's
state, without processes: Kafka's ReplicaManager gauges on real partition logs led, followed or held alone; the
ISR meters counted as the leader's writes go (shrink, expand, failed); the controller's gauges from its view of
the topics; an unclean election counted by the controller's write; ZooKeeper session events."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from prometheus_client.core import Metric

from headwater.broker.cluster.controller import Controller
from headwater.broker.cluster.topic_meta import TopicMeta
from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.metrics.prometheus import controller_metrics, replica_manager_metrics
from headwater.broker.metrics.replication import controller_figures
from headwater.broker.metrics.stats import ZkSessionStats
from headwater.broker.replication.manager import ReplicaManager
from headwater.broker.replication.state import NO_LEADER, PartitionState
from headwater.broker.topics.cluster import Cluster


def _samples(families: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    metrics: list[Metric] = list(families)
    return {(s.name, frozenset(s.labels.items())): s.value for m in metrics for s in m.samples}


def _figure(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def _state(leader: int, isr: tuple[int, ...], replicas: tuple[int, ...] = (1, 2, 3), version: int = 0,
           epoch: int = 1) -> PartitionState:
    return PartitionState(leader, epoch, isr, 1, replicas, version)


class Writer:
    """An IsrWriter whose answers the test chooses: the state written, None (lost to another write) or an error."""

    def __init__(self) -> None:
        self.answer: str = "written"

    async def write_isr(self, topic: str, index: int, state: PartitionState,
                        isr: tuple[int, ...]) -> PartitionState | None:
        if self.answer == "error":
            raise ConnectionError("ZooKeeper connection lost")
        return None if self.answer == "lost" else replace(state, isr=isr, zk_version=state.zk_version + 1)


def _broker(tmp_path: Path) -> tuple[Cluster, BrokerConfig]:
    config = BrokerConfig(**{"log.dirs": str(tmp_path), "zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})
    cluster = Cluster(config)
    cluster.load()
    cluster.create_topic("t", 4, 1, {"min.insync.replicas": "2"})
    cluster.create_topic("own", 1, 1, {})  # a topic of this broker's own (from single-node use)
    cluster.replicated.add("t")
    return cluster, config


def test_replica_manager_gauges_count_what_this_broker_leads(tmp_path: Path) -> None:
    async def run() -> None:
        cluster, config = _broker(tmp_path)
        manager = cluster.replication = ReplicaManager(cluster, config, Writer())
        try:
            await manager.apply(cluster.partition("t", 0), _state(1, (1, 2, 3)))  # healthy
            await manager.apply(cluster.partition("t", 1), _state(1, (1, 2)))  # under-replicated, at min ISR
            await manager.apply(cluster.partition("t", 2), _state(1, (1,)))  # under min ISR
            await manager.apply(cluster.partition("t", 3), _state(2, (2, 1)))  # followed: not this broker's figure
            manager.fetchers[2].replicas[("t", 3)].fetch_lag = 7
            got = _samples(replica_manager_metrics(cluster))
        finally:
            await manager.stop()
        rm = "kafka_server_replicamanager_"
        assert _figure(got, rm + "partitioncount") == 5
        assert _figure(got, rm + "leadercount") == 4  # three of t, and its own topic's one
        assert _figure(got, rm + "underreplicatedpartitions") == 2
        assert _figure(got, rm + "underminisrpartitioncount") == 1
        assert _figure(got, rm + "atminisrpartitioncount") == 2  # t-1 (2 of 2) and its own (1 of 1)
        assert _figure(got, "kafka_cluster_partition_underreplicated", topic="t", partition="1") == 1
        assert _figure(got, "kafka_cluster_partition_underreplicated", topic="t", partition="3") == 0
        assert _figure(got, "kafka_cluster_partition_insyncreplicascount", topic="t", partition="2") == 1
        assert _figure(got, "kafka_cluster_partition_replicascount", topic="own", partition="0") == 1
        assert _figure(got, "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 7
        assert _figure(got, "kafka_server_fetcherlagmetrics_consumerlag", clientId="ReplicaFetcherThread-0-2",
                       topic="t", partition="3") == 7
    asyncio.run(run())


def test_isr_changes_are_counted_once_written(tmp_path: Path) -> None:
    async def run() -> None:
        cluster, config = _broker(tmp_path)
        writer = Writer()
        manager = cluster.replication = ReplicaManager(cluster, config, writer)
        try:
            await manager.apply(cluster.partition("t", 0), _state(1, (1, 2, 3)))
            replica = cluster.partition("t", 0).replica

            async def change(isr: tuple[int, ...], answer: str) -> None:
                writer.answer = answer
                manager._write_isr(replica, isr)
                await asyncio.gather(*manager._isr_writes)
            await change((1, 2), "written")
            await change((1, 2, 3), "written")
            await change((1,), "lost")  # the controller wrote first: not a shrink, a failed update
            await change((1,), "error")
            stats = manager.stats
            assert (stats.isr_shrinks, stats.isr_expands, stats.failed_isr_updates) == (1, 1, 2)
            got = _samples(replica_manager_metrics(cluster))
        finally:
            await manager.stop()
        assert _figure(got, "kafka_server_replicamanager_isrshrinks_total") == 1
        assert _figure(got, "kafka_server_replicamanager_isrexpands_total") == 1
        assert _figure(got, "kafka_server_replicamanager_failedisrupdates_total") == 2
    asyncio.run(run())


def _meta(name: str, states: dict[int, PartitionState], adding: dict[int, tuple[int, ...]] | None = None
          ) -> TopicMeta:
    return TopicMeta(name, uuid.uuid4(), {i: s.replicas for i, s in states.items()}, {}, 0, 0, dict(states),
                     adding=adding or {})


def test_controller_figures_from_its_view_of_the_topics() -> None:
    topics = {
        "a": _meta("a", {0: _state(1, (1, 2, 3)), 1: _state(2, (2, 3)),  # 1: led by another than its preferred
                         2: _state(NO_LEADER, (3,))}),  # offline (and not led by its preferred replica)
        # led by broker 3, which is not live: offline, though led by its preferred replica (not imbalanced)
        "b": _meta("b", {0: _state(3, (3,), replicas=(3,))}),
        "gone": _meta("gone", {0: _state(NO_LEADER, (1,), replicas=(1,))}),  # being deleted: left out
        # the preferred replica (4) is being added: imbalanced only while it is not in the ISR
        "moving": _meta("moving", {0: _state(1, (1, 4), replicas=(4, 1)), 1: _state(1, (1,), replicas=(4, 1))},
                        adding={0: (4,), 1: (4,)}),
    }
    figures = controller_figures(topics, {"gone"}, {1, 2})
    assert (figures.active, figures.offline, figures.preferred_imbalance) == (1, 2, 3)
    assert (figures.topics, figures.partitions) == (4, 7)  # topics being deleted count, as in Kafka


def test_a_single_node_is_its_own_controller(tmp_path: Path) -> None:
    cluster = Cluster(BrokerConfig(**{"log.dirs": str(tmp_path)}))
    cluster.load()
    cluster.create_topic("t", 3, 1, {})
    got = _samples(controller_metrics(cluster))
    kc = "kafka_controller_kafkacontroller_"
    names = ("activecontrollercount", "globaltopiccount", "globalpartitioncount", "offlinepartitionscount",
             "preferredreplicaimbalancecount")
    assert [_figure(got, kc + n) for n in names] == [1, 1, 3, 0, 0]
    assert _figure(got, "kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 0
    got = _samples(replica_manager_metrics(cluster))
    assert _figure(got, "kafka_server_replicamanager_leadercount") == 3
    assert _figure(got, "kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_a_leader_from_outside_the_isr_counts_as_an_unclean_election() -> None:
    recorded: list[PartitionState] = []
    states = {0: _state(2, (2,)), 1: _state(2, (2, 3))}
    sync = SimpleNamespace(topics={"t": _meta("t", states)}, record=lambda n, i, s: recorded.append(s),
                           on_change=None, on_deletions=None)
    config = BrokerConfig(**{"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})
    controller = Controller(None, sync, 1, config)  # type: ignore[arg-type]  # writes replaced below
    controller._write_states = lambda writes: [(n, i, replace(s, zk_version=1)) for n, i, s, _ in writes]  # type: ignore[method-assign]
    writes = [("t", 0, _state(3, (3,), epoch=2), False),  # 3 was not in the ISR: unclean
              ("t", 1, _state(3, (3,), epoch=2), False)]  # 3 was: clean
    asyncio.run(controller.write(writes))
    assert len(recorded) == 2 and controller.stats.unclean_elections == 1


def test_zookeeper_session_events_as_kafkas_meters() -> None:
    stats = ZkSessionStats()
    for state in ("CONNECTED", "CONNECTING", "CONNECTED", "CONNECTING", "EXPIRED_SESSION", "CONNECTED", "CLOSED"):
        stats.observe(state)
    assert (stats.sync_connects, stats.disconnects, stats.expires, stats.auth_failures) == (3, 2, 1, 0)
