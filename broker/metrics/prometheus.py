"""The broker's Prometheus metrics: ``GET /metrics`` on ``metrics.listener`` (``http://HOST:PORT``).

Names are what Prometheus's JMX exporter makes of Kafka's broker MBeans with its example rules
(prometheus/jmx_exporter, ``examples/kafka-2_0_0.yml``, lower-cased output names), so dashboards
built on a JMX-exported Kafka mostly work; consumer lag uses kafka_exporter's names
(danielqsj/kafka_exporter), which is where such dashboards take lag from. docs/METRICS.md has
the labels, what each figure counts and a scrape example.

From ``kafka.server:type=BrokerTopicMetrics,name=<X>PerSec[,topic=T]`` attribute ``Count``
(rule ``kafka.(\\w+)<type=(.+), name=(.+)PerSec\\w*, (.+)=(.+)><>Count`` -> ``kafka_$1_$2_$3_total``),
counters, with ``{topic}`` per topic and without a label for all topics, as Kafka has both beans:

- ``kafka_server_brokertopicmetrics_bytesin_total``, ``..._bytesout_total``, ``..._messagesin_total``
- ``kafka_server_brokertopicmetrics_totalproducerequests_total``, ``..._failedproducerequests_total``,
  ``..._totalfetchrequests_total``, ``..._failedfetchrequests_total``

From ``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=R,version=V`` (same rule):
``kafka_network_requestmetrics_requests_total{request,version}``. From the histogram
``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=R`` (rules ``...><>Count`` ->
``kafka_$1_$2_$3_count`` and ``...><>(\\d+)thPercentile`` -> ``kafka_$1_$2_$3{quantile="0.$N"}``):
the summary ``kafka_network_requestmetrics_totaltimems{request,quantile}`` with quantiles 0.50, 0.75,
0.95, 0.98, 0.99 and 0.999, ``..._totaltimems_count{request}`` and the ``_sum`` the exporter lacks.
Request names are Kafka's (``Produce``, ``Fetch``, ``Metadata``, ...); a Fetch counts under both
``Fetch`` and ``FetchConsumer``, as Kafka counts a consumer's fetch (a follower's too: Kafka's FetchFollower).

From ``kafka.log:type=Log,name=<X>,topic=T,partition=P`` attribute ``Value`` (rule
``kafka.(\\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value`` -> ``kafka_$1_$2_$3``), gauges
``{topic,partition}``: ``kafka_log_log_logendoffset``, ``kafka_log_log_logstartoffset``,
``kafka_log_log_size``, ``kafka_log_log_numlogsegments``.

Replication and the controller (replication.py works the figures out; on a single node: every partition led,
nothing under-replicated, this node the controller). From ``kafka.server:type=ReplicaManager,name=<X>`` (rule
``...name=(.+)><>Value`` -> ``kafka_$1_$2_$3``): ``kafka_server_replicamanager_partitioncount``,
``..._leadercount``, ``..._underreplicatedpartitions``, ``..._underminisrpartitioncount``,
``..._atminisrpartitioncount``, ``..._reassigningpartitions``, and its meters ``..._isrshrinks_total``,
``..._isrexpands_total``, ``..._failedisrupdates_total``. From ``kafka.cluster:type=Partition,name=<X>,topic=T,
partition=P``: ``kafka_cluster_partition_underreplicated``, ``..._underminisr``, ``..._atminisr``,
``..._insyncreplicascount``, ``..._replicascount``. ``kafka_server_replicafetchermanager_maxlag{clientId="Replica"}``
and ``kafka_server_fetcherlagmetrics_consumerlag{clientId,topic,partition}`` (the followers' lag). From
``kafka.controller:type=KafkaController``: ``kafka_controller_kafkacontroller_activecontrollercount``,
``..._offlinepartitionscount``, ``..._preferredreplicaimbalancecount``, ``..._globaltopiccount``,
``..._globalpartitioncount`` (the controller's; 0 on the other brokers, as Kafka's); from
``kafka.controller:type=ControllerStats``: the summary ``kafka_controller_controllerstats_leaderelectionrateandtimems``
and ``..._uncleanleaderelections_total``. From ``kafka.server:type=SessionExpireListener``:
``kafka_server_sessionexpirelistener_sessionstate{state}`` and ``..._zookeeper<event>_total``.

From ``kafka.coordinator.group:type=GroupMetadataManager,name=<X>`` (rule
``kafka.coordinator.(\\w+)<type=(.+), name=(.+)><>Value`` -> ``kafka_coordinator_$1_$2_$3``):
``kafka_coordinator_group_groupmetadatamanager_numgroups``, ``..._numgroupsstable``,
``..._numgroupspreparingrebalance``, ``..._numgroupscompletingrebalance``, ``..._numgroupsempty``,
``..._numgroupsdead``, ``..._numoffsets``.

kafka_exporter's: ``kafka_consumergroup_current_offset{consumergroup,topic,partition}`` and
``kafka_consumergroup_lag{...}`` (for each topic a group committed on, every partition; -1 where it
has no committed offset), ``kafka_consumergroup_current_offset_sum{consumergroup,topic}``,
``kafka_consumergroup_lag_sum{consumergroup,topic}``, ``kafka_consumergroup_members{consumergroup}``,
``kafka_topic_partitions{topic}``, ``kafka_topic_partition_current_offset{topic,partition}`` and
``kafka_topic_partition_oldest_offset{topic,partition}``.

Counters come from ``stats.py`` (plain ints the request path adds to); gauges are read from the
topics, logs and groups when scraped. Both happen on the broker's event loop, which owns that state.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from .. import apis
from ..config.broker_config import parse_metrics_listener
from ..group.group import Group, GroupState
from ..protocol.codec import request_class
from ..topics.cluster import Cluster
from .replication import NOT_CONTROLLER, controller_figures, fetcher_lags, local_partitions, single_node_figures
from .stats import BrokerStats, ControllerStats, ReplicationStats

if TYPE_CHECKING:
    from ..cluster.membership import ClusterMembership
    from ..group.coordinator import GroupCoordinator
    from ..txn import TransactionCoordinator

__all__ = ["CONTENT_TYPE", "BrokerCollector", "MetricsEndpoint"]

# The text format every Prometheus server reads (what generate_latest writes)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# TopicCounters attribute -> the BrokerTopicMetrics meter it stands for, and what it counts
_TOPIC_METERS = (
    ("bytes_in", "BytesInPerSec", "Record-batch bytes appended by Produce"),
    ("bytes_out", "BytesOutPerSec", "Record-batch bytes returned by Fetch"),
    ("messages_in", "MessagesInPerSec", "Records appended by Produce (each batch header's record count)"),
    ("produce_requests", "TotalProduceRequestsPerSec", "Partitions in Produce requests"),
    ("failed_produce", "FailedProduceRequestsPerSec", "Partitions in Produce requests answered with an error"),
    ("fetch_requests", "TotalFetchRequestsPerSec", "Partitions in Fetch answers"),
    ("failed_fetch", "FailedFetchRequestsPerSec", "Partitions in Fetch answers with an error"),
)
# Yammer's percentile attributes (50thPercentile, ...) as the exporter's quantile label reads them
_QUANTILES = (("0.50", 0.5), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
# GroupMetadataManager gauge suffix per state
_GROUP_STATES = (("stable", GroupState.STABLE), ("preparingrebalance", GroupState.PREPARING_REBALANCE),
                 ("completingrebalance", GroupState.COMPLETING_REBALANCE), ("empty", GroupState.EMPTY),
                 ("dead", GroupState.DEAD))
_FETCH = 1  # API key


class BrokerCollector:
    """A prometheus-client collector over one broker's state; every figure is read at scrape time."""

    def __init__(self, cluster: Cluster, groups: GroupCoordinator,
                 transactions: TransactionCoordinator | None = None) -> None:
        self.cluster = cluster
        self.groups = groups
        self.transactions = transactions

    def collect(self) -> Iterator[Metric]:
        cluster = self.cluster
        yield from topic_metrics(cluster)
        yield from request_metrics(cluster.stats)
        yield from authentication_metrics(cluster.stats)
        yield from log_metrics(cluster)
        yield from replica_manager_metrics(cluster)
        yield from controller_metrics(cluster)
        yield from group_metrics(self.groups, cluster)
        if self.transactions is not None:
            yield from transaction_metrics(self.transactions)
        if cluster.membership is not None:
            yield from config_change_metrics(cluster.membership)
            yield from zookeeper_metrics(cluster.membership)


