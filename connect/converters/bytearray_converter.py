"""Kafka Connect's ``ByteArrayConverter``: bytes pass through untouched (also a header converter)."""

from __future__ import annotations

from typing import Any

from headwater.connect.api.converters import Converter, HeaderConverter, SchemaAndValue
from headwater.connect.api.data import OPTIONAL_BYTES_SCHEMA, Schema, SchemaType
from headwater.connect.api.errors import DataException

__all__ = ["ByteArrayConverter"]


class ByteArrayConverter(Converter, HeaderConverter):
    aliases = ("org.apache.kafka.connect.converters.ByteArrayConverter",)

    def configure(self, configs: dict[str, Any], is_key: bool = False) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise DataException(f"ByteArrayConverter is not compatible with objects of type {type(value)}")

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, data)

    def to_connect_values(self, topic: str, datas: list[bytes | None]) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, datas)

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, data)
