"""Validation of a source connector's ``exactly.once.support`` against the worker and the connector (KIP-618),
with Kafka's messages, so a config asking for what cannot be given is refused before anything starts."""

from __future__ import annotations

from typing import Any

from ..api import SourceConnector
from ..api.exactly_once import EXACTLY_ONCE_LEVELS, ExactlyOnceSupport, choice
from ..config import WORKER_SUPPORT_LEVELS, WorkerConfig

__all__ = ["TASK_COUNT_RECORD_PREFIX", "WORKER_SUPPORT_LEVELS", "exactly_once_problems", "transactional_id",
           "worker_exactly_once_enabled", "worker_exactly_once_level"]

#: config-topic key of the task count the leader recorded after fencing a connector's zombies:
#: ``tasks-fencing-<connector>`` with value ``{"task-count": N}`` (Kafka's KafkaConfigBackingStore names the
#: key TASK_COUNT_RECORD_KEY and spells it so; the same key lets a Kafka Connect cluster's topic read the same)
TASK_COUNT_RECORD_PREFIX = "tasks-fencing-"

NOT_ENABLED = "This worker does not have exactly-once source support enabled."
NO_PREFLIGHT = ("The connector does not implement the API required for preflight validation of exactly-once source "
                "support. Please consult the documentation for the connector to determine whether it supports "
                "exactly-once semantics, and then consider reconfiguring the connector to use the value "
                "\"requested\" for this property (which will disable this preflight check and allow the connector "
                "to be created).")
UNSUPPORTED = "The connector does not support exactly-once semantics with the provided configuration."


def worker_exactly_once_level(config: WorkerConfig) -> str:
    """The worker's ``exactly.once.source.support``, lower-cased: one of WORKER_SUPPORT_LEVELS."""
    return config.exactly_once_source_support


def worker_exactly_once_enabled(config: WorkerConfig) -> bool:
    """Source tasks of this worker run with a transactional producer (``exactly.once.source.support=enabled``)."""
    return worker_exactly_once_level(config) == "enabled"


def transactional_id(group_id: str, connector: str, task: int) -> str:
    """The ``transactional.id`` of a source task's producer under exactly-once support, as Kafka forms it
    (``<group.id>-<connector>-<task>``): the same id in every generation, so a new instance fences the old."""
    return f"{group_id}-{connector}-{task}"


def exactly_once_problems(cls: type[SourceConnector], props: dict[str, Any], worker_enabled: bool) -> list[str]:
    """Why ``exactly.once.support=required`` cannot be honoured (empty: it can, or it was not asked for)."""
    try:
        level = choice(str(props.get("exactly.once.support", "requested")), EXACTLY_ONCE_LEVELS)
    except ValueError:
        return []  # the config model names the bad value
    if level != "required":
        return []
    problems = [] if worker_enabled else [NOT_ENABLED]
    try:
        support = cls().exactly_once_support({k: str(v) for k, v in props.items()})
    except Exception as exc:  # a connector's own check failing is a validation error, not a 500
        problems.append(f"Failed while validating connector support for exactly-once semantics: "
                        f"{type(exc).__name__}: {exc}")
    else:
        if support is None:
            problems.append(NO_PREFLIGHT)
        elif support is not ExactlyOnceSupport.SUPPORTED:
            problems.append(UNSUPPORTED)
    return problems