def topic_metrics(cluster: Cluster) -> Iterator[Metric]:
    topics = sorted(cluster.topics.items())
    for attr, bean, doc in _TOPIC_METERS:
        name = "kafka_server_brokertopicmetrics_" + bean.removesuffix("PerSec").lower()
        family = Metric(name, f"{doc} (kafka.server:type=BrokerTopicMetrics,name={bean}; no topic label: all topics)",
                        "counter")
        family.add_sample(name + "_total", {}, getattr(cluster.stats.all_topics, attr))
        for topic_name, topic in topics:
            family.add_sample(name + "_total", {"topic": topic_name}, getattr(topic.stats, attr))
        yield family


def request_names(api_key: int) -> list[str]:
    """Kafka's RequestMetrics names of an API (a consumer's Fetch counts as FetchConsumer too)."""
    cls = request_class(api_key)
    name = cls.name.removesuffix("Request") if cls is not None else f"Api{api_key}"
    return ["FetchConsumer", name] if api_key == _FETCH else [name]


def request_metrics(stats: BrokerStats) -> Iterator[Metric]:
    requests = Metric("kafka_network_requestmetrics_requests",
                      "Requests answered (kafka.network:type=RequestMetrics,name=RequestsPerSec)", "counter")
    total = Metric("kafka_network_requestmetrics_totaltimems",
                   "Milliseconds from a request read to its answer, quantiles over the API's last 1024 requests "
                   "(kafka.network:type=RequestMetrics,name=TotalTimeMs)", "summary")
    for key in sorted(apis.REGISTRY):  # every API served, so each series exists before its first request
        counters = stats.requests.get(key)
        times = sorted(counters.recent_times()) if counters is not None else []
        for name in request_names(key):
            if counters is not None:
                for version, n in sorted(counters.by_version.items()):
                    requests.add_sample(requests.name + "_total", {"request": name, "version": str(version)}, n)
            for label, q in _QUANTILES:
                total.add_sample(total.name, {"request": name, "quantile": label}, _quantile(times, q))
            total.add_sample(total.name + "_count", {"request": name}, counters.count if counters else 0)
            total.add_sample(total.name + "_sum", {"request": name}, counters.time_ms if counters else 0.0)
    yield requests
    yield total


