"""Reading Debezium change-event envelopes in sinks, as Connect values (a Struct with schemas, a dict
without): shared by the Postgres and Spark sinks."""

from __future__ import annotations

from typing import Any

from headwater.connect.api.data import Struct

__all__ = ["get", "is_envelope"]


def get(value: Any, name: str) -> Any:
    """A field of a Struct or a map (None when absent)."""
    return value.values.get(name) if isinstance(value, Struct) else value.get(name)


def is_envelope(value: Any) -> bool:
    """Whether a value is a Debezium envelope (``op``, ``after``; ``source`` for schemaless maps)."""
    if isinstance(value, Struct):
        return (value.schema.name or "").endswith(".Envelope") or (
            value.schema.field("op") is not None and value.schema.field("after") is not None)
    return isinstance(value, dict) and "op" in value and "after" in value and "source" in value
