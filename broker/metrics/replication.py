"""What Kafka's replication and controller gauges say, worked out from this broker's state when scraped
(``prometheus.py`` turns them into samples).

As Kafka's ReplicaManager and Partition gauges (``kafka.server:type=ReplicaManager``,
``kafka.cluster:type=Partition``): a partition is under-replicated when this broker leads it and its ISR is
smaller than its replication factor (a reassignment's replicas being added left out of that factor, as Kafka's
``OngoingReassignmentState``), under / at its minimum ISR when this broker leads it and its ISR is below /
equal to ``min.insync.replicas`` capped at its replica count (Kafka's ``effectiveMinIsr``). As Kafka's
KafkaController gauges, the cluster-wide figures are the controller's alone (0 on every other broker): offline
partitions are those whose leader is none or not live, imbalanced ones those not led by their preferred replica
(while the preferred replica is being added by a reassignment: those where it is not yet in the ISR), both
leaving out topics being deleted; the partition count is of partitions with a state (Kafka's
``partitionWithLeadersCount``). A single node leads all its partitions alone and is its own controller.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..replication.state import NO_LEADER

if TYPE_CHECKING:
    from ..cluster.topic_meta import TopicMeta
    from ..topics.cluster import Cluster

__all__ = ["NOT_CONTROLLER", "ControllerFigures", "PartitionFigures", "controller_figures", "fetcher_lags",
           "local_partitions", "single_node_figures"]


@dataclass(frozen=True, slots=True)
class PartitionFigures:
    """One partition held on this broker."""

    topic: str
    index: int
    leader: bool  # this broker leads it
    replicas: int  # the replication factor
    isr: int
    min_isr: int  # min.insync.replicas, capped at the replica count
    reassigning: bool = False

    @property
    def under_replicated(self) -> bool:
        return self.leader and self.isr < self.replicas

    @property
    def under_min_isr(self) -> bool:
        return self.leader and self.isr < self.min_isr

    @property
    def at_min_isr(self) -> bool:
        return self.leader and self.isr == self.min_isr


def local_partitions(cluster: Cluster) -> Iterator[PartitionFigures]:
    """Every partition this broker holds, by topic and index."""
    membership = cluster.membership
    metas = membership.topics.topics if membership is not None and membership.topics is not None else {}
    for name, topic in sorted(cluster.topics.items()):
        meta = metas.get(name) if name in cluster.replicated else None
        for p in topic.partitions:
            replica: Any = p.replica
            if replica is not None:
                state = replica.state
                adding = meta.adding.get(p.index, ()) if meta is not None else ()
                reassigning = meta is not None and (p.index in meta.adding or p.index in meta.removing)
                yield PartitionFigures(name, p.index, replica.is_leader,
                                       len([r for r in state.replicas if r not in adding]), len(state.isr),
                                       replica.min_insync(), reassigning)
            elif name in cluster.replicated:  # a cluster replica not handed its state yet: neither role
                yield PartitionFigures(name, p.index, False, 0, 0, 0)
            else:  # a single node's (or, on a cluster's broker, a topic of its own): led here, alone
                yield PartitionFigures(name, p.index, True, 1, 1, min(p.log.config.min_insync_replicas, 1))


@dataclass(frozen=True, slots=True)
class ControllerFigures:
    active: int  # 1 on the active controller
    offline: int
    preferred_imbalance: int
    topics: int
    partitions: int


def controller_figures(topics: Mapping[str, TopicMeta], deleting: frozenset[str] | set[str],
                       live: frozenset[int] | set[int]) -> ControllerFigures:
    """The active controller's figures, from its view of the cluster's topics and the live brokers."""
    offline = imbalanced = partitions = 0
    for name, meta in topics.items():
        for index, state in meta.states.items():
            partitions += 1
            if name in deleting:
                continue
            if state.leader == NO_LEADER or state.leader not in live:
                offline += 1
            replicas = meta.assignment.get(index, state.replicas)
            preferred = replicas[0] if replicas else NO_LEADER
            if preferred in meta.adding.get(index, ()):
                imbalanced += int(preferred not in state.isr)
            else:
                imbalanced += int(state.leader != preferred)
    return ControllerFigures(1, offline, imbalanced, len(topics), partitions)


def single_node_figures(cluster: Cluster) -> ControllerFigures:
    """A single node is its own controller, leading every partition: none offline, none imbalanced."""
    return ControllerFigures(1, 0, 0, len(cluster.topics), sum(len(t.partitions) for t in cluster.topics.values()))


NOT_CONTROLLER = ControllerFigures(0, 0, 0, 0, 0)


def fetcher_lags(cluster: Cluster) -> Iterator[tuple[int, str, int, int]]:
    """(leader broker, topic, partition, lag) of every partition this broker follows: the leader's high
    watermark minus this replica's log end, as of its last fetch (Kafka's FetcherLagMetrics ConsumerLag)."""
    replication = cluster.replication
    if replication is None:
        return
    for leader, fetcher in sorted(replication.fetchers.items()):
        for (topic, index), replica in sorted(fetcher.replicas.items()):
            yield leader, topic, index, replica.fetch_lag
