"""Kafka Connect's ``SimpleHeaderConverter``, the default header converter."""

from __future__ import annotations

import logging
from typing import Any

from headwater.connect.api.converters import HeaderConverter, SchemaAndValue
from headwater.connect.api.data import BYTES_SCHEMA, Schema
from headwater.connect.api.errors import DataException

from ..api.values import convert_to_string, parse_string

__all__ = ["SimpleHeaderConverter"]

log = logging.getLogger(__name__)


class SimpleHeaderConverter(HeaderConverter):
    """Writes header values as UTF-8 strings; reads them back inferring the schema (``Values.parseString``)."""

    aliases = ("org.apache.kafka.connect.storage.SimpleHeaderConverter",)

    def configure(self, configs: dict[str, Any]) -> None:
        pass

    def from_connect_header(self, topic: str, key: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if type(value) is str:
            return value.encode("utf-8", "replace")
        return convert_to_string(schema, value).encode("utf-8", "replace")  # type: ignore[union-attr]

    def to_connect_header(self, topic: str, key: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        try:
            return parse_string(data.decode("utf-8", "replace"))
        except (IndexError, StopIteration) as exc:
            raise DataException(f"Failed to deserialize value for header '{key}' on topic '{topic}'") from exc
        except Exception:
            log.warning("Failed to deserialize value for header '%s' on topic '%s', so using byte array", key, topic,
                        exc_info=True)
            return SchemaAndValue(BYTES_SCHEMA, data)
