"""Reading Debezium change-event envelopes in sinks, as Connect values (a Struct with schemas, a dict
without), and the placeholder of values the source could not see: shared by the Postgres and Spark sinks."""

from __future__ import annotations

from typing import Any

from headwater.connect.api.data import Struct

__all__ = ["UNAVAILABLE", "Unavailable", "get", "is_envelope"]

#: Debezium's default ``unavailable.value.placeholder``: an unchanged TOASTed value that pgoutput does not resend
UNAVAILABLE = "__debezium_unavailable_value"


def get(value: Any, name: str) -> Any:
    """A field of a Struct or a map (None when absent)."""
    return value.values.get(name) if isinstance(value, Struct) else value.get(name)


def is_envelope(value: Any) -> bool:
    """Whether a value is a Debezium envelope (``op``, ``after``; ``source`` for schemaless maps)."""
    if isinstance(value, Struct):
        return (value.schema.name or "").endswith(".Envelope") or (
            value.schema.field("op") is not None and value.schema.field("after") is not None)
    return isinstance(value, dict) and "op" in value and "after" in value and "source" in value


class Unavailable:
    """Debezium's ``unavailable.value.placeholder`` in the shapes a column carries it: the text itself
    (text, varchar, json, jsonb, enums ...), its UTF-8 bytes (bytea), or a one-element list of either
    (arrays)."""

    def __init__(self, placeholder: str = UNAVAILABLE) -> None:
        self.text = placeholder
        self.shapes = (placeholder, placeholder.encode(), [placeholder], [placeholder.encode()])

    def columns(self, row: dict[str, Any]) -> tuple[str, ...]:
        """The row's columns holding the placeholder (the usual answer, none, costs a few C-level scans)."""
        values = row.values()
        if not any(shape in values for shape in self.shapes):
            return ()
        return tuple(name for name, v in row.items() if isinstance(v, str | bytes | list) and v in self.shapes)

    def fill(self, row: dict[str, Any], missing: tuple[str, ...], earlier: Any, earlier_missing: tuple[str, ...] = ()
             ) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The row with its ``missing`` columns taken from ``earlier`` (a row of the same key: the one
        before it, or the event's ``before`` image) unless ``earlier`` lacks them too, and the columns
        still missing (set to None)."""
        known = earlier.values if isinstance(earlier, Struct) else earlier if isinstance(earlier, dict) else {}
        out = dict(row)
        still = []
        for name in missing:
            value = known.get(name)
            if name in known and name not in earlier_missing and not (
                    isinstance(value, str | bytes | list) and value in self.shapes):
                out[name] = value
            else:
                out[name] = None
                still.append(name)
        return out, tuple(still)
