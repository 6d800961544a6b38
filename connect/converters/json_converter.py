"""Kafka Connect's ``JsonConverter``: byte-compatible envelopes, schema caches, logical types.

Serializing a record is a schema-specific *writer* (compiled once per schema and cached with
the schema's JSON text) that turns the Connect value into plain JSON-able Python objects,
followed by one pass of the C JSON encoder. Deserializing looks the envelope's schema text
up in a cache of compiled *readers*, so a stream of records with one schema parses the
schema once.
"""

from __future__ import annotations

import binascii
import json
import math
import re
import secrets
from collections.abc import Callable
from decimal import Decimal
from typing import Any, NamedTuple

from headwater.connect.api.converters import Converter, HeaderConverter, SchemaAndValue
from headwater.connect.api.data import Field, Schema, SchemaType, Struct
from headwater.connect.api.errors import ConfigException, DataException

from ..api.logical import (
    DATE_NAME,
    DECIMAL_NAME,
    TIME_NAME,
    TIMESTAMP_NAME,
    date_to_days,
    days_to_date,
    decimal_from_bytes,
    decimal_from_number,
    decimal_scale,
    decimal_to_bytes,
    millis_to_time,
    millis_to_timestamp,
    time_to_millis,
    timestamp_to_millis,
)
from ..api.values import b64encode
from ._common import config_bool, config_int

__all__ = ["JsonConverter", "ENVELOPE_ERROR"]

ENVELOPE_ERROR = ("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not contain "
                  "additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in "
                  "your converter configuration.")
_SERIALIZE_ERROR = "Converting Kafka Connect data to byte[] failed due to serialization error: "
_DESERIALIZE_ERROR = "Converting byte[] to Kafka Connect data failed due to serialization error: "

Writer = Callable[[Any], Any]
Reader = Callable[[Any], Any]

_INT_RANGES = {
    SchemaType.INT8: (-(1 << 7), (1 << 7) - 1),
    SchemaType.INT16: (-(1 << 15), (1 << 15) - 1),
    SchemaType.INT32: (-(1 << 31), (1 << 31) - 1),
    SchemaType.INT64: (-(1 << 63), (1 << 63) - 1),
}
_BYTES_TYPES = (bytes, bytearray, memoryview)
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_CONTAINERS = frozenset((dict, list, tuple))
_new_struct = object.__new__
_tuple_new = tuple.__new__  # SchemaAndValue(...) without the NamedTuple's Python-level __new__

try:  # the C encoder, built once; json.dumps would build a new one per call
    from _json import make_encoder as _c_make_encoder
except ImportError:  # pragma: no cover - CPython always has _json
    _c_make_encoder = None

_json_str = json.encoder.encode_basestring  # the C version when available (ensure_ascii=False, like Jackson)


def _make_encoder(default: Callable[[Any], Any] | None) -> Callable[[Any], str]:
    if _c_make_encoder is not None:
        enc = _c_make_encoder(None, default, _json_str, None, ":", ",", False, False, False)
        join = "".join
        return lambda obj: join(enc(obj, 0))
    encoder = json.JSONEncoder(ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",", ":"),
                               default=default)  # pragma: no cover
    return encoder.encode  # pragma: no cover


