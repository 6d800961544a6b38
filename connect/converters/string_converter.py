"""Kafka Connect's ``StringConverter`` (also a header converter)."""

from __future__ import annotations

from typing import Any, cast

from headwater.connect.api.converters import Converter, HeaderConverter, SchemaAndValue
from headwater.connect.api.data import OPTIONAL_STRING_SCHEMA, Schema

from ._common import config_encoding, java_str

__all__ = ["StringConverter"]

_NULL = SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)  # immutable: one instance serves every null


class StringConverter(Converter, HeaderConverter):
    """Values as strings in ``converter.encoding`` (UTF-8); other values use their (Java-style) string form."""

    aliases = ("org.apache.kafka.connect.storage.StringConverter",)

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        self.encoding = config_encoding(configs, "converter.encoding")

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if type(value) is not str:
            value = java_str(value, self.encoding)
        return value.encode(self.encoding, "replace")  # Java's getBytes replaces unmappable characters

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return _NULL
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, data.decode(self.encoding, "replace"))

    def from_connect_values(self, topic: str, schema: Schema | None, values: list[Any]) -> list[bytes | None]:
        encoding = self.encoding
        try:
            if encoding == "utf-8":
                return [v.encode() for v in values]  # strict is ~2x faster; a lone surrogate falls back below
            return [v.encode(encoding, "replace") for v in values]
        except (AttributeError, UnicodeEncodeError):  # nulls, non-strings or unencodable text among them
            return super().from_connect_values(topic, schema, values)

    def to_connect_values(self, topic: str, datas: list[bytes | None]) -> SchemaAndValue:
        encoding = self.encoding
        if datas.count(None) == len(datas):  # all null (keyless records): nothing to decode
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, datas)
        try:
            # Tried as if none were null (the common case); a null raises AttributeError, handled below.
            present = cast("list[bytes]", datas)
            if encoding == "utf-8":
                return SchemaAndValue(OPTIONAL_STRING_SCHEMA, [d.decode() for d in present])
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA, [d.decode(encoding, "replace") for d in present])
        except (AttributeError, UnicodeDecodeError):  # nulls or invalid bytes among them
            return SchemaAndValue(OPTIONAL_STRING_SCHEMA,
                                  [None if d is None else d.decode(encoding, "replace") for d in datas])

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)
