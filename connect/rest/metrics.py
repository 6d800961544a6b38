"""``GET /metrics``: the worker's figures for Prometheus, named as the common JMX-exporter rules name
Kafka Connect's beans (``kafka.connect:type=connect-worker-metrics`` -> ``kafka_connect_worker_*``,
``type=source-task-metrics,connector=c,task=t`` attribute ``source-record-write-total`` ->
``kafka_connect_source_task_metrics_source_record_write_total{connector,task}``), so dashboards built
on them mostly work: connector and task counts and states, source records polled and written, sink records
read and sent, offset commit latency (``connector-task-metrics``), dead-letter-queue records
(``task-error-metrics``), rebalances (``connect-worker-rebalance-metrics``), and a sink's lag per partition
as its consumer's ``records-lag``. Read at scrape time from the herder and the tasks this worker runs; a task's own
figures (``SourceTask.metrics`` / ``SinkTask.metrics``: a CDC snapshot's progress, a mirror's lag) are
``headwater_task_metric{connector,task,name}`` for every number among them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..herder.interface import Herder

__all__ = ["CONTENT_TYPE", "scrape"]

log = logging.getLogger(__name__)

# The text format every Prometheus server reads (generate_latest writes it)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _WorkerCollector:
    def __init__(self, herder: Herder) -> None:
        self.herder = herder

    def collect(self) -> Iterator[Any]:
        herder = self.herder
        mine = {k: v for k, v in herder.statuses.items() if v.worker_id == herder.worker_id}
        connectors = GaugeMetricFamily("kafka_connect_connect_worker_metrics_connector_count",
                                       "Connectors run by this worker", value=sum(1 for c, t in mine if t is None))
        tasks = GaugeMetricFamily("kafka_connect_connect_worker_metrics_task_count", "Tasks run by this worker",
                                  value=herder.local_task_count())
        by_state = GaugeMetricFamily("kafka_connect_connect_worker_metrics_connector_tasks", "Tasks by state",
                                     labels=["connector", "state"])
        counts: dict[tuple[str, str], int] = {}
        for (connector, number), st in herder.statuses.items():
            if number is not None:
                key = (connector, st.state.value.lower())
                counts[key] = counts.get(key, 0) + 1
        for (connector, state), n in sorted(counts.items()):
            by_state.add_metric([connector, state], n)
        status = GaugeMetricFamily("kafka_connect_connector_metrics_status",
                                   "1 for the connector's state (as this worker last heard it)",
                                   labels=["connector", "status"])
        for (connector, number), st in sorted(herder.statuses.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
            if number is None:
                status.add_metric([connector, st.state.value.lower()], 1)
        yield from (connectors, tasks, by_state, status)

        yield from _rebalances(herder.rebalance_metrics())

        # each runtime figure of a task (WorkerTask.runtime_metrics) as the bean attribute it mirrors
        by_figure = {figure: kind(name, doc, labels=list(TASK)) for figure, kind, name, doc in TASK_FIGURES}
        lag = GaugeMetricFamily("kafka_consumer_consumer_fetch_manager_metrics_records_lag",
                                "Records between a sink task's position and the partition's end (as of its last fetch)",
                                labels=["client_id", "topic", "partition", *TASK])
        own = GaugeMetricFamily("headwater_task_metric",
                                "A task's own figures (SourceTask/SinkTask.metrics; nested names joined with dots)",
                                labels=[*TASK, "name"])
        for task_id, task in herder.record_tasks():
            labels = [task_id.connector, str(task_id.task)]
            runtime = task.runtime_metrics()
            for figure, metric in by_figure.items():
                if figure in runtime:
                    metric.add_metric(labels, runtime[figure])
            client = f"connector-consumer-{task_id.connector}-{task_id.task}"  # as Kafka names a sink's consumer
            for p in runtime.get("consumer-lag", []):
                if p["lag"] is not None:
                    lag.add_metric([client, p["topic"], str(p["partition"]), *labels], p["lag"])
            for name, value in _numbers(task.metrics()):
                own.add_metric([*labels, name], value)
        yield from (*by_figure.values(), lag, own)
        yield from _exported(herder)


TASK = ("connector", "task")
_C, _G = CounterMetricFamily, GaugeMetricFamily
TASK_FIGURES = (
    ("source-record-poll-total", _C, "kafka_connect_source_task_metrics_source_record_poll",
     "Records a source task's poll returned"),
    ("source-record-write-total", _C, "kafka_connect_source_task_metrics_source_record_write",
     "Records a source task wrote to Kafka"),
    ("sink-record-read-total", _C, "kafka_connect_sink_task_metrics_sink_record_read",
     "Records a sink task read from Kafka"),
    ("sink-record-send-total", _C, "kafka_connect_sink_task_metrics_sink_record_send", "Records handed to a sink task"),
    ("offset-commit-avg-time-ms", _G, "kafka_connect_connector_task_metrics_offset_commit_avg_time_ms",
     "Average time of the task's recent offset commits"),
    ("offset-commit-max-time-ms", _G, "kafka_connect_connector_task_metrics_offset_commit_max_time_ms",
     "Longest of the task's recent offset commits"),
    ("offset-commit-completion-total", _C, "kafka_connect_connector_task_metrics_offset_commit_completion",
     "Offset commits that wrote offsets"),
    ("offset-commit-failure-total", _C, "kafka_connect_connector_task_metrics_offset_commit_failure",
     "Offset commits that failed"),
    ("deadletterqueue-produce-requests", _C, "kafka_connect_task_error_metrics_deadletterqueue_produce_requests",
     "Records written to the dead letter queue"),
)


def _numbers(figures: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every number among a task's figures, nested ones named ``outer.inner`` (a CDC task's
    ``streaming.retained.wal.bytes``, a mirror's ``replication_lag.<topic-partition>.records``)."""
    for name, value in sorted(figures.items()):
        if isinstance(value, dict):
            yield from _numbers(value, f"{prefix}{name}.")
        elif isinstance(value, bool):
            yield prefix + name, int(value)
        elif isinstance(value, int | float):
            yield prefix + name, value


