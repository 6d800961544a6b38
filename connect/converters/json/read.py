"""Reading: JSON text to Connect values, per schema (Kafka's ``convertToConnect``)."""

from __future__ import annotations

import binascii
import json
import math
from decimal import Decimal
from typing import Any, NamedTuple

from headwater.connect.api.converters import SchemaAndValue
from headwater.connect.api.data import Schema, SchemaType, Struct
from headwater.connect.api.errors import DataException

from ...api.logical import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    days_to_date,
    decimal_from_bytes,
    decimal_from_number,
    decimal_scale,
    millis_to_time,
    millis_to_timestamp,
)
from .common import (
    _DESERIALIZE_ERROR,
    _INT_RANGES,
    _NONFINITE,
    ENVELOPE_ERROR,
    Reader,
    _bounded_put,
    _contains_decimal,
    _new_struct,
    _node_type,
    _null_handling,
    _struct_fields,
    _tuple_new,
)


def _floats_from_decimals(obj: Any) -> Any:
    """Schemaless payloads parsed with Decimal floats get Python floats back (Kafka: FLOAT64)."""
    t = type(obj)
    if t is Decimal:
        return float(obj)
    if t is dict:
        return {k: _floats_from_decimals(v) for k, v in obj.items()}
    if t is list:
        return [_floats_from_decimals(v) for v in obj]
    return obj


class _ReadEntry(NamedTuple):
    schema: Schema | None
    reader: Reader
    decimal_floats: bool  # parse the payload's floats as Decimal (exact NUMERIC decimals)


