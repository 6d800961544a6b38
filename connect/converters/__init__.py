"""Headwater's built-in converters; ``headwater.connect.builtins`` registers ``CONVERTERS`` as a plugin.

- ``JsonConverter`` (``org.apache.kafka.connect.json.JsonConverter``), also a header converter;
- ``StringConverter`` (``org.apache.kafka.connect.storage.StringConverter``), also a header converter;
- ``ByteArrayConverter`` (``org.apache.kafka.connect.converters.ByteArrayConverter``), also a header converter;
- ``SimpleHeaderConverter`` (``org.apache.kafka.connect.storage.SimpleHeaderConverter``), the default
  header converter.

Logical types (Decimal, Date, Time, Timestamp) live in ``headwater.connect.api.logical``.
"""

from headwater.connect.api.converters import Converter, HeaderConverter

from .bytearray_converter import ByteArrayConverter
from .json import JsonConverter
from .simple_header import SimpleHeaderConverter
from .string_converter import StringConverter

__all__ = ["CONVERTERS", "ByteArrayConverter", "JsonConverter", "SimpleHeaderConverter", "StringConverter"]

CONVERTERS: list[type[Converter] | type[HeaderConverter]] = [JsonConverter, StringConverter, ByteArrayConverter,
                                                             SimpleHeaderConverter]