def authentication_metrics(stats: BrokerStats) -> Iterator[Metric]:
    """Kafka's socket-server-metrics successful/failed-authentication-total, by listener (SASL exchanges and
    TLS client certificates)."""
    for index, word in ((0, "successful"), (1, "failed")):
        family = Metric(f"kafka_server_socket_server_metrics_{word}_authentication",
                        f"Connections that {'passed' if index == 0 else 'failed'} authentication "
                        f"(kafka.server:type=socket-server-metrics,name={word}-authentication-total)", "counter")
        for listener, counts in sorted(stats.authentications.items()):
            family.add_sample(family.name + "_total", {"listener": listener}, counts[index])
        yield family


def _quantile(ordered: list[float], q: float) -> float:
    """Yammer's snapshot quantile (linear between neighbours); 0 with no samples, as its histograms say."""
    if not ordered:
        return 0.0
    pos = q * (len(ordered) + 1)
    if pos < 1:
        return ordered[0]
    if pos >= len(ordered):
        return ordered[-1]
    lower = ordered[int(pos) - 1]
    return lower + (pos - int(pos)) * (ordered[int(pos)] - lower)


def log_metrics(cluster: Cluster) -> Iterator[Metric]:
    def gauge(name: str, doc: str, labels: tuple[str, ...] = ("topic", "partition")) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=list(labels))

    end = gauge("kafka_log_log_logendoffset", "Offset the next record will get (kafka.log:type=Log,name=LogEndOffset)")
    start = gauge("kafka_log_log_logstartoffset", "First offset kept (kafka.log:type=Log,name=LogStartOffset)")
    size = gauge("kafka_log_log_size", "Bytes in the partition's segments (kafka.log:type=Log,name=Size)")
    segments = gauge("kafka_log_log_numlogsegments", "Segments of the log (kafka.log:type=Log,name=NumLogSegments)")
    current = gauge("kafka_topic_partition_current_offset", "Log end offset (kafka_exporter)")
    oldest = gauge("kafka_topic_partition_oldest_offset", "Log start offset (kafka_exporter)")
    partitions = gauge("kafka_topic_partitions", "Partitions of the topic (kafka_exporter)", ("topic",))
    for name, topic in sorted(cluster.topics.items()):
        partitions.add_metric([name], len(topic.partitions))
        for p in topic.partitions:
            plog = p.log
            labels = [name, str(p.index)]
            end.add_metric(labels, plog.log_end_offset)
            start.add_metric(labels, plog.log_start_offset)
            size.add_metric(labels, plog.size_bytes)
            segments.add_metric(labels, len(plog.segments))
            current.add_metric(labels, plog.log_end_offset)
            oldest.add_metric(labels, plog.log_start_offset)
    yield from (end, start, size, segments, current, oldest, partitions)


