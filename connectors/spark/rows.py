"""Connect values to Arrow: the Spark schema comes from the record's Connect schema, or is inferred
from schemaless JSON; a table's columns grow as new fields arrive and a field that changes type is
refused (``TypeConflict``) before anything is written."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa

from headwater.connect.api.data import Schema, SchemaType, Struct
from headwater.connect.api.errors import DataException
from headwater.connect.api.logical import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME

__all__ = ["TableShape", "TypeConflict", "arrow_type", "infer_type", "plain", "row_fields", "spark_frame", "storable"]

_PRIMITIVE = {
    SchemaType.INT8: pa.int8(), SchemaType.INT16: pa.int16(), SchemaType.INT32: pa.int32(),
    SchemaType.INT64: pa.int64(), SchemaType.FLOAT32: pa.float32(), SchemaType.FLOAT64: pa.float64(),
    SchemaType.BOOLEAN: pa.bool_(), SchemaType.STRING: pa.string(), SchemaType.BYTES: pa.binary(),
}
# Debezium's semantic types whose meaning a lake user wants as a Spark date or timestamp (timestamps
# without a time zone: wall-clock values, written as Spark's timestamp_ntz by ``spark_frame``)
_DEBEZIUM_TIME = {
    "io.debezium.time.Date": pa.date32(),
    "io.debezium.time.Timestamp": pa.timestamp("ms"),
    "io.debezium.time.MicroTimestamp": pa.timestamp("us"),
}


class TypeConflict(DataException, ValueError):
    """A field whose type differs from the table's (still a ValueError, as it was)."""

    def __init__(self, field: str, table_type: pa.DataType, record_type: pa.DataType) -> None:
        super().__init__(f"field {field!r} is {table_type} in the table but {record_type} in the record")
        self.field = field


def arrow_type(schema: Schema) -> pa.DataType:
    """The Arrow (and so Spark) type of a Connect schema."""
    name = schema.name or ""
    if name == DECIMAL_NAME:
        scale = int(schema.params.get("scale", 0))
        precision = int(schema.params.get("connect.decimal.precision", 38))
        return pa.decimal128(max(precision, scale, 1), scale)
    if name == DATE_NAME:
        return pa.date32()
    if name == TIMESTAMP_NAME:
        return pa.timestamp("ms", tz="UTC")
    if name == TIME_NAME:
        return pa.time32("ms")
    if name in _DEBEZIUM_TIME:
        return _DEBEZIUM_TIME[name]
    if schema.type == SchemaType.STRUCT:
        return pa.struct([pa.field(f.name, arrow_type(f.schema)) for f in schema.fields])
    if schema.type == SchemaType.ARRAY:
        assert schema.value_schema is not None
        return pa.list_(arrow_type(schema.value_schema))
    if schema.type == SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return pa.map_(arrow_type(schema.key_schema), arrow_type(schema.value_schema))
    return _PRIMITIVE[schema.type]


def row_fields(schema: Schema) -> dict[str, pa.DataType]:
    """A struct schema's columns."""
    return {f.name: arrow_type(f.schema) for f in schema.fields}


def infer_type(value: Any) -> pa.DataType | None:
    """The type of a schemaless JSON value; None for null (it fits any column)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    if isinstance(value, str):
        return pa.string()
    if isinstance(value, bytes):
        return pa.binary()
    if isinstance(value, Decimal):
        return pa.float64()
    if isinstance(value, dt.datetime):
        return pa.timestamp("us", tz="UTC")
    if isinstance(value, dict):
        fields: dict[str, pa.DataType] = {}
        for k, v in value.items():
            t = infer_type(v)
            fields[str(k)] = pa.string() if t is None else t
        return pa.struct([pa.field(k, t) for k, t in fields.items()])
    if isinstance(value, list | tuple):
        element: pa.DataType | None = None
        for v in value:
            element = merge_types("[]", element, infer_type(v))
        return pa.list_(element if element is not None else pa.string())
    return pa.string()


def merge_types(name: str, old: pa.DataType | None, new: pa.DataType | None) -> pa.DataType | None:
    """The column type once ``new`` arrives where ``old`` was: structs gain fields, ints widen to
    floats for inferred JSON; anything else different is a TypeConflict."""
    if old is None or old == new:
        return new if old is None else old
    if new is None:
        return old
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        fields = {f.name: f.type for f in old}
        for f in new:
            fields[f.name] = merge_types(f"{name}.{f.name}", fields.get(f.name), f.type)
        return pa.struct([pa.field(k, t) for k, t in fields.items()])
    if pa.types.is_list(old) and pa.types.is_list(new):
        return pa.list_(merge_types(name, old.value_type, new.value_type))
    if {old, new} == {pa.int64(), pa.float64()}:
        return pa.float64()
    raise TypeConflict(name, old, new)


class TableShape:
    """A table's columns in order, as the lake has them and as buffered rows extend them."""

    def __init__(self, columns: dict[str, pa.DataType] | None = None) -> None:
        self.columns: dict[str, pa.DataType] = dict(columns or {})

    def absorb(self, fields: dict[str, pa.DataType | None]) -> None:
        """Let these fields join the columns; raises TypeConflict (changing nothing) when one does not fit.
        A change replaces ``columns`` with a new dict rather than editing it: flushes read it from other
        threads."""
        changed: dict[str, pa.DataType] | None = None
        columns = self.columns
        for name, new in fields.items():
            old = columns.get(name)
            if old == new or new is None:
                continue
            merged = merge_types(name, old, new)
            if merged != old:
                if changed is None:
                    changed = dict(columns)
                changed[name] = merged
        if changed is not None:
            self.columns = changed

    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(n, t if t is not None else pa.string()) for n, t in self.columns.items()])

    def to_json(self) -> list[list[str]]:
        return [[n, _type_name(t)] for n, t in self.columns.items()]

    @classmethod
    def from_json(cls, data: list[list[str]] | None) -> TableShape:
        return cls({n: _parse_type(t) for n, t in data or []})


def _type_name(t: pa.DataType) -> str:
    # Arrow's schema IPC form is the exact round trip; hex keeps the commit log JSON
    return pa.schema([pa.field("t", t)]).serialize().to_pybytes().hex()


def _parse_type(s: str) -> pa.DataType:
    return pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(s))).field("t").type


def plain(value: Any) -> Any:
    """A Connect value as Arrow takes it: Structs become dicts (recursively)."""
    if isinstance(value, Struct):
        return {k: plain(v) for k, v in value.values.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def storable(t: pa.DataType) -> pa.DataType:
    """The Arrow type Spark writes for ``t``: a time of day (Connect's Time) as its integer count (Spark's
    TIME type is off by default and unreadable by older readers), nested types likewise."""
    if pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_time64(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(storable(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(storable(t.value_type)))
    if pa.types.is_map(t):
        return pa.map_(storable(t.key_type), t.item_field.with_type(storable(t.item_type)))
    return t


def spark_frame(spark: Any, table: pa.Table) -> Any:
    """A Spark DataFrame of an Arrow table, with the lake's types: a timestamp without a time zone is
    ``timestamp_ntz`` (the wall-clock value, the same in every reader's session time zone), one with a
    zone ``timestamp`` (an instant); times of day are integers (``storable``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    target = pa.schema([f.with_type(storable(f.type)) for f in table.schema])
    if target != table.schema:
        table = table.cast(target)
    return spark.createDataFrame(table, schema=from_arrow_schema(target, prefer_timestamp_ntz=True))