class JsonReading:
    """Readers: a function per schema from parsed JSON to a Connect value; envelopes read through a cache."""

    cache_size: int
    replace_null_with_default: bool
    _float_scan: Any
    _decimal_scan: Any
    _decimal_decoder: json.JSONDecoder
    _read_by_text: dict[str, _ReadEntry]
    _read_recent: list[tuple[str, _ReadEntry]]
    _null_read: _ReadEntry

    def as_connect_schema(self, json_schema: Any) -> Schema | None:
        raise NotImplementedError


    def _read_canonical(self, text: str) -> SchemaAndValue | None:
        """The envelope exactly as Kafka writes it; None sends the caller to the general parser."""
        if not text.startswith('{"schema":'):
            return None
        entry: _ReadEntry | None = None
        for schema_text, cached in self._read_recent:
            if text.startswith(schema_text, 10):
                entry, pos = cached, 10 + len(schema_text)
                break
        if entry is None:
            try:
                schema_json, pos = self._decimal_scan(text, 10)  # exact digits for Decimal defaults
            except (StopIteration, ValueError, RecursionError):
                return None
            schema_text = text[10:pos]
            entry = self._read_by_text.get(schema_text)
            if entry is None:
                schema = self.as_connect_schema(schema_json)  # None for a null schema
                if schema is None:
                    entry = self._null_read
                else:
                    entry = _ReadEntry(schema, self._reader(schema), _contains_decimal(schema))
                if self.cache_size:
                    _bounded_put(self._read_by_text, schema_text, entry, self.cache_size)
            recent = self._read_recent
            recent.insert(0, (schema_text, entry))
            del recent[8:]
        if not text.startswith(',"payload":', pos):
            return None
        scan = self._decimal_scan if entry.decimal_floats else self._float_scan
        try:
            payload, end = scan(text, pos + 11)
        except (StopIteration, ValueError, RecursionError):
            return None
        if text[end:] != "}" and text[end:].strip() != "}":
            return None
        return _tuple_new(SchemaAndValue, (entry.schema, entry.reader(payload)))

    def _read_generic(self, text: str) -> SchemaAndValue:
        try:
            doc = self._decimal_decoder.decode(text)
        except (ValueError, RecursionError) as exc:
            raise DataException(_DESERIALIZE_ERROR + str(exc)) from exc
        if type(doc) is not dict or len(doc) != 2 or "schema" not in doc or "payload" not in doc:
            raise DataException(ENVELOPE_ERROR)
        schema = self.as_connect_schema(doc["schema"])
        if schema is None:
            return SchemaAndValue(None, _floats_from_decimals(doc["payload"]))
        return SchemaAndValue(schema, self._reader(schema)(doc["payload"]))

    def _reader(self, schema: Schema) -> Reader:
        """A function from a parsed JSON value to its Connect value, as convertToConnect does."""
        inner = self._reader_nonnull(schema)
        default = schema.default if self.replace_null_with_default else None
        return _null_handling(inner, default, schema.optional,
                              f"Invalid null value for required {schema.type.name} field")

    def _reader_nonnull(self, schema: Schema) -> Reader:
        name = schema.name
        t = schema.type
        tname = t.name
        if name == DECIMAL_NAME:
            scale = decimal_scale(schema)

            def read_decimal(value: Any) -> Any:
                if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
                    return decimal_from_number(value)
                if isinstance(value, str):
                    try:
                        return decimal_from_bytes(binascii.a2b_base64(value), scale)
                    except (binascii.Error, ValueError) as exc:
                        raise DataException("Invalid bytes for Decimal field") from exc
                raise DataException("Invalid type for Decimal, underlying representation should be numeric or bytes "
                                    f"but was {_node_type(value)}")
            return read_decimal
        if name in (DATE_NAME, TIME_NAME, TIMESTAMP_NAME):
            logical = {DATE_NAME: ("Date", days_to_date, "integer"), TIME_NAME: ("Time", millis_to_time, "integer"),
                       TIMESTAMP_NAME: ("Timestamp", millis_to_timestamp, "integral")}[name]
            label, to_logical, kind = logical
            limit = (1 << 63) if name == TIMESTAMP_NAME else (1 << 31)

            def read_temporal(value: Any) -> Any:
                if type(value) is int and -limit <= value < limit:
                    return to_logical(value)
                raise DataException(f"Invalid type for {label}, underlying representation should be {kind} but was "
                                    f"{_node_type(value)}")
            return read_temporal
        if t in _INT_RANGES:
            def read_int(value: Any) -> Any:
                if type(value) is int:
                    return value
                if isinstance(value, float | Decimal) and math.isfinite(value):
                    return int(value)  # Jackson's intValue()/longValue() truncate
                raise DataException(f"Invalid value for {tname} field: {_node_type(value)}")
            return read_int
        if t is SchemaType.FLOAT32 or t is SchemaType.FLOAT64:
            def read_float(value: Any) -> Any:
                if type(value) is float:
                    return value
                if isinstance(value, int | Decimal) and not isinstance(value, bool):
                    return float(value)
                if isinstance(value, str) and value in _NONFINITE:
                    return _NONFINITE[value]
                raise DataException(f"Invalid value for {tname} field: {_node_type(value)}")
            return read_float
        if t is SchemaType.BOOLEAN:
            def read_bool(value: Any) -> Any:
                if value is True or value is False:
                    return value
                raise DataException(f"Invalid value for {tname} field: {_node_type(value)}")
            return read_bool
        if t is SchemaType.STRING:
            def read_str(value: Any) -> Any:
                if type(value) is str:
                    return value
                raise DataException(f"Invalid value for {tname} field: {_node_type(value)}")
            return read_str
        if t is SchemaType.BYTES:
            def read_bytes(value: Any) -> Any:
                if type(value) is str:
                    try:
                        return binascii.a2b_base64(value)
                    except (binascii.Error, ValueError) as exc:
                        raise DataException("Invalid bytes field") from exc
                raise DataException(f"Invalid value for {tname} field: {_node_type(value)}")
            return read_bytes
        if t is SchemaType.ARRAY:
            vs = schema.value_schema
            item = self._reader(vs) if vs is not None else _floats_from_decimals

            def read_array(value: Any) -> Any:
                if type(value) is list:
                    return [item(v) for v in value]
                raise DataException(f"Arrays should be encoded as JSON arrays, but found {_node_type(value)}")
            return read_array
        if t is SchemaType.MAP:
            ks, vs = schema.key_schema, schema.value_schema
            key = self._reader(ks) if ks is not None else _floats_from_decimals
            val = self._reader(vs) if vs is not None else _floats_from_decimals
            if ks is None or ks.type is SchemaType.STRING:
                def read_object(value: Any) -> Any:
                    if type(value) is not dict:
                        raise DataException("Maps with string fields should be encoded as JSON objects, but found "
                                            f"{_node_type(value)}")
                    return {k: val(v) for k, v in value.items()}
                return read_object

            def read_pairs(value: Any) -> Any:
                if type(value) is not list:
                    raise DataException("Maps with non-string fields should be encoded as JSON array of tuples, but "
                                        f"found {_node_type(value)}")
                out = {}
                for entry in value:
                    if type(entry) is not list:
                        raise DataException(f"Found invalid map entry instead of array tuple: {_node_type(entry)}")
                    if len(entry) != 2:
                        raise DataException(f"Found invalid map entry, expected length 2 but found :{len(entry)}")
                    try:
                        out[key(entry[0])] = val(entry[1])
                    except TypeError as exc:
                        raise DataException(f"Map key cannot be used in Python: {exc}") from exc
                return out
            return read_pairs
        if t is SchemaType.STRUCT:
            return _struct_reader(schema, [self._reader(f.schema) for f in schema.fields])
        raise DataException(f"Unknown schema type: {t}")


def _struct_reader(schema: Schema, readers: list[Reader]) -> Reader:
    fields = _struct_fields(schema, readers, reading=True)

    def read_struct(value: Any) -> Any:
        if type(value) is not dict:
            raise DataException(f"Structs should be encoded as JSON objects, but found {_node_type(value)}")
        get = value.get
        values = {}
        for name, final, read in fields:
            v = get(name)
            values[name] = v if type(v) is final else read(v)
        struct = _new_struct(Struct)
        struct.schema = schema
        struct.values = values
        return struct
    return read_struct
