"""``GET /metrics``: the worker's figures for Prometheus, named as the common JMX-exporter rules name
Kafka Connect's beans (``kafka.connect:type=connect-worker-metrics`` -> ``kafka_connect_worker_*``,
``type=source-task-metrics,connector=c,task=t`` attribute ``source-record-write-total`` ->
``kafka_connect_source_task_metrics_source_record_write_total{connector,task}``), so dashboards built
on them mostly work. Read at scrape time from the herder and the tasks this worker runs; a task's own
figures (``SourceTask.metrics`` / ``SinkTask.metrics``: a CDC snapshot's progress, a mirror's lag) are
``headwater_task_metric{connector,task,name}`` for every number among them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from ..runtime.sink_task import WorkerSinkTask
from ..runtime.source_task import WorkerSourceTask

__all__ = ["CONTENT_TYPE", "scrape"]

# The text format every Prometheus server reads (generate_latest writes it)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _WorkerCollector:
    def __init__(self, herder: Any) -> None:
        self.herder = herder

    def collect(self) -> Iterator[Any]:
        herder, worker = self.herder, self.herder.worker
        mine = {k: v for k, v in herder.statuses.items() if v.worker_id == herder.worker_id}
        connectors = GaugeMetricFamily("kafka_connect_connect_worker_metrics_connector_count",
                                       "Connectors run by this worker", value=sum(1 for c, t in mine if t is None))
        tasks = GaugeMetricFamily("kafka_connect_connect_worker_metrics_task_count", "Tasks run by this worker",
                                  value=len(worker.task_ids()))
        by_state = GaugeMetricFamily("kafka_connect_connect_worker_metrics_connector_tasks", "Tasks by state",
                                     labels=["connector", "state"])
        counts: dict[tuple[str, str], int] = {}
        for (connector, task), status in herder.statuses.items():
            if task is not None:
                key = (connector, status.state.value.lower())
                counts[key] = counts.get(key, 0) + 1
        for (connector, state), n in sorted(counts.items()):
            by_state.add_metric([connector, state], n)
        status = GaugeMetricFamily("kafka_connect_connector_metrics_status",
                                   "1 for the connector's state (as this worker last heard it)",
                                   labels=["connector", "status"])
        for (connector, task), st in sorted(herder.statuses.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1)):
            if task is None:
                status.add_metric([connector, st.state.value.lower()], 1)
        yield from (connectors, tasks, by_state, status)

        written = CounterMetricFamily("kafka_connect_source_task_metrics_source_record_write",
                                      "Records a source task wrote to Kafka", labels=["connector", "task"])
        sent = CounterMetricFamily("kafka_connect_sink_task_metrics_sink_record_send",
                                   "Records handed to a sink task", labels=["connector", "task"])
        own = GaugeMetricFamily("headwater_task_metric", "A task's own figures (SourceTask/SinkTask.metrics)",
                                labels=["connector", "task", "name"])
        for task_id in worker.task_ids():
            running = worker.tasks.get(task_id)
            labels = [task_id.connector, str(task_id.task)]
            if isinstance(running, WorkerSourceTask):
                written.add_metric(labels, running.records_sent)
            elif isinstance(running, WorkerSinkTask):
                sent.add_metric(labels, running.records_put)
            figures = worker.task_metrics(task_id) or {}
            for name, value in sorted(figures.items()):
                if isinstance(value, bool):
                    value = int(value)
                if isinstance(value, int | float):
                    own.add_metric([*labels, name], value)
        yield from (written, sent, own)


def scrape(herder: Any) -> bytes:
    """The text exposition of this worker's figures now."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_WorkerCollector(herder))
    return generate_latest(registry)
