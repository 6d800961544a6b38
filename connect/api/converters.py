"""Converters turn Connect data into the bytes stored in Kafka, and back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

from .data import Schema

__all__ = ["Converter", "HeaderConverter", "SchemaAndValue"]


class SchemaAndValue(NamedTuple):
    schema: Schema | None
    value: Any


class Converter(ABC):
    aliases: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1.0.0"

    def configure(self, configs: dict[str, str], is_key: bool) -> None:  # noqa: B027 - optional hook
        """Settings with the ``key.converter.`` / ``value.converter.`` prefix removed."""

    @abstractmethod
    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """Serialize a key or value."""

    @abstractmethod
    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        """Deserialize a key or value."""

    def from_connect_values(self, topic: str, schema: Schema | None, values: list[Any]) -> list[bytes | None]:
        """Serialize many keys or values sharing one schema (the batch path; override for speed)."""
        convert = self.from_connect_data
        return [convert(topic, schema, v) for v in values]

    def to_connect_values(self, topic: str, datas: list[bytes | None]) -> SchemaAndValue | None:
        """Deserialize many keys or values: (their shared schema, the values), or None when they
        do not share one (the worker then converts record by record)."""
        convert = self.to_connect_data
        converted = [convert(topic, d) for d in datas]
        schema = converted[0].schema if converted else None
        if any(sv.schema != schema for sv in converted):
            return None
        return SchemaAndValue(schema, [sv.value for sv in converted])


class HeaderConverter(ABC):
    aliases: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1.0.0"

    def configure(self, configs: dict[str, str]) -> None:  # noqa: B027 - optional hook
        """Settings with the ``header.converter.`` prefix removed."""

    @abstractmethod
    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        """Serialize one header value."""

    @abstractmethod
    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        """Deserialize one header value."""