def replica_manager_metrics(cluster: Cluster) -> Iterator[Metric]:
    """Kafka's ReplicaManager gauges and meters, its Partition gauges per partition, and the replica fetchers'
    lag (replication.py works the figures out)."""
    held = list(local_partitions(cluster))
    rm = "kafka_server_replicamanager_"
    bean = "(kafka.server:type=ReplicaManager,name={})"
    for name, doc, value in (
        ("PartitionCount", "Partitions on this broker", len(held)),
        ("LeaderCount", "Partitions this broker leads", sum(f.leader for f in held)),
        ("UnderReplicatedPartitions", "Partitions led here whose ISR is smaller than their replicas",
         sum(f.under_replicated for f in held)),
        ("UnderMinIsrPartitionCount", "Partitions led here whose ISR is below min.insync.replicas",
         sum(f.under_min_isr for f in held)),
        ("AtMinIsrPartitionCount", "Partitions led here whose ISR is exactly min.insync.replicas",
         sum(f.at_min_isr for f in held)),
        ("ReassigningPartitions", "Partitions led here being reassigned",
         sum(f.leader and f.reassigning for f in held)),
    ):
        yield GaugeMetricFamily(rm + name.lower(), f"{doc} {bean.format(name)}", value=value)
    replication = cluster.replication
    stats = replication.stats if replication is not None else ReplicationStats()
    for name, doc, count in (
        ("IsrShrinksPerSec", "ISR shrinks this broker made as leader", stats.isr_shrinks),
        ("IsrExpandsPerSec", "ISR expansions this broker made as leader", stats.isr_expands),
        ("FailedIsrUpdatesPerSec", "ISR changes this broker could not write", stats.failed_isr_updates),
    ):
        yield CounterMetricFamily(rm + name.removesuffix("PerSec").lower(), f"{doc} {bean.format(name)}", value=count)
    by_partition = ["topic", "partition"]
    gauges = {name: GaugeMetricFamily("kafka_cluster_partition_" + name.lower(),
                                      f"{doc} (kafka.cluster:type=Partition,name={name})", labels=by_partition)
              for name, doc in (("UnderReplicated", "1: led here and under-replicated"),
                                ("UnderMinIsr", "1: led here and its ISR below min.insync.replicas"),
                                ("AtMinIsr", "1: led here and its ISR at min.insync.replicas"),
                                ("InSyncReplicasCount", "Its ISR's size (0 unless led here)"),
                                ("ReplicasCount", "Its replicas (0 unless led here)"))}
    for f in held:
        labels = [f.topic, str(f.index)]
        gauges["UnderReplicated"].add_metric(labels, int(f.under_replicated))
        gauges["UnderMinIsr"].add_metric(labels, int(f.under_min_isr))
        gauges["AtMinIsr"].add_metric(labels, int(f.at_min_isr))
        gauges["InSyncReplicasCount"].add_metric(labels, f.isr if f.leader else 0)
        gauges["ReplicasCount"].add_metric(labels, f.replicas if f.leader else 0)
    yield from gauges.values()
    lags = list(fetcher_lags(cluster))
    max_lag = GaugeMetricFamily("kafka_server_replicafetchermanager_maxlag",
                                "Largest lag of a partition this broker follows, in records "
                                "(kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica)",
                                labels=["clientId"])
    max_lag.add_metric(["Replica"], max((lag for *_, lag in lags), default=0))
    yield max_lag
    consumer_lag = GaugeMetricFamily("kafka_server_fetcherlagmetrics_consumerlag",
                                     "Leader's high watermark minus this follower's log end, as of its last fetch "
                                     "(kafka.server:type=FetcherLagMetrics,name=ConsumerLag)",
                                     labels=["clientId", "topic", "partition"])
    for leader, topic, index, lag in lags:
        consumer_lag.add_metric([f"ReplicaFetcherThread-0-{leader}", topic, str(index)], lag)
    yield consumer_lag


