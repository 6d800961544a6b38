"""Kafka Connect's ``JsonConverter``: byte-compatible envelopes, schema caches, logical types.

Serializing a record is a schema-specific *writer* (built once per schema and cached with
the schema's JSON text) that turns the Connect value into plain JSON-able Python objects,
followed by one pass of the C JSON encoder. Deserializing looks the envelope's schema text
up in a cache of *readers*, so a stream of records with one schema parses the schema once.
The parts: ``write`` (values to JSON), ``read`` (JSON to values), ``schema`` (schemas both
ways), ``common`` (what they share); this module holds the converter and its caches.
"""

from __future__ import annotations

import itertools
import json
import json.decoder
import json.scanner
import re
import secrets
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from headwater.connect.api.converters import Converter, HeaderConverter, SchemaAndValue
from headwater.connect.api.data import Schema, SchemaType
from headwater.connect.api.errors import ConfigException, DataException

from .._common import config_bool, config_int
from .common import (
    _DESERIALIZE_ERROR,
    _FINAL_WHEN_READ,
    _LOGICAL_NAMES,
    _SERIALIZE_ERROR,
    ENVELOPE_ERROR,
    ESCAPED_BUT_NEWLINE,
    _bounded_put,
    _contains_decimal,
    _identity,
    _json_str,
    _tuple_new,
)
from .read import _ReadEntry
from .schema import JsonSchemas
from .write import _make_encoder, _WriteEntry

__all__ = ["ENVELOPE_ERROR", "JsonConverter"]

_ONLY_STR = frozenset((str,))
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]  # the C string parser the scanner calls for '"'


_CHUNK = 256  # strings written together by _plain_strings: each pass runs over data still in the CPU's cache


def _plain_strings(values: list[str], prefix: str, suffix: str) -> list[bytes | None] | None:
    """Strings with nothing to escape (most lines of text) in their envelopes, a few hundred at a time
    as one text: each JSON string is then the text between quotes. None when some string needs an
    escape or holds a newline (the caller writes them one by one)."""
    head, tail = (prefix + '"').encode(), ('"' + suffix).encode()
    if b"\n" in head or b"\n" in tail:
        return None
    between = tail + b"\n" + head
    out: list[bytes | None] = []
    for at in range(0, len(values), _CHUNK):
        part = values[at:at + _CHUNK]
        text = "\n".join(part).encode()  # a lone surrogate raises UnicodeEncodeError, as it does one by one
        if text.count(b"\n") != len(part) - 1 or len(text.translate(None, ESCAPED_BUT_NEWLINE)) != len(text):
            return None
        out += (head + text.replace(b"\n", between) + tail).split(b"\n")
    return out


