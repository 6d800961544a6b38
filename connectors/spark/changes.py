"""Debezium envelopes in JsonConverter's wire form straight into Arrow, for SparkParquetSink's upsert mode.

Turning a million change events into dicts or Structs, one at a time, costs far more than merging them.
A batch's keys and values are joined into newline-delimited JSON and parsed by Arrow's JSON reader (the
payloads only, when the converter writes schemas), then kept as one Arrow table per batch: the key
(``_k``), the ``after`` row (``_r``, null for a delete or tombstone), ``source.lsn`` (``_pos``), the
Kafka offset (``_off``) and whether the change deletes its key (``_del``). The flush keeps the latest
change per key with Arrow's group-by (``latest``).

Anything this path does not match exactly as the record path would (keys that are not JSON objects of
integers, strings or booleans, rows with nested, binary, decimal or time-like values, the source's
placeholder for unavailable values, values that are not envelopes, a batch of several schemas) makes
``decode`` return None, and the worker delivers the batch the usual way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from headwater.connect.api.data import Schema, SchemaType

from .encoded import PAYLOAD_MARK, json_type
from .rows import row_fields

__all__ = ["ChangeDecoder", "Decoded", "Latest", "bucket_of", "canonical", "latest"]

# the types the record path infers from schemaless JSON scalars, and so the only ones taken here
_SCALARS = (pa.int64(), pa.float64(), pa.string(), pa.bool_(), pa.null())
_KEY_TYPES = (pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.string(), pa.bool_())
_UPSERT_OPS = pa.array(["c", "r", "u"])


def bucket_of(canonical: str, partition: int, buckets: int) -> int:
    """The bucket of a key given as canonical JSON (sorted fields, no spaces): see the sink's docstring."""
    digest = int.from_bytes(hashlib.blake2b(canonical.encode(), digest_size=8).digest(), "little")
    return partition * buckets + digest % buckets


@dataclass
class Decoded:
    """One batch's changes (``table``: ``_k``, ``_r``, ``_pos``, ``_off``, ``_del``), the key's columns and
    types, and the row's (``row_schema``: a Connect schema when the converter wrote one)."""

    table: pa.Table
    key_types: dict[str, pa.DataType]
    row_types: dict[str, pa.DataType | None]
    row_schema: Schema | None


class _Wire:
    """One converter's wire form: the payloads of its values, and the Connect schema their prefix names."""

    def __init__(self, converter: Any) -> None:
        self.converter = converter
        self.schemas = bool(converter.schemas_enable)
        self.prefixes: dict[bytes, Schema | None] = {}

    def payloads(self, topic: str, values: Sequence[bytes]) -> tuple[bytes, Schema | None] | None:
        """The values' payloads as newline-delimited JSON and their schema (None: schemaless); None when
        the batch is not one schema's values, one per line."""
        if not values:
            return None
        if not self.schemas:
            joined = b"\n".join(values)
            schema = None
        else:
            first = values[0]
            mark = PAYLOAD_MARK.search(first)
            if mark is None:
                return None
            prefix = first[:mark.end()]
            if prefix not in self.prefixes:
                if len(self.prefixes) >= 64:
                    return None
                try:
                    connect = self.converter.to_connect_data(topic, first).schema
                    head = json.loads(first[:mark.start()] + b"}")
                    self.prefixes[prefix] = connect if list(head) == ["schema"] else None
                except Exception:
                    self.prefixes[prefix] = None
            schema = self.prefixes[prefix]
            if schema is None or schema.type != SchemaType.STRUCT:
                return None
            start = len(prefix)
            if not all(v.startswith(prefix) and v.endswith(b"}") for v in values):
                return None
            joined = b"\n".join([v[start:-1] for v in values])
        if joined.count(b"\n") != len(values) - 1:
            return None  # a value with a raw newline
        return joined, schema