def controller_metrics(cluster: Cluster) -> Iterator[Metric]:
    """Kafka's KafkaController gauges (the controller's figures; 0 on the other brokers) and ControllerStats."""
    membership = cluster.membership
    controller = membership.controller if membership is not None else None
    if membership is None:
        figures = single_node_figures(cluster)
    elif controller is not None and controller.is_active and membership.topics is not None:
        sync = membership.topics
        figures = controller_figures(sync.topics, sync.deleting, controller.live)
    else:
        figures = NOT_CONTROLLER
    kc = "kafka_controller_kafkacontroller_"
    bean = "(kafka.controller:type=KafkaController,name={})"
    for name, doc, value in (
        ("ActiveControllerCount", "1 on the active controller", figures.active),
        ("OfflinePartitionsCount", "Partitions without a live leader (controller only)", figures.offline),
        ("PreferredReplicaImbalanceCount", "Partitions not led by their preferred replica (controller only)",
         figures.preferred_imbalance),
        ("GlobalTopicCount", "Topics in the cluster (controller only)", figures.topics),
        ("GlobalPartitionCount", "Partitions with a state in the cluster (controller only)", figures.partitions),
    ):
        yield GaugeMetricFamily(kc + name.lower(), f"{doc} {bean.format(name)}", value=value)
    stats = controller.stats if controller is not None else ControllerStats()
    elections = stats.leader_elections
    timer = Metric("kafka_controller_controllerstats_leaderelectionrateandtimems",
                   "Milliseconds the controller took over each change of the live brokers, quantiles over the last "
                   "1024 (kafka.controller:type=ControllerStats,name=LeaderElectionRateAndTimeMs)", "summary")
    times = sorted(elections.recent_times())
    for label, q in _QUANTILES:
        timer.add_sample(timer.name, {"quantile": label}, _quantile(times, q))
    timer.add_sample(timer.name + "_count", {}, elections.count)
    timer.add_sample(timer.name + "_sum", {}, elections.time_ms)
    yield timer
    yield CounterMetricFamily("kafka_controller_controllerstats_uncleanleaderelections",
                              "Leaders elected from outside the ISR "
                              "(kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec)",
                              value=stats.unclean_elections)


# Kafka's ZooKeeper client states (ZooKeeper.States, as its SessionState gauge names them) by kazoo's KeeperState
_SESSION_STATES = {"CONNECTED": "CONNECTED", "CONNECTED_RO": "CONNECTEDREADONLY", "CONNECTING": "CONNECTING",
                   "AUTH_FAILED": "AUTH_FAILED", "EXPIRED_SESSION": "CLOSED", "CLOSED": "CLOSED"}
_SESSION_METERS = (("ZooKeeperDisconnectsPerSec", "disconnects"), ("ZooKeeperSyncConnectsPerSec", "sync_connects"),
                   ("ZooKeeperAuthFailuresPerSec", "auth_failures"),
                   ("ZooKeeperReadOnlyConnectsPerSec", "readonly_connects"), ("ZooKeeperExpiresPerSec", "expires"))


def zookeeper_metrics(membership: ClusterMembership) -> Iterator[Metric]:
    """Kafka's ``kafka.server:type=SessionExpireListener``: the ZooKeeper session's state, 1 for the state it is
    in (Kafka's gauge has the state's name as its value, which the JMX exporter cannot export), and its events."""
    bean = "(kafka.server:type=SessionExpireListener,name={})"
    state = _SESSION_STATES.get(membership.session_state, "CLOSED")
    family = GaugeMetricFamily("kafka_server_sessionexpirelistener_sessionstate",
                               "1 for the ZooKeeper session's state " + bean.format("SessionState"), labels=["state"])
    for name in sorted(set(_SESSION_STATES.values())):
        family.add_metric([name], int(name == state))
    yield family
    stats = membership.session_stats
    for name, attr in _SESSION_METERS:
        yield CounterMetricFamily("kafka_server_sessionexpirelistener_" + name.removesuffix("PerSec").lower(),
                                  f"ZooKeeper connection events {bean.format(name)}", value=getattr(stats, attr))


def group_metrics(coordinator: GroupCoordinator, cluster: Cluster) -> Iterator[Metric]:
    groups = sorted(coordinator.groups.items())
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    bean = "(kafka.coordinator.group:type=GroupMetadataManager,name={})"
    yield GaugeMetricFamily(prefix + "numgroups", "Groups " + bean.format("NumGroups"), value=len(groups))
    states = Counter(group.state for _, group in groups)
    for suffix, state in _GROUP_STATES:
        name = "NumGroups" + state.value
        yield GaugeMetricFamily(prefix + "numgroups" + suffix, f"Groups in state {state.value} " + bean.format(name),
                                value=states[state])
    yield GaugeMetricFamily(prefix + "numoffsets", "Committed offsets " + bean.format("NumOffsets"),
                            value=sum(len(group.offsets) for _, group in groups))
    yield from _lag_metrics(groups, cluster)