def _exported(herder: Herder) -> Iterator[Any]:
    """The tasks' samples under names of their own, one family per name (``MetricSample``)."""
    families: dict[str, Any] = {}
    label_names: dict[str, list[str]] = {}
    for task_id, task in herder.record_tasks():
        for sample in task.exported_metrics():
            labels = {**sample.labels, "connector": task_id.connector, "task": str(task_id.task)}
            names = sorted(labels)
            family = families.get(sample.name)
            if family is None:
                kind = CounterMetricFamily if sample.counter else GaugeMetricFamily
                family = families[sample.name] = kind(sample.name, sample.help or sample.name, labels=names)
                label_names[sample.name] = names
            elif label_names[sample.name] != names:
                log.warning("task %s: metric %s with labels %s, not %s as before; skipped", task_id, sample.name,
                            names, label_names[sample.name])
                continue
            family.add_metric([labels[n] for n in names], sample.value)
    yield from families.values()


def _rebalances(figures: dict[str, Any] | None) -> Iterator[Any]:
    """kafka.connect:type=connect-worker-rebalance-metrics, for a worker in a group."""
    if figures is None:
        return
    base = "kafka_connect_connect_worker_rebalance_metrics_"
    yield CounterMetricFamily(base + "completed_rebalances", "Rebalances this worker completed",
                              value=figures["completed-rebalances-total"])
    for key, doc in (("rebalancing", "1 while this worker is in a rebalance"),
                     ("rebalance-avg-time-ms", "Average time of recent rebalances"),
                     ("rebalance-max-time-ms", "Longest of recent rebalances"),
                     ("time-since-last-rebalance-ms", "Time since the last completed rebalance (-1: none yet)"),
                     ("epoch", "The group generation of the worker's assignment")):
        yield GaugeMetricFamily(base + key.replace("-", "_"), doc, value=float(figures[key]))


def scrape(herder: Herder) -> bytes:
    """The text exposition of this worker's figures now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_WorkerCollector(herder))
    return generate_latest(registry)
