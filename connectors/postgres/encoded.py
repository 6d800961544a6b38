"""Change events written straight as JsonConverter's bytes: the streaming fast path.

With no transforms in the way, the worker lets the task write what its converters would
(``SourceTask.encode_with``). Converting an event through Connect values costs more than reading
it from the server: a Struct per row, per ``source`` block and per envelope, then a writer per
field. Here a row's JSON is joined from its columns' text forms (an integer column's text *is* its
JSON), the ``source`` block from a template made once per transaction, and each piece of JSON
comes from the converter's own writers (``payload_writer``), so the bytes are the converter's.
tests/unit/test_postgres_encoded.py compares them with ``from_connect_data`` for every mapped type.

``EncodedTable`` answers the calls ``PostgresSourceTask`` makes of a ``TableSchema`` (row, key,
event, tombstone), so which events a change makes is decided in one place for both paths.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Callable
from typing import Any

from headwater.connect.api import DataException, SourceRecord
from headwater.connect.api.data import Schema, SchemaType
from headwater.connect.converters.json import JsonConverter

from .events import SOURCE_SCHEMA, TRANSACTION_SCHEMA, ChangeSource, TableColumn, TableSchema, column_value, now_us
from .pgoutput import UNCHANGED_TOAST, Begin

__all__ = ["EncodedRecord", "EncodedTable", "Encoders", "StreamedTx", "encodes"]

EncodedRecord = tuple[str, bytes | None, bytes | None, int | None]  # topic, key, value, timestamp ms
_INTS = (SchemaType.INT16, SchemaType.INT32, SchemaType.INT64)
_MAX_INT64 = (1 << 63) - 1
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")
# A column's text that is its own JSON string once quoted: ASCII, no quote, backslash or control character
# (anything else goes through the converter's writer; non-ASCII too, which also checks it is UTF-8).
_ESCAPED = re.compile(rb'["\\\x00-\x1f\x7f-\xff]')
_RAW, _QUOTED, _CONVERTED = 0, 1, 2  # how a column's pgoutput text becomes its JSON (see EncodedTable.raw_row)
# The source block's fields that change per transaction or per event; the others are the table's constants.
_VARYING = ("ts_ms", "sequence", "ts_us", "ts_ns", "txId", "lsn")


def encodes(key_converter: Any, value_converter: Any) -> bool:
    """Whether these converters are ones the fast path writes for (JsonConverter itself, not a subclass)."""
    return type(key_converter) is JsonConverter and type(value_converter) is JsonConverter


class Encoders:
    """The worker's key and value converters, and what every table's encoder shares."""

    def __init__(self, key: JsonConverter, value: JsonConverter) -> None:
        self.key, self.value = key, value
        self.source_fields = [(value.field_name(f.name), value.payload_writer(f.schema), f.name)
                              for f in SOURCE_SCHEMA.fields or ()]
        writers = {field: write for _, write, field in self.source_fields}
        self.sequence, self.lsn = writers["sequence"], writers["lsn"]
        assert [f for _, _, f in self.source_fields if f in ("sequence", "lsn")] == ["sequence", "lsn"]
        self.op = {op: value.payload_writer(Schema(SchemaType.STRING))(op) for op in "rcudt"}
        self.no_transaction = value.payload_writer(TRANSACTION_SCHEMA)(None)

    def record(self, record: SourceRecord) -> EncodedRecord:
        """Any other record (heartbeats), through the converters as the worker would."""
        topic = record.topic
        return (topic, self.key.from_connect_data(topic, record.key_schema, record.key),
                self.value.from_connect_data(topic, record.value_schema, record.value), record.timestamp)


def _cell(converter: JsonConverter, column: TableColumn, schema: Schema) -> Callable[[Any], str]:
    """A column's JSON inside a row, from its text form (or None / UNCHANGED_TOAST, the rare cases)."""
    write = converter.payload_writer(schema)
    convert = column.type.convert
    if convert is int and schema.name is None and schema.type in _INTS:
        def integer(text: Any) -> str:  # the server writes an int2/4/8 (or oid) as its JSON number
            return text if type(text) is str else write(column_value(column, text))
        return integer
    if convert is str:
        def string(text: Any) -> str:
            return write(text if type(text) is str else column_value(column, text))
        return string

    def other(text: Any) -> str:
        return write(convert(text) if type(text) is str else column_value(column, text))
    return other


class StreamedTx:
    """A streamed transaction's text in every event's ``source`` block, made once at its BEGIN."""

    __slots__ = ("final", "ts_ms", "ts_us", "tx_id", "timestamp")

    def __init__(self, begin: Begin) -> None:
        us = begin.commit_ts_us
        self.final, self.tx_id = b"%d" % begin.final_lsn, b"%d" % begin.xid
        self.ts_us = b"%d" % us
        self.ts_ms = self.ts_us[:-3]  # (commit times are past 1970-01-01 00:00:01)
        self.timestamp = us // 1000


