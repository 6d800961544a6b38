"""Reading Debezium change-event envelopes in sinks, as Connect values (a Struct with schemas, a dict
without), and the placeholder of values the source could not see: shared by the Postgres and Spark sinks."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Annotated, Any

from pydantic import AfterValidator

from headwater.connect.api.data import Struct

__all__ = ["UNAVAILABLE", "Placeholder", "PlaceholderSetting", "Unavailable", "get", "is_envelope"]

#: Debezium's default ``unavailable.value.placeholder``: an unchanged TOASTed value that pgoutput does not resend
UNAVAILABLE = "__debezium_unavailable_value"


class Placeholder:
    """``unavailable.value.placeholder`` (``hex:`` then hex digits: binary octets) in the forms Debezium's
    UnchangedToastedPlaceholder gives it: its bytes, their text (UTF-8), the bytes as Java's signed integers
    (integer, bigint and date arrays) and the name-based UUID of the bytes (uuid arrays)."""

    def __init__(self, setting: str = UNAVAILABLE) -> None:
        try:
            self.binary = bytes.fromhex(setting[4:]) if setting.startswith("hex:") else setting.encode()
        except ValueError:
            raise ValueError(f"unavailable.value.placeholder: {setting!r} is not hex: followed by pairs of "
                             f"hexadecimal digits") from None
        if not self.binary:
            raise ValueError("unavailable.value.placeholder: must not be empty")
        self.text = self.binary.decode("utf-8", "replace")
        self.ints = [b - 256 if b > 127 else b for b in self.binary]
        self.uuid = str(uuid.UUID(bytes=hashlib.md5(self.binary).digest(), version=3))  # UUID.nameUUIDFromBytes


def _valid(setting: str) -> str:
    Placeholder(setting)
    return setting


#: The type of an ``unavailable.value.placeholder`` config field: a bad ``hex:`` value fails validation
PlaceholderSetting = Annotated[str, AfterValidator(_valid)]


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
    """Debezium's ``unavailable.value.placeholder`` in the shapes a column carries it: the text (text, varchar,
    json, enums ...), the bytes (bytea), a one-element list of either (text and bytea arrays), the bytes as
    integers (integer and date arrays), a one-element list of their UUID (uuid arrays), and hstore's map of
    the text to itself (hstore.handling.mode map, or json: the map's JSON)."""

    def __init__(self, placeholder: str = UNAVAILABLE) -> None:
        p = Placeholder(placeholder)
        self.text = p.text
        self.shapes = (p.text, p.binary, [p.text], [p.binary], p.ints, [p.uuid], {p.text: p.text},
                       json.dumps({p.text: p.text}, separators=(",", ":")))
        #: the shapes a hashable value can equal (a list or map shape only equals a list or map, unhashable)
        self.hashable = frozenset(shape for shape in self.shapes if isinstance(shape, str | bytes))

    def columns(self, row: dict[str, Any]) -> tuple[str, ...]:
        """The row's columns holding the placeholder (the usual answer, none, costs one C-level pass)."""
        values = tuple(row.values())  # a tuple's scan is faster than dict_values'
        try:
            if self.hashable.isdisjoint(values):
                return ()
        except TypeError:  # a list or map among the values: compared with every shape below
            pass
        for shape in self.shapes:
            if shape in values:
                break
        else:
            return ()
        return tuple(name for name, v in row.items() if isinstance(v, str | bytes | list | dict) and v in self.shapes)

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
                    isinstance(value, str | bytes | list | dict) and value in self.shapes):
                out[name] = value
            else:
                out[name] = None
                still.append(name)
        return out, tuple(still)
