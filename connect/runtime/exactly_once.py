"""Validation of a source connector's ``exactly.once.support`` against the worker and the connector (KIP-618),
with Kafka's messages, so a config asking for what cannot be given is refused before anything starts."""

from __future__ import annotations

from typing import Any

from ..api import SourceConnector
from ..api.exactly_once import EXACTLY_ONCE_LEVELS, ExactlyOnceSupport, choice
from ..config import WorkerConfig

__all__ = ["exactly_once_problems", "worker_exactly_once_enabled"]

NOT_ENABLED = "This worker does not have exactly-once source support enabled."
NO_PREFLIGHT = ("The connector does not implement the API required for preflight validation of exactly-once source "
                "support. Please consult the documentation for the connector to determine whether it supports "
                "exactly-once semantics, and then consider reconfiguring the connector to use the value "
                "\"requested\" for this property (which will disable this preflight check and allow the connector "
                "to be created).")
UNSUPPORTED = "The connector does not support exactly-once semantics with the provided configuration."


def worker_exactly_once_enabled(config: WorkerConfig) -> bool:
    """The worker's ``exactly.once.source.support`` is ``enabled`` (connect/unhonoured.py refuses it at start
    until source tasks deliver exactly once, so today this is never true)."""
    return str((config.model_extra or {}).get("exactly.once.source.support", "disabled")).strip().lower() == "enabled"


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
