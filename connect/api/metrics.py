"""A sample a task exports to Prometheus under a name of its own (``SourceTask.exported_metrics`` /
``SinkTask.exported_metrics``), so a connector can keep the names dashboards already know for it: those the
common JMX-exporter rules give Debezium's or MirrorMaker's beans, for instance."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["MetricSample"]


@dataclass(frozen=True)
class MetricSample:
    #: The Prometheus name; a counter's without its ``_total`` suffix (the exposition adds it)
    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)
    help: str = ""
    counter: bool = False