def _node_type(value: Any) -> str:
    """Jackson's JsonNodeType of a parsed JSON value (for error messages)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int | float | Decimal):
        return "NUMBER"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        return "ARRAY"
    if isinstance(value, dict):
        return "OBJECT"
    return type(value).__name__


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


def _contains_decimal(schema: Schema | None) -> bool:
    if schema is None:
        return False
    if schema.name == DECIMAL_NAME:
        return True
    t = schema.type
    if t is SchemaType.STRUCT:
        return any(_contains_decimal(f.schema) for f in schema.fields)
    if t is SchemaType.ARRAY:
        return _contains_decimal(schema.value_schema)
    if t is SchemaType.MAP:
        return _contains_decimal(schema.key_schema) or _contains_decimal(schema.value_schema)
    return False


class _WriteEntry(NamedTuple):
    schema: Schema
    prefix: str  # '{"schema":<schema JSON>,"payload":'
    writer: Writer
    has_decimal: bool


class _ReadEntry(NamedTuple):
    schema: Schema | None
    reader: Reader
    decimal_floats: bool  # parse the payload's floats as Decimal (exact NUMERIC decimals)


def _identity(value: Any) -> Any:
    return value


def _null_handling(inner: Callable[[Any], Any], default: Any, optional: bool,
                   null_error: str) -> Callable[[Any], Any]:
    """``inner`` for non-null values; null gives ``default`` when there is one (not None), stays null
    when ``optional``, and is a DataException(``null_error``) otherwise. Serves writers and readers."""
    if default is not None:
        def or_default(value: Any) -> Any:
            return default if value is None else inner(value)
        return or_default
    if optional:
        def optional_value(value: Any) -> Any:
            return None if value is None else inner(value)
        return optional_value

    def required(value: Any) -> Any:
        if value is None:
            raise DataException(null_error)
        return inner(value)
    return required


class JsonConverter(Converter, HeaderConverter):
    """JSON with (``schemas.enable=true``) or without Kafka's ``{"schema":…,"payload":…}`` envelope."""

    aliases = ("org.apache.kafka.connect.json.JsonConverter",)

    def __init__(self) -> None:
        self.configure({})

    # -- configuration --------------------------------------------------------------------------

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        self.is_key = is_key
        self.schemas_enable = config_bool(configs, "schemas.enable", True)
        self.cache_size = config_int(configs, "schemas.cache.size", 1000, minimum=0)
        fmt = str(configs.get("decimal.format") or "BASE64").strip().upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigException(f"Invalid value {configs.get('decimal.format')} for configuration decimal.format: "
                                  "String must be one of (case insensitive): BASE64, NUMERIC", "decimal.format")
        self.decimal_format = fmt
        self.replace_null_with_default = config_bool(configs, "replace.null.with.default", True)

        # NUMERIC decimals must be written as raw JSON numbers, which the C encoder cannot do; the
        # writer emits a marked string that is unwrapped after encoding.
        nonce = secrets.token_hex(8)
        self._marker = "\x00" + nonce
        self._marker_json = "\\u0000" + nonce
        self._marker_re = re.compile('"' + re.escape(self._marker_json) + '([^"]*)"')
        self._encode_plain = _make_encoder(None)
        self._encode_schemaless = _make_encoder(self._schemaless_default)
        self._float_scan = json.scanner.make_scanner(json.JSONDecoder())
        self._decimal_scan = json.scanner.make_scanner(json.JSONDecoder(parse_float=Decimal))
        self._decimal_decoder = json.JSONDecoder(parse_float=Decimal)
        self._last_write: _WriteEntry | None = None
        self._write_by_id: dict[int, _WriteEntry] = {}
        self._write_by_eq: dict[Schema, _WriteEntry] = {}
        self._read_by_text: dict[str, _ReadEntry] = {}
        self._read_recent: list[tuple[str, _ReadEntry]] = []
        self._null_read = _ReadEntry(None, _identity, False)

    # -- Converter ------------------------------------------------------------------------------

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            payload = self._dump_schemaless(value)
            if self.schemas_enable:
                payload = '{"schema":null,"payload":' + payload + "}"
        else:
            entry = self._last_write
            if entry is None or entry.schema is not schema:
                entry = self._write_entry(schema)
            obj = entry.writer(value)
            if entry.has_decimal:
                payload = self._dump(obj, True)
            else:
                try:
                    payload = self._encode_plain(obj)
                except (ValueError, RecursionError):  # NaN/infinities (or a cycle): the careful way
                    payload = self._dump(obj, False)
            if self.schemas_enable:
                payload = entry.prefix + payload + "}"
        try:
            return payload.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DataException(_SERIALIZE_ERROR + str(exc)) from exc

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        if type(data) is not bytes:
            data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if not self.schemas_enable:
            try:  # the scanner directly: json.loads adds encoding detection and two regex matches
                text = data.decode("utf-8")
                value, end = self._float_scan(text, 0)
                if end == len(text) or not text[end:].strip():
                    return _tuple_new(SchemaAndValue, (None, value))
            except (StopIteration, ValueError, RecursionError, AttributeError):
                pass
            try:
                return SchemaAndValue(None, json.loads(data))
            except (ValueError, RecursionError) as exc:
                if not data.strip():
                    return SchemaAndValue(None, None)  # Jackson reads nothing as a missing node: null
                raise DataException(_DESERIALIZE_ERROR + str(exc)) from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataException(_DESERIALIZE_ERROR + str(exc)) from exc
        try:
            result = self._read_canonical(text)
            return result if result is not None else self._read_generic(text)
        except RecursionError as exc:
            raise DataException(_DESERIALIZE_ERROR + "nested too deeply") from exc

    # -- HeaderConverter (Kafka's JsonConverter is both) -----------------------------------------

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)

    # -- schemas: Connect <-> JSON -------------------------------------------------------------

    def as_json_schema(self, schema: Schema | None) -> dict[str, Any] | None:
        """Kafka's ``asJsonSchema``, keys in Kafka's order."""
        if schema is None:
            return None
        t = schema.type
        out: dict[str, Any] = {"type": t.value}
        if t is SchemaType.ARRAY:
            out["items"] = self.as_json_schema(schema.value_schema)
        elif t is SchemaType.MAP:
            out["keys"] = self.as_json_schema(schema.key_schema)
            out["values"] = self.as_json_schema(schema.value_schema)
        elif t is SchemaType.STRUCT:
            fields = []
            for f in schema.fields:
                field_json = dict(self.as_json_schema(f.schema) or {})
                field_json["field"] = f.name
                fields.append(field_json)
            out["fields"] = fields
        elif t not in _INT_RANGES and t not in (SchemaType.FLOAT32, SchemaType.FLOAT64, SchemaType.BOOLEAN,
                                                 SchemaType.STRING, SchemaType.BYTES):
            raise DataException(f"Couldn't translate unsupported schema type {schema}.")
        out["optional"] = schema.optional
        if schema.name is not None:
            out["name"] = schema.name
        if schema.version is not None:
            out["version"] = schema.version
        if schema.doc is not None:
            out["doc"] = schema.doc
        if schema.parameters is not None:
            out["parameters"] = dict(schema.parameters)
        if schema.default is not None:
            out["default"] = self._writer(schema)(schema.default)
        return out

    def as_connect_schema(self, json_schema: Any) -> Schema | None:
        """Kafka's ``asConnectSchema``."""
        if json_schema is None:
            return None
        if not isinstance(json_schema, dict):
            raise DataException("Schema must contain 'type' field")
        type_name = json_schema.get("type")
        if not isinstance(type_name, str):
            raise DataException("Schema must contain 'type' field")
        kw: dict[str, Any] = {}
        if type_name == "array":
            items = json_schema.get("items")
            if items is None:
                raise DataException("Array schema did not specify the element type")
            kw["value_schema"] = self.as_connect_schema(items)
        elif type_name == "map":
            if "keys" not in json_schema:
                raise DataException("Map schema did not specify the key type")
            if "values" not in json_schema:
                raise DataException("Map schema did not specify the value type")
            kw["key_schema"] = self.as_connect_schema(json_schema["keys"])
            kw["value_schema"] = self.as_connect_schema(json_schema["values"])
        elif type_name == "struct":
            fields_json = json_schema.get("fields")
            if not isinstance(fields_json, list):
                raise DataException("Struct schema's \"fields\" argument is not an array.")
            fields = []
            for i, field_json in enumerate(fields_json):
                name = field_json.get("field") if isinstance(field_json, dict) else None
                if not isinstance(name, str):
                    raise DataException("Struct schema's field name not specified properly")
                fields.append(Field(name, i, self.as_connect_schema(field_json)))
            kw["fields"] = tuple(fields)
        try:
            schema_type = SchemaType(type_name)
        except ValueError:
            raise DataException(f"Unknown schema type: {type_name}") from None
        kw["optional"] = json_schema.get("optional") is True
        name = json_schema.get("name")
        if isinstance(name, str):
            kw["name"] = name
        version = json_schema.get("version")
        if isinstance(version, int) and not isinstance(version, bool):
            kw["version"] = version
        doc = json_schema.get("doc")
        if isinstance(doc, str):
            kw["doc"] = doc
        params = json_schema.get("parameters")
        if isinstance(params, dict):
            if not all(isinstance(v, str) for v in params.values()):
                raise DataException("Schema parameters must have string values.")
            kw["parameters"] = tuple(params.items())
        schema = Schema(schema_type, **kw)
        if "default" in json_schema:
            default = self._reader(schema)(json_schema["default"])
            schema = Schema(schema_type, default=default, **kw)
        return schema

    # -- writing ----------------------------------------------------------------------------------

    def _write_entry(self, schema: Schema) -> _WriteEntry:
        key = id(schema)
        entry = self._write_by_id.get(key)
        if entry is None or entry.schema is not schema:
            entry = self._write_by_eq.get(schema)
            if entry is None:
                schema_json = self._dump(self.as_json_schema(schema), _contains_decimal(schema))
                entry = _WriteEntry(schema, '{"schema":' + schema_json + ',"payload":', self._writer(schema),
                                    _contains_decimal(schema))
                if self.cache_size:
                    _bounded_put(self._write_by_eq, schema, entry, self.cache_size)
            if entry.schema is not schema:
                entry = entry._replace(schema=schema)
            if self.cache_size:
                _bounded_put(self._write_by_id, key, entry, self.cache_size)
        self._last_write = entry
        return entry

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
            return _compile_struct_writer(schema, [self._writer(f.schema) for f in schema.fields])
        raise DataException(f"Couldn't translate unsupported schema type {schema}.")

    # -- reading ----------------------------------------------------------------------------------

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
                if schema_json is None:
                    entry = self._null_read
                else:
                    schema = self.as_connect_schema(schema_json)
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
            return _compile_struct_reader(schema, [self._reader(f.schema) for f in schema.fields])
        raise DataException(f"Unknown schema type: {t}")