class EncodedRow:
    """A row's JSON, and its key's JSON (None for a table without key columns)."""

    __slots__ = ("json", "key")

    def __init__(self, json: str, key: str | None) -> None:
        self.json, self.key = json, key


class EncodedTable:
    """One table's events as JsonConverter's bytes (see the module's docstring)."""

    def __init__(self, table: TableSchema, encoders: Encoders) -> None:
        self.base, self.encoders = table, encoders
        self.columns, self.key_columns, self.topic = table.columns, table.key_columns, table.topic
        self.schema, self.table = table.schema, table.table
        value, key = encoders.value, encoders.key
        fields = {f.name: f.schema for f in table.row_schema.fields or ()}
        self.cells = [(column.position, value.field_name(column.name), _cell(value, column, fields[column.name]))
                      for column in table.columns]
        self.key_cells: list[tuple[int, str, Callable[[Any], str]]] = []
        if table.key_schema is not None:
            key_fields = {f.name: f.schema for f in table.key_schema.fields or ()}
            self.key_cells = [(column.position, key.field_name(column.name),
                               _cell(key, column, key_fields[column.name])) for column in table.key_columns]
        # A key column is NOT NULL, so its schema is the same in the key and in the row: with the same
        # settings on both converters, the key's JSON is made of the row's pieces.
        self.key_from_row = [self.cells.index(c) for c in self.cells if c[0] in {k.position for k in
                                                                                 table.key_columns}] \
            if (key.decimal_format, key.replace_null_with_default) == \
            (value.decimal_format, value.replace_null_with_default) and self.key_cells else None
        self.key_envelope = key.envelope(table.key_schema)
        prefix, suffix = value.envelope(table.envelope)
        self.null_row = value.payload_writer(table.row_schema)(None)
        n = [value.field_name(f) for f in ("before", "after", "source", "op", "ts_ms", "ts_us", "ts_ns",
                                           "transaction")]
        # The envelope's text between the parts that change: before, after, source, op, the three times.
        self.pieces = (prefix + "{" + n[0], "," + n[1], "," + n[2])
        self.after_op = {op: "," + n[3] + text + "," + n[4] for op, text in encoders.op.items()}
        self.after_ms, self.after_us = "," + n[5], "," + n[6]
        self.end = "000," + n[7] + encoders.no_transaction + "}" + suffix  # ts_ns is ts_us followed by 000
        self.template_of: dict[str, Any] | None = None
        self.template: tuple[str, str, str] = ("", "", "")
        self._streamed_pieces(table, encoders)

    def _streamed_pieces(self, table: TableSchema, encoders: Encoders) -> None:
        """The bytes ``streamed`` joins: the same pieces as ``event``'s, with the source block split at its
        per-transaction and per-event fields instead of rebuilt for each transaction."""
        self.raw_cells: list[tuple[int, bytes, int, Callable[[Any], str]]] = []
        fields = {f.name: f.schema for f in table.row_schema.fields or ()}
        for (position, name, cell), column in zip(self.cells, table.columns, strict=True):
            schema = fields[column.name]
            convert = column.type.convert
            kind = (_RAW if convert is int and schema.name is None and schema.type in _INTS else
                    _QUOTED if convert is str and schema.name is None and schema.type == SchemaType.STRING
                    else _CONVERTED)
            self.raw_cells.append((position, name.encode(), kind, cell))
        key_prefix, key_suffix = self.key_envelope
        self.key_head, self.key_tail = (key_prefix + "{").encode(), ("}" + key_suffix).encode()
        base = table.source_base(ChangeSource(0, "false", 0, 0))
        consts, current = [], "{"
        for name, write, field in encoders.source_fields:
            current += name if current == "{" else "," + name
            if field in _VARYING:
                consts.append(current)
                current = ""
            else:
                current += write(base[field])
        consts.append(current + "}")
        assert len(consts) == len(_VARYING) + 1
        p0, p1, p2 = self.pieces
        quote = encoders.sequence('["')
        c = [p2 + consts[0], *consts[1:-1]]
        # between the transaction's and the event's fields: ts_ms, final, lsn, ts_us, ts_ns (ts_us + 000), tx_id, lsn
        self.source_consts = [part.encode() for part in (
            c[0], c[1] + quote[:-1], encoders.sequence('","')[1:-1], encoders.sequence('"]')[1:] + c[2], c[3],
            "000" + c[4], c[5])]
        self.before_b, self.after_b, self.null_b = p0.encode(), p1.encode(), self.null_row.encode()
        self.op_b = {op: (consts[-1] + text).encode() for op, text in self.after_op.items()}
        self.after_ms_b, self.after_us_b, self.end_b = self.after_ms.encode(), self.after_us.encode(), \
            self.end.encode()
        self.streamed_row = self._compiled_row()

    def _compiled_row(self) -> Callable[[Any, int], tuple[bytes, bytes | None, int]]:
        """``raw_row`` unrolled for this table's columns (made once per table: a loop over the columns costs
        more than reading them). It takes tuples that hold a text value for every column; any other (a NULL,
        an unchanged TOAST value, a value that does not convert) goes to ``raw_row``."""
        positions = [position for position, _, _, _ in self.raw_cells]
        if positions != list(range(len(positions))) or not positions or (self.key_cells and
                                                                         self.key_from_row is None):
            return self.raw_row  # columns left out or keyed by the key converter's own settings: the loop
        env: dict[str, Any] = {"unpack": _I32.unpack_from, "unpack_h": _I16.unpack_from, "escaped": _ESCAPED.search,
                               "loop": self.raw_row, "str": str}
        lines = ["def row(data, start):", f"    if unpack_h(data, start)[0] != {len(positions)}:",
                 "        return loop(data, start)", "    pos = start + 2", "    try:"]
        row_parts: list[tuple[bytes, str, bytes]] = []
        for i, (_, name, kind, cell) in enumerate(self.raw_cells):
            env[f"cell{i}"] = cell
            lines += ["        if data[pos] != 116:", "            return loop(data, start)",  # not 't' (text)
                      "        (n,) = unpack(data, pos + 1)", "        pos += 5 + n",
                      f"        v{i} = data[pos - n:pos]"]
            if kind == _QUOTED:
                lines += [f"        if escaped(v{i}) is not None:",
                          f"            v{i} = cell{i}(str(v{i}, 'utf-8')).encode()[1:-1]"]
            elif kind == _CONVERTED:
                lines += [f"        v{i} = cell{i}(str(v{i}, 'utf-8')).encode()"]
            opening = ("{" if i == 0 else ",").encode() + name + (b'"' if kind == _QUOTED else b"")
            row_parts.append((opening, f"v{i}", b'"' if kind == _QUOTED else b""))
        lines += ["    except Exception:", "        return loop(data, start)  # which raises naming the column"]

        def joined(parts: list[tuple[bytes, str, bytes]], close: bytes) -> str:
            pieces: list[str] = []
            pending = b""
            for opening, value, closing in parts:
                pieces += [repr(pending + opening), value]
                pending = closing
            return "b''.join((" + ", ".join(pieces + [repr(pending + close)]) + "))"

        key = "None"
        if self.key_from_row is not None:
            key_parts = [(("{" if j == 0 else ",").encode() + row_parts[i][0][1:], row_parts[i][1], row_parts[i][2])
                         for j, i in enumerate(self.key_from_row)]
            key = joined([(self.key_head[:-1] + key_parts[0][0], *key_parts[0][1:]), *key_parts[1:]], self.key_tail)
        lines.append(f"    return {joined(row_parts, b'}')}, {key}, pos")
        exec("\n".join(lines), env)  # noqa: S102 - code made from this table's column kinds, no outside text
        return env["row"]

    def raw_row(self, data: Any, pos: int) -> tuple[bytes, bytes | None, int]:
        """A pgoutput tuple at ``pos`` of ``data`` (TupleData) straight to the row's and the key's JSON, and
        the position after it. An integer's text is its JSON and a plain ASCII string's is once quoted, so
        neither is decoded; other values go through the same cells as ``row``."""
        (count,) = _I16.unpack_from(data, pos)
        pos += 2
        values: list[Any] = []
        for _ in range(count):
            kind = data[pos]
            if kind == 0x74:  # 't': text
                (length,) = _I32.unpack_from(data, pos + 1)
                pos += 5 + length
                values.append(data[pos - length:pos])
            else:
                values.append(None if kind == 0x6E else UNCHANGED_TOAST if kind == 0x75 else _bad_kind(kind, pos))
                pos += 1
        parts: list[bytes] = []
        try:
            for position, name, kind, cell in self.raw_cells:
                raw = values[position] if position < count else None
                if raw is None or raw is UNCHANGED_TOAST:  # NULL, unchanged TOAST, a column the tuple lacks
                    parts.append(name + cell(raw).encode())
                elif kind == _RAW:
                    parts.append(name + raw)
                elif kind == _QUOTED and _ESCAPED.search(raw) is None:
                    parts.append(name + b'"' + raw + b'"')
                else:
                    parts.append(name + cell(str(raw, "utf-8")).encode())
        except Exception as exc:  # the same error, naming the column, as ``row`` raises
            text = [v if v is None or v is UNCHANGED_TOAST else str(v, "utf-8", "replace") for v in values]
            raise self.base.conversion_error(text, exc) from exc
        key = None
        if self.key_from_row is not None:
            key = self.key_head + b",".join([parts[i] for i in self.key_from_row]) + self.key_tail
        elif self.key_cells:  # the key converter writes the key columns otherwise (its own settings)
            text = [v if v is None or v is UNCHANGED_TOAST else str(v, "utf-8") for v in values]
            key = _utf8(self.key_envelope[0] + self.row(text).key + self.key_envelope[1])  # type: ignore[operator]
        return b"{" + b",".join(parts) + b"}", key, pos

    def streamed(self, op: str, before: bytes | None, after: bytes | None, key: bytes | None, lsn: int,
                 tx: StreamedTx) -> EncodedRecord:
        """A streamed change's record from ``raw_row``'s bytes: what ``event`` writes for it."""
        c0, c1, c2, c3, c4, c5, c6 = self.source_consts
        at = b"%d" % lsn
        us = b"%d" % (time.time_ns() // 1000)
        null = self.null_b
        value = b"".join([self.before_b, before if before is not None else null, self.after_b,
                          after if after is not None else null, c0, tx.ts_ms, c1, tx.final, c2, at, c3, tx.ts_us,
                          c4, tx.ts_us, c5, tx.tx_id, c6, at, self.op_b[op], us[:-3], self.after_ms_b, us,
                          self.after_us_b, us, self.end_b])
        return self.topic, key, value, tx.timestamp

    def row(self, values: tuple[Any, ...] | list[Any]) -> EncodedRow:
        count = len(values)
        try:
            parts = [name + cell(values[pos] if pos < count else None) for pos, name, cell in self.cells]
        except Exception as exc:  # the same error, naming the column, as the Connect-value path raises
            raise self.base.conversion_error(values, exc) from exc
        key = None
        if self.key_from_row is not None:
            key = "{" + ",".join([parts[i] for i in self.key_from_row]) + "}"
        elif self.key_cells:
            key = "{" + ",".join([name + cell(values[pos] if pos < count else None)
                                  for pos, name, cell in self.key_cells]) + "}"
        return EncodedRow("{" + ",".join(parts) + "}", key)

    def key(self, row: EncodedRow | None) -> str | None:
        return None if row is None else row.key

    def _source(self, src: ChangeSource) -> tuple[str, str, str, str, str]:
        base = self.base.source_base(src)
        if base is not self.template_of:  # a new transaction: the text around sequence and lsn
            pieces, current = [], "{"
            for name, write, field in self.encoders.source_fields:
                current += name if current == "{" else "," + name
                if field in ("sequence", "lsn"):
                    pieces.append(current)
                    current = ""
                else:
                    current += write(base[field])
            self.template = (pieces[0], pieces[1], current + "}")
            self.template_of = base
        head, middle, tail = self.template
        sequence, lsn = src.sequence, src.lsn
        enc = self.encoders
        return (head, enc.sequence(sequence) if sequence is not None else "null", middle,
                str(lsn) if type(lsn) is int and 0 <= lsn <= _MAX_INT64 else enc.lsn(lsn), tail)

    def _key_bytes(self, key: str | None) -> bytes | None:
        if key is None:
            return None
        prefix, suffix = self.key_envelope
        return _utf8(prefix + key + suffix)

    def event(self, op: str, before: EncodedRow | None, after: EncodedRow | None, src: ChangeSource,
              partition: dict[str, Any], offset: dict[str, Any], transaction: Any = None,
              key_row: EncodedRow | None = None) -> EncodedRecord:
        if transaction is not None:
            raise DataException("transaction blocks are not written by the encoded path")
        now = now_us()
        us = str(now)
        p0, p1, p2 = self.pieces
        null = self.null_row
        head, sequence, middle, lsn, tail = self._source(src)
        value = "".join([p0, before.json if before is not None else null, p1, after.json if after is not None
                         else null, p2, head, sequence, middle, lsn, tail, self.after_op[op], str(now // 1000),
                         self.after_ms, us, self.after_us, us, self.end])
        row = key_row if key_row is not None else (after if after is not None else before)
        return self.topic, self._key_bytes(row.key if row is not None else None), _utf8(value), src.ts_us // 1000

    def tombstone(self, key_row: EncodedRow | None, partition: dict[str, Any], offset: dict[str, Any],
                  ts_ms: int) -> EncodedRecord:
        return self.topic, self._key_bytes(key_row.key if key_row is not None else None), None, ts_ms


def _bad_kind(kind: int, pos: int) -> Any:
    from .pgoutput import DecodeError

    raise DecodeError(f"unknown column kind {chr(kind)!r} at byte {pos}")


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise DataException(f"Converting a change event to JSON failed: {exc}") from exc
