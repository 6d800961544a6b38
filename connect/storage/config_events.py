"""What the config store saw in the config topic, one typed event per kind of record.

``KafkaConfigStore`` updates its snapshot first, then hands the event to its listener (the
distributed herder, which queues it for its loop).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConfigEvent", "ConnectorConfigSeen", "ConnectorRemoved", "LoggerLevelSeen", "RestartRequested",
           "TargetStateSeen", "TaskConfigsCommitted", "TaskCountRecorded"]


@dataclass(frozen=True)
class ConnectorConfigSeen:
    """``connector-<name>``: a connector's config was written."""

    name: str


@dataclass(frozen=True)
class ConnectorRemoved:
    """A tombstone for ``connector-<name>``: the connector was deleted."""

    name: str


@dataclass(frozen=True)
class TaskConfigsCommitted:
    """``commit-<name>``: a connector's task configs were replaced (or found incomplete)."""

    name: str


@dataclass(frozen=True)
class TaskCountRecorded:
    """``tasks-fencing-<name>``: the leader fenced the producers of the connector's older task generations
    and recorded its task count (KIP-618); its source tasks pending that fencing may start."""

    name: str


@dataclass(frozen=True)
class TargetStateSeen:
    """``target-state-<name>``: a connector was paused, resumed or stopped."""

    name: str


@dataclass(frozen=True)
class RestartRequested:
    """``restart-connector-<name>``: the owners of a connector (and its tasks) restart them."""

    name: str
    include_tasks: bool
    only_failed: bool


@dataclass(frozen=True)
class LoggerLevelSeen:
    """``logger-cluster-<namespace>``: every worker sets the namespace's level."""

    namespace: str
    level: str


ConfigEvent = (ConnectorConfigSeen | ConnectorRemoved | TaskConfigsCommitted | TaskCountRecorded | TargetStateSeen
               | RestartRequested | LoggerLevelSeen)