def transaction_metrics(coordinator: TransactionCoordinator) -> Iterator[Metric]:
    """Headwater's: transactional ids by their transaction's state (Kafka's state names), and the
    coordinator's failures (marker writes, expirations, periodic rounds; each logged, then retried)."""
    states = GaugeMetricFamily("headwater_transactions", "Transactional ids by the state of their transaction",
                               labels=["state"])
    for state, count in sorted(Counter(t.state.kafka_name for t in coordinator.txns.values()).items()):
        states.add_metric([state], count)
    yield states
    yield CounterMetricFamily("headwater_transaction_coordinator_failures",
                              "Failures of the transaction coordinator, each logged and retried",
                              value=coordinator.failures)


def config_change_metrics(membership: ClusterMembership) -> Iterator[Metric]:
    """Headwater's: config changes from ZooKeeper this broker could not read or apply (each logged;
    broker/cluster/config_changes.py and config_sync.py)."""
    changes, configs = membership.config_changes, membership.configs
    failures = (changes.failures if changes is not None else 0) + (configs.failures if configs is not None else 0)
    yield CounterMetricFamily("headwater_config_change_failures",
                              "Config changes from ZooKeeper not read or not applied, each logged", value=failures)


def _lag_metrics(groups: list[tuple[str, Group]], cluster: Cluster) -> Iterator[Metric]:
    """kafka_exporter's figures: for each topic a group committed on, every partition's committed offset
    (-1: none) and lag (log end offset - committed offset; -1 without a committed offset)."""
    by_partition = ["consumergroup", "topic", "partition"]
    current = GaugeMetricFamily("kafka_consumergroup_current_offset",
                                "Committed offset of the group (-1: none)", labels=by_partition)
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "Log end offset minus the group's committed offset "
                            "(-1: no committed offset)", labels=by_partition)
    current_sum = GaugeMetricFamily("kafka_consumergroup_current_offset_sum",
                                    "Committed offsets of the group on the topic, summed", labels=by_partition[:2])
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of the group on the topic, summed over the "
                                "partitions with a committed offset", labels=by_partition[:2])
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of the group", labels=["consumergroup"])
    for group_id, group in groups:
        members.add_metric([group_id], len(group.members))
        for topic_name in sorted({t for t, _ in group.offsets}):
            topic = cluster.topics.get(topic_name)
            if topic is None:  # offsets of a deleted topic
                continue
            offsets_sum = lags_sum = 0
            for p in topic.partitions:
                index, plog = p.index, p.log
                committed = group.offsets.get((topic_name, index))
                labels = [group_id, topic_name, str(index)]
                if committed is None:
                    current.add_metric(labels, -1)
                    lag.add_metric(labels, -1)
                    continue
                behind = plog.log_end_offset - committed.offset
                current.add_metric(labels, committed.offset)
                lag.add_metric(labels, behind)
                offsets_sum += committed.offset
                lags_sum += behind
            current_sum.add_metric([group_id, topic_name], offsets_sum)
            lag_sum.add_metric([group_id, topic_name], lags_sum)
    yield from (current, lag, current_sum, lag_sum, members)


class MetricsEndpoint:
    """The HTTP listener Prometheus scrapes, on the broker's own event loop."""

    def __init__(self, cluster: Cluster, groups: GroupCoordinator,
                 transactions: TransactionCoordinator | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(cluster, groups, transactions))
        self._runner: web.AppRunner | None = None

    async def start(self, listener: str) -> str:
        """Bind ``listener`` (``http://HOST:PORT``); returns the scrape URL (with the port bound)."""
        host, port = parse_metrics_listener(listener)
        app = web.Application()
        app.router.add_get("/metrics", self._scrape)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host or None, port, reuse_address=True).start()
        except OSError as exc:
            await runner.cleanup()
            reason = os.strerror(exc.errno) if exc.errno else str(exc)
            raise OSError(exc.errno, f"metrics.listener {listener}: cannot listen ({reason})") from None
        self._runner = runner
        bound = runner.addresses[0][1]
        shown = host or "0.0.0.0"
        return f"http://{f'[{shown}]' if ':' in shown else shown}:{bound}/metrics"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _scrape(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE})