# -- struct fields, compiled: one generated function per struct schema, with an inline fast check per
# primitive field and a call to the field's full writer/reader only when the check fails (nulls,
# defaults, conversions, errors).

_LOGICAL_NAMES = frozenset((DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME))


def _fast_check(schema: Schema, var: str, reading: bool) -> str | None:
    """A cheap condition under which a field value is already in its final form."""
    if schema.name in _LOGICAL_NAMES:
        return None
    t = schema.type
    if t in _INT_RANGES:
        lo, hi = _INT_RANGES[t]
        return f"type({var}) is int" if reading else f"type({var}) is int and {lo} <= {var} <= {hi}"
    if t is SchemaType.FLOAT32 or t is SchemaType.FLOAT64:
        return f"type({var}) is float"
    if t is SchemaType.STRING:
        return f"type({var}) is str"
    if t is SchemaType.BOOLEAN:
        return f"({var} is True or {var} is False)"
    return None


def _field_lines(schema: Schema, fn: str, reading: bool) -> list[str]:
    lines = []
    for i, f in enumerate(schema.fields):
        lines.append(f"    v{i} = get({f.name!r})")
        check = _fast_check(f.schema, f"v{i}", reading)
        if check is None:
            lines.append(f"    v{i} = {fn}{i}(v{i})")
        else:
            lines.append(f"    if not ({check}):")
            lines.append(f"        v{i} = {fn}{i}(v{i})")
    return lines


