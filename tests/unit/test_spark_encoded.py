"""The Spark sink's encoded path reads JsonConverter's bytes into the same Arrow columns as the record path,
and declines (None) whatever it does not handle."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from headwater.connect.api.data import (
    INT64_SCHEMA,
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    SchemaBuilder,
    Struct,
)
from headwater.connect.api.logical import DATE_SCHEMA, TIMESTAMP_SCHEMA, decimal_schema
from headwater.connect.converters.json import JsonConverter
from headwater.connectors.spark.encoded import JsonPayloads
from headwater.connectors.spark.rows import row_fields


def converter() -> JsonConverter:
    c = JsonConverter()
    c.configure({"schemas.enable": "true"}, is_key=False)
    return c


SCHEMA = (SchemaBuilder.struct().name("t.Value")
          .field("id", INT64_SCHEMA)
          .field("name", OPTIONAL_STRING_SCHEMA)
          .field("score", OPTIONAL_FLOAT32_SCHEMA)
          .field("ok", OPTIONAL_BOOLEAN_SCHEMA)
          .field("small", OPTIONAL_INT16_SCHEMA)
          .field("at", TIMESTAMP_SCHEMA)
          .field("day", DATE_SCHEMA)
          .build())


def value(i: int) -> Struct:
    return Struct(SCHEMA, {"id": i, "name": None if i % 5 == 0 else f"n\u00e9{i} \"q\"", "score": i / 4,
                           "ok": i % 2 == 0, "small": i % 300,
                           "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
                           "day": dt.date(2026, 1, 1) + dt.timedelta(days=i % 30)})


def test_the_encoded_path_gives_the_record_paths_columns() -> None:
    c = converter()
    values = [c.from_connect_data("t", SCHEMA, value(i)) for i in range(500)]
    decoded = JsonPayloads(c).decode("t", values)
    assert decoded is not None
    table, schema = decoded
    fields = row_fields(schema)
    expected = pa.Table.from_arrays(
        [pa.array([c.to_connect_data("t", v).value.values[n] for v in values], type=t) for n, t in fields.items()],
        names=list(fields))
    assert table.schema == expected.schema
    assert table.equals(expected)


def test_what_the_encoded_path_declines() -> None:
    c = converter()
    payloads = JsonPayloads(c)
    good = [c.from_connect_data("t", SCHEMA, value(i)) for i in range(3)]
    other = SchemaBuilder.struct().name("t.Other").field("id", INT64_SCHEMA).build()
    assert payloads.decode("t", [*good, None]) is None  # a tombstone
    assert payloads.decode("t", [*good, c.from_connect_data("t", other, Struct(other, {"id": 1}))]) is None
    with_decimal = SchemaBuilder.struct().field("d", decimal_schema(2)).build()
    from decimal import Decimal

    assert payloads.decode("t", [c.from_connect_data("t", with_decimal, Struct(with_decimal,
                                                                                {"d": Decimal("1.50")}))]) is None
    plain = JsonConverter()
    plain.configure({"schemas.enable": "false"}, is_key=False)
    assert JsonPayloads(plain).decode("t", [b'{"id": 1}']) is None
    head, _, payload = (good[0] or b"").partition(b'"payload":')
    newline = head + b'"payload":' + payload.replace(b',"name"', b',\n"name"')  # a newline inside the payload
    assert payloads.decode("t", [newline]) is None


def test_spaced_json_from_other_producers_is_read_too() -> None:
    import json

    c = converter()
    compact = [c.from_connect_data("t", SCHEMA, value(i)) for i in range(20)]
    spaced = [json.dumps(json.loads(v or b"")).encode() for v in compact]  # ", " and ": " as json.dumps writes
    assert b', "payload": ' in spaced[0]
    got = JsonPayloads(c).decode("t", spaced)
    expected = JsonPayloads(c).decode("t", compact)
    assert got is not None and expected is not None and got[0].equals(expected[0])
