"""Writing: Connect values to JSON text, per schema (Kafka's ``convertToJson``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any, NamedTuple

from headwater.connect.api.data import Schema, SchemaType, Struct
from headwater.connect.api.errors import DataException

from ...api.logical import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    date_to_days,
    decimal_scale,
    decimal_to_bytes,
    time_to_millis,
    timestamp_to_millis,
)
from ...api.values import b64encode
from .common import (
    _BYTES_TYPES,
    _CONTAINERS,
    _INT_RANGES,
    _SERIALIZE_ERROR,
    Writer,
    _c_make_encoder,
    _json_str,
    _null_handling,
    _struct_fields,
)


def _make_encoder(default: Callable[[Any], Any] | None) -> Callable[[Any], str]:
    if _c_make_encoder is not None:
        enc = _c_make_encoder(None, default, _json_str, None, ":", ",", False, False, False)  # type: ignore[arg-type]
        join = "".join
        return lambda obj: join(enc(obj, 0))
    encoder = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",", ":"),
                               default=default)  # pragma: no cover
    return encoder.encode  # pragma: no cover


def _fix_nonfinite(obj: Any) -> Any:
    """Jackson writes NaN and infinities as the strings "NaN", "Infinity", "-Infinity"."""
    t = type(obj)
    if t is float:
        if math.isfinite(obj):
            return obj
        return "NaN" if obj != obj else ("Infinity" if obj > 0 else "-Infinity")
    if t is dict:
        return {k: _fix_nonfinite(v) for k, v in obj.items()}
    if t is list or t is tuple:
        return [_fix_nonfinite(v) for v in obj]
    if isinstance(obj, float):
        return _fix_nonfinite(float(obj))
    return obj


def _plain_seq(seq: list | tuple) -> bool:
    if _CONTAINERS.isdisjoint(map(type, seq)):
        return True
    for x in seq:
        t = type(x)
        if t is dict:
            if not _plain_dict(x):
                return False
        elif (t is list or t is tuple) and not _plain_seq(x):
            return False
    return True


def _plain_dict(d: dict) -> bool:
    """True when every (nested) dict has only str keys, so the C encoder writes Kafka's exact form."""
    for k, x in d.items():
        if type(k) is not str:
            return False
        t = type(x)
        if t is dict:
            if not _plain_dict(x):
                return False
        elif (t is list or t is tuple) and not _plain_seq(x):
            return False
    return True


class _WriteEntry(NamedTuple):
    schema: Schema
    prefix: str  # '{"schema":<schema JSON>,"payload":'
    writer: Writer
    has_decimal: bool