def _values_literal(schema: Schema) -> str:
    return "{" + ", ".join(f"{f.name!r}: v{i}" for i, f in enumerate(schema.fields)) + "}"


def _compile(source: str, name: str, namespace: dict[str, Any]) -> Callable[[Any], Any]:
    exec(compile(source, f"<headwater struct {name}>", "exec"), namespace)
    return namespace[name]


def _compile_struct_writer(schema: Schema, writers: list[Writer]) -> Writer:
    lines = [
        "def write_struct(value):",
        "    if type(value) is Struct:",
        "        if value.schema is not schema and value.schema != schema:",
        "            raise DataException('Mismatching schema.')",
        "        get = value.values.get",
        "    elif isinstance(value, dict):",
        "        get = value.get",
        "    elif isinstance(value, Struct):",
        "        if value.schema != schema:",
        "            raise DataException('Mismatching schema.')",
        "        get = value.values.get",
        "    else:",
        "        raise DataException(f'Invalid type for STRUCT: {type(value)}')",
        *_field_lines(schema, "w", False),
        "    return " + _values_literal(schema),
    ]
    namespace: dict[str, Any] = {"Struct": Struct, "DataException": DataException, "schema": schema}
    namespace.update((f"w{i}", w) for i, w in enumerate(writers))
    return _compile("\n".join(lines), "write_struct", namespace)


def _compile_struct_reader(schema: Schema, readers: list[Reader]) -> Reader:
    lines = [
        "def read_struct(value):",
        "    if type(value) is not dict:",
        "        raise DataException(f'Structs should be encoded as JSON objects, but found {node_type(value)}')",
        "    get = value.get",
        *_field_lines(schema, "r", True),
        "    struct = new(Struct)",
        "    struct.schema = schema",
        "    struct.values = " + _values_literal(schema),
        "    return struct",
    ]
    namespace: dict[str, Any] = {"Struct": Struct, "DataException": DataException, "schema": schema,
                                 "new": _new_struct, "node_type": _node_type}
    namespace.update((f"r{i}", r) for i, r in enumerate(readers))
    return _compile("\n".join(lines), "read_struct", namespace)


def _bounded_put(cache: dict, key: Any, value: Any, size: int) -> None:
    if len(cache) >= size:
        try:
            del cache[next(iter(cache))]
        except (StopIteration, KeyError, RuntimeError):
            pass
    cache[key] = value