class JsonConverter(JsonSchemas, Converter, HeaderConverter):
    """JSON with (``schemas.enable=true``) or without Kafka's ``{"schema":…,"payload":…}`` envelope."""

    # Kafka's class name, and the module path this class had before the json/ package.
    aliases = ("org.apache.kafka.connect.json.JsonConverter",
               "headwater.connect.converters.json_converter.JsonConverter")

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
        # typeshed gives make_scanner's argument the wrong type: it takes a JSONDecoder.
        self._float_scan = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
        self._decimal_scan = json.scanner.make_scanner(json.JSONDecoder(parse_float=Decimal))  # type: ignore[arg-type]
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
            payload = self._payload(entry.writer(value), entry.has_decimal)
            if self.schemas_enable:
                payload = entry.prefix + payload + "}"
        try:
            return payload.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DataException(_SERIALIZE_ERROR + str(exc)) from exc

    def from_connect_values(self, topic: str, schema: Schema | None, values: list[Any]) -> list[bytes | None]:
        """Like ``from_connect_data`` value by value, with the schema's entry looked up once and, for a
        plain string schema, the values written a few hundred at a time when none needs an escape,
        else each by the string encoder the C encoder itself calls.
        Anything unusual (nulls, other types, NaN, unencodable text) goes the per-record way, which
        gives the same bytes or raises the same error."""
        if schema is None or not values:
            return super().from_connect_values(topic, schema, values)
        entry = self._last_write
        if entry is None or entry.schema is not schema:
            entry = self._write_entry(schema)
        prefix = entry.prefix if self.schemas_enable else ""
        suffix = "}" if self.schemas_enable else ""
        try:
            if schema.name is None and schema.type is SchemaType.STRING:
                if _ONLY_STR.issuperset(map(type, values)):
                    written = _plain_strings(values, prefix, suffix)
                    if written is not None:
                        return written
                    json_str = _json_str
                    return [(prefix + json_str(v) + suffix).encode() for v in values]
            elif not entry.has_decimal:
                writer, encode = entry.writer, self._encode_plain
                return [(prefix + encode(writer(v)) + suffix).encode() for v in values]
        except (DataException, ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
            pass
        return super().from_connect_values(topic, schema, values)

    def _payload(self, obj: Any, has_decimal: bool) -> str:
        if has_decimal:
            return self._dump(obj, True)
        try:
            return self._encode_plain(obj)
        except (ValueError, RecursionError):  # NaN/infinities (or a cycle): the careful way
            return self._dump(obj, False)

    # -- payloads assembled from parts -----------------------------------------------------------
    # For a source task that writes this converter's output itself, faster than Connect values are
    # converted (``SourceTask.encode_with``): it joins these parts the way the encoder joins a
    # struct's fields ('{"name":<value>,...}'), and its tests compare the bytes with
    # ``from_connect_data``'s.

    def payload_writer(self, schema: Schema) -> Callable[[Any], str]:
        """The JSON text of a value of ``schema`` inside this converter's payload (no envelope)."""
        entry = self._write_entry(schema)
        writer, has_decimal, payload = entry.writer, entry.has_decimal, self._payload
        if schema.name is None and schema.type.name == "STRING":
            def write_string(value: Any) -> str:
                return _json_str(value) if type(value) is str else payload(writer(value), False)
            return write_string
        return lambda value: payload(writer(value), has_decimal)

    def field_name(self, name: str) -> str:
        """A struct field's name as the encoder writes it, with its colon: '"name":'."""
        return _json_str(name) + ":"

    def envelope(self, schema: Schema | None) -> tuple[str, str]:
        """What goes around a payload of ``schema``: the schema envelope when schemas.enable."""
        if not self.schemas_enable:
            return "", ""
        return (self._write_entry(schema).prefix if schema is not None else '{"schema":null,"payload":'), "}"

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

    def to_connect_values(self, topic: str, datas: list[bytes | None]) -> SchemaAndValue | None:
        """Like ``to_connect_data`` value by value. With schemas, the first record's envelope is read
        the usual way; a record whose bytes start with the same envelope prefix (the schema's exact
        bytes) and end right after its payload has only its payload parsed, and a payload already in
        its final type (a string for a string schema) skips the reader. Other records go the
        per-record way; None when they do not all share the first record's schema."""
        if not self.schemas_enable or not datas:
            return super().to_connect_values(topic, datas)
        convert = self.to_connect_data
        first = convert(topic, datas[0])
        schema: Schema | None = first.schema
        # the first record's schema text, when its envelope was canonical (read through the cache)
        found = next(((text, entry) for text, entry in self._read_recent if entry.schema is schema), None)
        if schema is None or found is None:
            return super().to_connect_values(topic, datas)
        schema_text, entry = found
        prefix = ('{"schema":' + schema_text + ',"payload":').encode()
        start = len(schema_text) + 21  # in characters: the schema may hold non-ASCII text
        reader = entry.reader
        final = None if schema.name in _LOGICAL_NAMES else _FINAL_WHEN_READ.get(schema.type)
        # How a payload is parsed, from where: a JSON string (the prefix then takes its opening quote) by
        # the scanner's own string parser, anything else by the scanner. Both raise ValueError (or
        # StopIteration, RecursionError) on what the per-record way reports.
        parse: Callable[[str, int], tuple[Any, int]]
        if final is str:
            prefix, parse, start = prefix + b'"', _scanstring, start + 1
        else:
            parse = self._decimal_scan if entry.decimal_floats else self._float_scan
        values = [first.value]
        append = values.append
        for data in itertools.islice(datas, 1, None):
            if type(data) is bytes and data.startswith(prefix) and data.endswith(b"}"):
                try:
                    text = data.decode()
                    payload, end = parse(text, start)
                    if end == len(text) - 1:
                        append(payload if type(payload) is final else reader(payload))
                        continue
                except (StopIteration, ValueError, RecursionError):  # the per-record way says what is wrong
                    pass
            sv = convert(topic, data)
            if sv.schema is not schema and sv.schema != schema:
                return None
            append(sv.value)
        return _tuple_new(SchemaAndValue, (schema, values))

    # -- HeaderConverter (Kafka's JsonConverter is both) -----------------------------------------

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)

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