class JsonWriting:
    """Writers: a function per schema from a Connect value to its JSON-able form, then one encoder pass."""

    decimal_format: str
    replace_null_with_default: bool
    _marker: str
    _marker_json: str
    _marker_re: re.Pattern[str]
    _encode_plain: Callable[[Any], str]
    _encode_schemaless: Callable[[Any], str]

    def _write_entry(self, schema: Schema) -> _WriteEntry:
        """The cached writer and envelope prefix of ``schema`` (the converter keeps the cache)."""
        raise NotImplementedError


    def _dump(self, obj: Any, numeric_markers: bool) -> str:
        try:
            out = self._encode_plain(obj)
        except ValueError:  # NaN or an infinity: Jackson writes them as strings
            out = self._encode_plain(_fix_nonfinite(obj))
        except RecursionError as exc:
            raise DataException(_SERIALIZE_ERROR + str(exc)) from exc
        if numeric_markers and self.decimal_format == "NUMERIC" and self._marker_json in out:
            out = self._marker_re.sub(r"\1", out)
        return out

    def _dump_schemaless(self, value: Any) -> str:
        t = type(value)
        if t is dict:
            fast = _plain_dict(value)
        elif t is list or t is tuple:
            fast = _plain_seq(value)
        else:
            fast = not isinstance(value, dict | list | tuple)
        try:
            if fast:
                try:
                    out = self._encode_schemaless(value)
                except ValueError:  # NaN or an infinity somewhere: the careful way
                    out = self._encode_plain(self._schemaless(value))
                except TypeError as exc:
                    raise DataException(str(exc)) from exc
            else:  # a dict with non-string keys somewhere: Kafka writes it as [[key, value], ...]
                out = self._encode_plain(self._schemaless(value))
        except RecursionError as exc:
            raise DataException(_SERIALIZE_ERROR + str(exc)) from exc
        if self.decimal_format == "NUMERIC" and self._marker_json in out:
            out = self._marker_re.sub(r"\1", out)
        return out

    def _schemaless_default(self, obj: Any) -> Any:
        if isinstance(obj, _BYTES_TYPES):
            return b64encode(obj)
        if isinstance(obj, Struct):
            return self._write_entry(obj.schema).writer(obj)
        raise DataException(f"Python class {type(obj)} does not have corresponding schema type.")

    def _schemaless(self, value: Any) -> Any:
        """Kafka's convertToJson with a null schema: the schema type follows the Python type."""
        if value is None:
            return None
        t = type(value)
        if t is str or t is int or t is bool:
            return value
        if t is float:
            return _fix_nonfinite(value)
        if t is dict or isinstance(value, dict):
            if all(isinstance(k, str) for k in value):
                return {k: self._schemaless(v) for k, v in value.items()}
            return [[self._schemaless(k), self._schemaless(v)] for k, v in value.items()]
        if t is list or t is tuple or isinstance(value, list | tuple):
            return [self._schemaless(v) for v in value]
        if isinstance(value, _BYTES_TYPES):
            return b64encode(value)
        if isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            return _fix_nonfinite(float(value))
        if isinstance(value, Struct):
            return _fix_nonfinite(self._write_entry(value.schema).writer(value))
        raise DataException(f"Python class {t} does not have corresponding schema type.")

    def _writer(self, schema: Schema) -> Writer:
        """A function from a Connect value (or None) to its JSON-able form, as convertToJson does."""
        inner = self._writer_nonnull(schema)
        default = schema.default if self.replace_null_with_default else None
        return _null_handling(inner, None if default is None else inner(default), schema.optional,
                              "Conversion error: null value for field that is required and has no default "
                              "value")

    def _writer_nonnull(self, schema: Schema) -> Writer:
        name = schema.name
        t = schema.type
        tname = t.name
        if name == DECIMAL_NAME:
            if self.decimal_format == "NUMERIC":
                marker = self._marker

                def write_numeric(value: Any) -> Any:
                    if isinstance(value, bool) or not isinstance(value, Decimal | int):
                        raise DataException(f"Invalid type for Decimal, expected Decimal but was {type(value)}")
                    if isinstance(value, Decimal) and not value.is_finite():
                        raise DataException(f"Invalid value for Decimal: {value}")
                    return marker + str(value)
                return write_numeric
            scale = decimal_scale(schema)
            return lambda value: b64encode(decimal_to_bytes(value, scale))
        if name == DATE_NAME:
            return date_to_days
        if name == TIME_NAME:
            return time_to_millis
        if name == TIMESTAMP_NAME:
            return timestamp_to_millis
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]

            def write_int(value: Any) -> Any:
                if type(value) is int and lo <= value <= hi:
                    return value
                if isinstance(value, int) and not isinstance(value, bool):
                    if lo <= value <= hi:
                        return int(value)
                    raise DataException(f"Invalid value for {tname}: {value} is out of range")
                raise DataException(f"Invalid type for {tname}: {type(value)}")
            return write_int
        if t is SchemaType.FLOAT32 or t is SchemaType.FLOAT64:
            def write_float(value: Any) -> Any:
                if type(value) is float:
                    return value
                if isinstance(value, float | int | Decimal) and not isinstance(value, bool):
                    return float(value)
                raise DataException(f"Invalid type for {tname}: {type(value)}")
            return write_float
        if t is SchemaType.BOOLEAN:
            def write_bool(value: Any) -> Any:
                if value is True or value is False:
                    return value
                raise DataException(f"Invalid type for {tname}: {type(value)}")
            return write_bool
        if t is SchemaType.STRING:
            def write_str(value: Any) -> Any:
                if type(value) is str:
                    return value
                if isinstance(value, str):
                    return str(value)
                raise DataException(f"Invalid type for {tname}: {type(value)}")
            return write_str
        if t is SchemaType.BYTES:
            def write_bytes(value: Any) -> Any:
                if isinstance(value, _BYTES_TYPES):
                    return b64encode(value)
                raise DataException(f"Invalid type for bytes type: {type(value)}")
            return write_bytes
        if t is SchemaType.ARRAY:
            item = self._writer(schema.value_schema) if schema.value_schema is not None else self._schemaless

            def write_array(value: Any) -> Any:
                if type(value) is list or isinstance(value, list | tuple):
                    return [item(v) for v in value]
                raise DataException(f"Invalid type for {tname}: {type(value)}")
            return write_array
        if t is SchemaType.MAP:
            ks, vs = schema.key_schema, schema.value_schema
            key = self._writer(ks) if ks is not None else self._schemaless
            val = self._writer(vs) if vs is not None else self._schemaless
            if ks is not None and ks.type is SchemaType.STRING:
                def write_object(value: Any) -> Any:
                    if not isinstance(value, dict):
                        raise DataException(f"Invalid type for {tname}: {type(value)}")
                    out = {key(k): val(v) for k, v in value.items()}
                    if None in out:  # an optional key that is null: Jackson's NullNode.asText()
                        out["null"] = out.pop(None)
                    return out
                return write_object

            def write_pairs(value: Any) -> Any:
                if not isinstance(value, dict):
                    raise DataException(f"Invalid type for {tname}: {type(value)}")
                if ks is None and all(isinstance(k, str) for k in value):
                    return {k: val(v) for k, v in value.items()}
                return [[key(k), val(v)] for k, v in value.items()]
            return write_pairs
        if t is SchemaType.STRUCT:
            return _struct_writer(schema, [self._writer(f.schema) for f in schema.fields])
        raise DataException(f"Couldn't translate unsupported schema type {schema}.")


def _struct_writer(schema: Schema, writers: list[Writer]) -> Writer:
    fields = _struct_fields(schema, writers, reading=False)

    def write_struct(value: Any) -> Any:
        if type(value) is Struct:
            if value.schema is not schema and value.schema != schema:
                raise DataException("Mismatching schema.")
            get = value.values.get
        elif isinstance(value, dict):
            get = value.get
        elif isinstance(value, Struct):
            if value.schema != schema:
                raise DataException("Mismatching schema.")
            get = value.values.get
        else:
            raise DataException(f"Invalid type for STRUCT: {type(value)}")
        out = {}
        for name, final, write in fields:
            v = get(name)
            out[name] = v if type(v) is final else write(v)
        return out
    return write_struct