def _read(joined: bytes, schema: pa.Schema | None) -> pa.Table | None:
    options = pa_json.ParseOptions(newlines_in_values=False) if schema is None else pa_json.ParseOptions(
        explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=False)
    try:
        return pa_json.read_json(pa.py_buffer(joined), parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _read_types(fields: dict[str, pa.DataType]) -> pa.DataType | None:
    """The struct Arrow's JSON reader reads a schema's row as (None: a field this path does not take)."""
    read = {name: json_type(t) for name, t in fields.items()}
    if any(t is None for t in read.values()):
        return None
    return pa.struct([pa.field(n, t) for n, t in read.items()])


class ChangeDecoder:
    """Decodes batches of JsonConverter keys and Debezium envelope values into Arrow changes."""

    def __init__(self, key_converter: Any, value_converter: Any, placeholder: str) -> None:
        self.keys = _Wire(key_converter)
        self.values = _Wire(value_converter)
        self.placeholder = placeholder.encode()

    def decode(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
               offsets: Sequence[int]) -> Decoded | None:
        if any(k is None for k in keys):
            return None  # the record path names the record without a key
        key_part = self.keys.payloads(topic, keys)  # type: ignore[arg-type]
        if key_part is None:
            return None
        present = [i for i, v in enumerate(values) if v is not None]
        value_part = self.values.payloads(topic, [values[i] for i in present])  # type: ignore[misc]
        if present and value_part is None:
            return None
        if value_part is not None and self.placeholder in value_part[0]:
            return None  # unchanged TOAST values: the record path fills them from earlier rows
        key_table, key_types = self._keys(*key_part, len(keys))
        if key_table is None:
            return None
        n = len(values)
        if present:
            assert value_part is not None
            decoded = self._values(*value_part, len(present))
            if decoded is None:
                return None
            ops, after, lsn, row_types, row_schema = decoded
        else:
            ops, after, lsn, row_types, row_schema = pa.array([], pa.string()), pa.array([], pa.struct([])), pa.array(
                [], pa.int64()), {}, None
        index = pa.array(present, pa.int64())
        # every record in offset order: a tombstone (no value) deletes its key, has no row and no position
        op = pc.fill_null(_scatter(ops, index, n), "d") if len(present) < n else ops
        upsert = pc.is_in(op, _UPSERT_OPS)
        # a create/read/update without its row, and ops other than c/r/u/d (truncate, message), are no change
        keep = pc.or_(pc.and_(upsert, pc.is_valid(_scatter(after, index, n) if len(present) < n else after)),
                      pc.equal(op, "d"))
        table = pa.Table.from_arrays([
            pa.StructArray.from_arrays([c.combine_chunks() for c in key_table.columns], names=key_table.column_names),
            _scatter(after, index, n) if len(present) < n else after,
            pc.fill_null(_scatter(lsn, index, n) if len(present) < n else lsn, -1),
            pa.array(offsets, pa.int64()),
            pc.equal(op, "d"),
        ], names=["_k", "_r", "_pos", "_off", "_del"]).filter(keep)
        return Decoded(table, key_types, row_types, row_schema)

    def _keys(self, joined: bytes, schema: Schema | None, n: int) -> tuple[pa.Table | None, dict[str, pa.DataType]]:
        if schema is None:
            table = _read(joined, None)
            if table is None or table.num_rows != n:
                return None, {}
            types = {f.name: f.type for f in table.schema}
            if not types or any(t not in (pa.int64(), pa.string(), pa.bool_()) for t in types.values()):
                return None, {}  # doubles, nested keys: the record path's canonical JSON may differ
        else:
            types = row_fields(schema)
            read = _read_types(types)
            if read is None or any(t not in _KEY_TYPES for t in types.values()):
                return None, {}
            table = _read(joined, pa.schema(list(read)))
            if table is None or table.num_rows != n:
                return None, {}
            table = table.cast(pa.schema([pa.field(k, t) for k, t in types.items()]))
        if any(c.null_count for c in table.columns):
            return None, {}  # a key lacking a field: the record path names it
        names = sorted(table.column_names)
        return table.select(names), {k: types[k] for k in names}

    def _values(self, joined: bytes, schema: Schema | None, n: int
                ) -> tuple[pa.Array, pa.Array, pa.Array, dict[str, pa.DataType | None], Schema | None] | None:
        """The values' ops, ``after`` rows, positions, the rows' column types and Connect schema."""
        row_schema: Schema | None = None
        if schema is None:
            table = _read(joined, None)
            if table is None or table.num_rows != n or not {"op", "after", "source"} <= set(table.column_names):
                return None  # not envelopes (a plain row is the record path's)
            after_type = table.schema.field("after").type
            if pa.types.is_null(after_type):
                after = pa.nulls(n, pa.struct([]))
            elif not pa.types.is_struct(after_type) or any(f.type not in _SCALARS for f in after_type):
                return None
            else:
                after = table.column("after").combine_chunks()
            source = table.column("source").combine_chunks()
            if not pa.types.is_struct(source.type) or source.type.get_field_index("lsn") < 0:
                lsn = pa.nulls(n, pa.int64())
            else:
                lsn = source.field("lsn")
                if pa.types.is_null(lsn.type):
                    lsn = pa.nulls(n, pa.int64())
                elif lsn.type != pa.int64():
                    return None  # the record path orders by integer positions only
                lsn = pc.if_else(source.is_valid(), lsn, pa.scalar(None, pa.int64()))
            row_types: dict[str, pa.DataType | None] = {
                f.name: None if pa.types.is_null(f.type) else f.type for f in after.type}
        else:
            after_field = schema.field("after")
            op_field = schema.field("op")
            if after_field is None or op_field is None or after_field.schema.type != SchemaType.STRUCT:
                return None
            row_schema = after_field.schema
            fields = row_fields(row_schema)
            read = _read_types(fields)
            if read is None or any(pa.types.is_nested(t) or pa.types.is_binary(t) for t in fields.values()):
                return None
            source_field = schema.field("source")
            has_lsn = source_field is not None and source_field.schema.type == SchemaType.STRUCT and \
                source_field.schema.field("lsn") is not None
            parse = [pa.field("op", pa.string()), pa.field("after", read)]
            if has_lsn:
                parse.append(pa.field("source", pa.struct([pa.field("lsn", pa.int64())])))
            table = _read(joined, pa.schema(parse))
            if table is None or table.num_rows != n:
                return None
            after = table.column("after").combine_chunks().cast(pa.struct([pa.field(k, t) for k, t in fields.items()]))
            if has_lsn:
                source = table.column("source").combine_chunks()
                lsn = pc.if_else(source.is_valid(), source.field("lsn"), pa.scalar(None, pa.int64()))
            else:
                lsn = pa.nulls(n, pa.int64())
            row_types = dict(fields)
        ops = table.column("op").combine_chunks()
        if ops.type != pa.string() or ops.null_count:
            return None
        return ops, after, lsn, row_types, row_schema


def _scatter(values: pa.Array, index: pa.Array, n: int) -> pa.Array:
    """``values`` at positions ``index`` of an array of ``n`` (nulls elsewhere)."""
    positions = pa.array(range(n), pa.int64())
    where = pc.index_in(positions, value_set=index)  # the value's row, or null
    return values.take(where)


@dataclass
class Latest:
    """A flush's latest change per key: the keys, each one's bucket, whether it deletes the key, and the rows
    of the keys it does not delete (the table's columns)."""

    keys: pa.Table
    buckets: pa.Array
    deleted: pa.Array
    rows: pa.Table


def latest(parts: list[pa.Table], key_types: dict[str, pa.DataType], schema: pa.Schema, partition: int,
           buckets: int) -> Latest:
    """The latest change per key (by source position, then Kafka offset) of a flush's decoded batches."""
    names = list(key_types)
    key_tables, row_tables = [], []
    for part in parts:
        k = part.column("_k").combine_chunks()
        key_tables.append(pa.Table.from_arrays([k.field(n).cast(key_types[n]) for n in names], names=names))
        row_tables.append(_aligned(part.column("_r").combine_chunks(), schema))
    keys, rows = pa.concat_tables(key_tables), pa.concat_tables(row_tables)
    meta = pa.concat_tables([p.select(["_pos", "_off", "_del"]) for p in parts])
    order = pc.sort_indices(meta, sort_keys=[("_pos", "ascending"), ("_off", "ascending")])
    ranked = keys.take(order).append_column("_n", pa.array(range(len(order)), pa.int64()))
    last = ranked.group_by(names).aggregate([("_n", "max")]).column("_n_max")
    chosen = order.take(last)
    keys = keys.take(chosen)
    return Latest(keys, pa.array([bucket_of(c, partition, buckets) for c in canonical(keys)], pa.int32()),
                  meta.column("_del").take(chosen), rows.take(chosen))


_PLAIN_TEXT = r'^[ !#-\[\]-~]*$'  # printable ASCII but '"' and '\': JSON writes it as it is


def canonical(keys: pa.Table) -> list[str]:
    """Each key as the record path's canonical JSON (``json.dumps(key, sort_keys=True, separators=(",", ":"))``),
    built column-wise when every value is written as it is (integers, booleans, plain ASCII text)."""
    names = sorted(keys.column_names)
    pieces: list[Any] = []
    for i, name in enumerate(names):
        column = keys.column(name)
        pieces.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        if pa.types.is_integer(column.type):
            pieces.append(pc.cast(column, pa.string()))
        elif pa.types.is_boolean(column.type):
            pieces.append(pc.if_else(column, "true", "false"))
        elif pa.types.is_string(column.type) and pc.all(pc.match_substring_regex(column, _PLAIN_TEXT)).as_py():
            pieces += ['"', column, '"']
        else:
            return [json.dumps(k, sort_keys=True, separators=(",", ":")) for k in keys.to_pylist()]
    pieces.append("}")
    return pc.binary_join_element_wise(*pieces, "").to_pylist()


def _aligned(rows: pa.StructArray, schema: pa.Schema) -> pa.Table:
    """A row struct as the table's columns, in its order (nulls where the struct lacks one)."""
    present = {f.name: i for i, f in enumerate(rows.type)}
    children = rows.flatten() if present else []
    columns = [children[present[f.name]].cast(f.type) if f.name in present else pa.nulls(len(rows), f.type)
               for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)
