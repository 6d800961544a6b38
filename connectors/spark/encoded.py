"""Reading JsonConverter's wire form straight into Arrow, for SparkParquetSink's append mode.

Turning a million JSON records into Connect Structs and then into Arrow costs far more than Spark's
write of them. When every value of a batch has the same schema (the bytes before ``"payload":`` are
the same), the payloads are joined into newline-delimited JSON and parsed by Arrow's JSON reader
with the schema's column types. Anything this path does not handle (another converter, no schemas,
tombstones, decimals or bytes, nested values, a value with a raw newline, a batch of several
schemas) makes ``decode`` return None, and the worker delivers the batch the usual way.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any, cast

import pyarrow as pa
import pyarrow.json as pa_json

from headwater.connect.api.data import Schema, SchemaType

from .rows import row_fields

__all__ = ["JsonPayloads", "PAYLOAD_MARK", "json_type"]

log = logging.getLogger(__name__)

PAYLOAD_MARK = re.compile(rb',\s*"payload"\s*:\s*')  # JsonConverter writes ',"payload":', others add spaces


def json_type(target: pa.DataType) -> pa.DataType | None:
    """The type Arrow's JSON reader reads a column as before it is cast to ``target`` (None: not here)."""
    if pa.types.is_timestamp(target):
        return pa.int64()
    if pa.types.is_date32(target) or pa.types.is_time32(target):
        return pa.int32()
    if (pa.types.is_integer(target) or pa.types.is_floating(target) or pa.types.is_boolean(target)
            or pa.types.is_string(target)):
        return target
    return None  # decimals and bytes are base64 text; nested values go the usual way


class _Shape:
    """What one distinct schema prefix reads as."""

    def __init__(self, schema: Schema, fields: dict[str, pa.DataType], read_as: pa.Schema) -> None:
        self.schema, self.fields, self.read_as = schema, fields, read_as


class JsonPayloads:
    """Decodes batches of JsonConverter values (``schemas.enable=true``) of struct schemas into Arrow."""

    def __init__(self, converter: Any) -> None:
        self.converter = converter
        self.shapes: dict[bytes, _Shape | None] = {}  # schema prefix -> how it reads (None: not here)

    def _shape(self, topic: str, value: bytes) -> tuple[bytes, _Shape | None]:
        mark = PAYLOAD_MARK.search(value)
        if mark is None or not value.endswith(b"}"):
            return b"", None
        cut = mark.start()
        prefix = value[:mark.end()]
        if prefix in self.shapes:
            return prefix, self.shapes[prefix]
        shape = None
        try:
            # the split is right only if the prefix is the whole schema and the rest the whole payload
            head = json.loads(value[:cut] + b"}")
            payload = json.loads(value[mark.end():-1])
            schema = self.converter.to_connect_data(topic, value).schema
            if list(head) == ["schema"] and isinstance(payload, dict) and schema is not None \
                    and schema.type == SchemaType.STRUCT:
                fields = row_fields(schema)
                read = {name: json_type(t) for name, t in fields.items()}
                if all(t is not None for t in read.values()):
                    shape = _Shape(schema, fields, pa.schema([pa.field(n, t) for n, t in read.items()]))
        except Exception:
            shape = None
        if len(self.shapes) < 64:
            self.shapes[prefix] = shape
        return prefix, shape

    def decode(self, topic: str, values: Sequence[bytes | None]) -> tuple[pa.Table, Schema] | None:
        """The values as an Arrow table with the schema's columns and types, and their Connect schema;
        None when this batch must go the usual way."""
        first = values[0]
        if first is None:
            return None
        prefix, shape = self._shape(topic, first)
        if shape is None:
            return None
        start = len(prefix)
        if None in values:
            return None  # a tombstone
        present = cast(list[bytes], values)
        payloads = b"\n".join([v[start:-1] for v in present if v.startswith(prefix) and v.endswith(b"}")])
        if payloads.count(b"\n") != len(values) - 1:
            return None  # another schema, or a value with a raw newline
        try:
            table = pa_json.read_json(pa.py_buffer(payloads), parse_options=pa_json.ParseOptions(
                explicit_schema=shape.read_as, unexpected_field_behavior="error", newlines_in_values=False))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(values):
            return None
        columns = []
        for name, target in shape.fields.items():
            column = table.column(name)
            if column.type != target:
                column = column.cast(target)
            columns.append(column)
        return pa.Table.from_arrays(columns, names=list(shape.fields)), shape.schema
