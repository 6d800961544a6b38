"""The encoded fast path writes, byte for byte, what JsonConverter writes for the same change events."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import pytest

from headwater.connect.api import DataException
from headwater.connect.converters.json import JsonConverter
from headwater.connectors.envelope import UNAVAILABLE, Placeholder
from headwater.connectors.postgres.encoded import EncodedTable, Encoders, encodes
from headwater.connectors.postgres.events import ChangeSource, TableColumn, TableSchema
from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.connectors.postgres.types import PgType, column_type

NUMERIC_8_2 = ((8 << 16) | 2) + 4
ENUM = PgType(90001, "mood", "e", labels=("sad", "ok", "happy"))
INT4_ARRAY, TEXT_ARRAY = PgType(1007, "_int4", "b", element=23), PgType(1009, "_text", "b", element=25)

# (name, type oid, modifier, pg_type entry, NOT NULL, key, text forms to try)
COLUMNS: list[tuple[str, int, int, PgType | None, bool, bool, list[Any]]] = [
    ("id", 20, -1, None, True, True, ["1", "-9000000000", "9223372036854775807"]),
    ("small", 21, -1, None, False, False, ["-32768", None]),
    ("i", 23, -1, None, True, False, ["7", None]),
    ("f4", 700, -1, None, False, False, ["1.5", "NaN", "-Infinity"]),
    ("f8", 701, -1, None, False, False, ["2.25e-10", "Infinity"]),
    ("money", 1700, NUMERIC_8_2, None, False, False, ["12.34", "-0.50", "NaN"]),
    ("num", 1700, -1, None, False, False, ["1.2345", "100"]),
    ("ok", 16, -1, None, False, False, ["t", "f"]),
    ("name", 25, -1, None, False, False, ['h\u00e9llo "q" \\ \n\t\u2028 \U0001f600', UNCHANGED_TOAST]),
    ("code", 1042, -1, None, True, False, ["ab  ", None, UNCHANGED_TOAST]),
    ("blob", 17, -1, None, False, False, ["\\x00ff10", UNCHANGED_TOAST]),
    ("day", 1082, -1, None, False, False, ["2024-05-06", "1970-01-01"]),
    ("at", 1083, -1, None, False, False, ["07:08:09.123456"]),
    ("ts", 1114, -1, None, False, False, ["2024-05-06 07:08:09.5"]),
    ("tstz", 1184, -1, None, False, False, ["2024-05-06 07:08:09.5+00", "2024-05-06 09:08:09+02"]),
    ("span", 1186, -1, None, False, False, ["1 year 2 mons 3 days 04:05:06.7"]),
    ("uid", 2950, -1, None, False, False, ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]),
    ("doc", 3802, -1, None, False, False, ['{"a": [1, 2], "b": "\u00fc"}']),
    ("mood", 90001, -1, ENUM, False, False, ["happy"]),
    ("ints", 1007, -1, INT4_ARRAY, False, False, ["{1,2,NULL}", "{}", UNCHANGED_TOAST]),
    ("words", 1009, -1, TEXT_ARRAY, False, False, ['{a,"b c",NULL}', UNCHANGED_TOAST]),
    ("pt", 600, -1, None, False, False, ["(1,2)"]),  # an unknown type: its text form
]
CONVERTER_SETTINGS = [
    {"schemas.enable": "false"},
    {"schemas.enable": "true"},
    {"schemas.enable": "true", "decimal.format": "NUMERIC", "replace.null.with.default": "false"},
]


def _table(columns: list[tuple[str, int, int, PgType | None, bool, bool, list[Any]]],
           placeholder: Placeholder | None = None, **kw: Any) -> TableSchema:
    def element(oid: int) -> Any:
        return column_type(oid, -1, **kw)

    cols = [TableColumn(name, column_type(oid, mod, custom=custom, element_of=element,
                                          optional=not (not_null or key), **kw), key, not_null or key, position, oid,
                        *([placeholder] if placeholder else []))
            for position, (name, oid, mod, custom, not_null, key, _) in enumerate(columns)]
    return TableSchema("srv", "shop", "public", "things", cols)


def _rows(columns: list[tuple[str, int, int, PgType | None, bool, bool, list[Any]]]) -> list[list[Any]]:
    width = max(len(c[6]) for c in columns)
    return [[c[6][i % len(c[6])] for c in columns] for i in range(width)]


def _converters(settings: dict[str, str]) -> tuple[JsonConverter, JsonConverter]:
    key, value = JsonConverter(), JsonConverter()
    key.configure({"schemas.enable": "false"}, True)
    value.configure(settings, False)
    return key, value


def _both(table: TableSchema, encoded: EncodedTable, key: JsonConverter, value: JsonConverter, make: Any) -> None:
    record = make(table)
    got = make(encoded)
    want = (record.topic, key.from_connect_data(record.topic, record.key_schema, record.key),
            value.from_connect_data(record.topic, record.value_schema, record.value), record.timestamp)
    assert got == want


@pytest.mark.parametrize("settings", CONVERTER_SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("decimal_mode", ["precise", "double", "string"])
def test_every_event_kind_writes_the_converters_bytes(settings: dict[str, str], decimal_mode: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: 1_732_000_000_123_456_789)  # the envelope's processing time
    key, value = _converters(settings)
    table = _table(COLUMNS, decimal_mode=decimal_mode)
    encoded = EncodedTable(table, Encoders(key, value))
    part, offset = {"server": "srv"}, {"lsn": 5}
    sources = [ChangeSource(1_700_000_000_000_001, "first", None, 4096),
               ChangeSource(1_700_000_000_000_002, "false", 77, 8192, 8000, '["8000","8192"]'),
               ChangeSource(1_700_000_000_000_002, "false", 77, 8300, 8000, '["8000","8300"]')]
    rows = _rows(COLUMNS)
    compared = 0
    for src in sources:
        for i, row in enumerate(rows):
            other = rows[(i + 1) % len(rows)]
            _both(table, encoded, key, value, lambda t, row=row, src=src: t.event("c", None, t.row(row), src, part,
                                                                                   offset))
            _both(table, encoded, key, value, lambda t, row=row, other=other, src=src: t.event(
                "u", t.row(row), t.row(other), src, part, offset))
            _both(table, encoded, key, value, lambda t, row=row, src=src: t.event("d", t.row(row), None, src, part,
                                                                                   offset))
            _both(table, encoded, key, value, lambda t, row=row, src=src: t.tombstone(t.row(row), part, offset, 12))
            # a delete's old key: only the key column, the rest None (NOT NULL ones get their type's zero)
            only_key = [row[0]] + [None] * (len(row) - 1)
            _both(table, encoded, key, value, lambda t, k=only_key, src=src: t.event("d", t.row(k), None, src, part,
                                                                                      offset))
            compared += 5
        _both(table, encoded, key, value, lambda t, src=src: t.event("t", None, None, src, part, offset))
    assert compared == 5 * len(rows) * len(sources)


def test_a_table_without_key_columns_has_null_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: 1_732_000_000_000_000_000)
    key, value = _converters({"schemas.enable": "true"})
    columns = [(n, o, m, c, nn, False, v) for n, o, m, c, nn, _, v in COLUMNS[:4]]
    table = _table(columns)
    encoded = EncodedTable(table, Encoders(key, value))
    src = ChangeSource(1_700_000_000_000_000, "false", 5, 100, 90, '["90","100"]')
    record = encoded.event("c", None, encoded.row(["1", "2", "3", "1.5"]), src, {}, {})
    assert record[1] is None
    _both(table, encoded, key, value, lambda t: t.event("c", None, t.row(["1", "2", "3", "1.5"]), src, {}, {}))


def test_a_value_the_converter_refuses_is_refused_the_same_way() -> None:
    key, value = _converters({"schemas.enable": "false"})
    table = _table([("id", 20, -1, None, True, True, []), ("i", 23, -1, None, True, False, [])])
    encoded = EncodedTable(table, Encoders(key, value))
    src = ChangeSource(1, "false", 1, 1)
    bad = ["1", UNCHANGED_TOAST]  # an unchanged TOAST value in a NOT NULL int column: null for a required field
    with pytest.raises(DataException) as slow:
        record = table.event("c", None, table.row(bad), src, {}, {})
        value.from_connect_data(record.topic, record.value_schema, record.value)
    with pytest.raises(DataException) as fast:
        encoded.event("c", None, encoded.row(bad), src, {}, {})
    assert str(fast.value) == str(slow.value)


def test_only_json_converter_itself_is_written_for() -> None:
    class Custom(JsonConverter):
        pass

    key, value = _converters({})
    assert encodes(key, value) and not encodes(key, Custom())


# Debezium's fallback for a NOT NULL column a key-only old tuple leaves out, as JsonConverter writes it
# (schemas.enable=false, decimal.format=BASE64), per decimal.handling.mode where it matters.
FALLBACKS: dict[str, Any] = {
    "small": 0, "i": 0, "f4": 0.0, "f8": 0.0, "ok": False, "name": "", "code": "", "blob": "", "day": 0, "at": 0,
    "ts": 0, "tstz": "1970-01-01T00:00:00Z", "span": 0, "uid": "", "doc": "", "mood": "", "ints": [], "words": [],
    "pt": "",
}
DECIMAL_FALLBACKS: dict[str, dict[str, Any]] = {"precise": {"money": "AA==", "num": {"scale": 0, "value": "AA=="}},
                     "double": {"money": 0.0, "num": 0.0}, "string": {"money": "0.00", "num": "0"}}


@pytest.mark.parametrize("decimal_mode", ["precise", "double", "string"])
def test_not_null_columns_left_out_of_an_old_key_take_debeziums_fallback(decimal_mode: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every mapped type as NOT NULL: a delete's old key (only the key column) converts in both paths, each
    left-out column taking the type's fallback (a numeric's is 0 at its scale, never bytes)."""
    import json

    monkeypatch.setattr(time, "time_ns", lambda: 1_732_000_000_000_000_000)
    key, value = _converters({"schemas.enable": "false"})
    columns = [(n, o, m, c, True, k, v) for n, o, m, c, _, k, v in COLUMNS]
    table = _table(columns, decimal_mode=decimal_mode)
    encoded = EncodedTable(table, Encoders(key, value))
    src = ChangeSource(1_700_000_000_000_000, "false", 5, 100, 90, '["90","100"]')
    only_key = ["42"] + [None] * (len(columns) - 1)
    _both(table, encoded, key, value, lambda t: t.event("d", t.row(only_key), None, src, {}, {}))
    before = json.loads(encoded.event("d", encoded.row(only_key), None, src, {}, {})[2] or b"")["before"]
    assert before == {"id": 42, **FALLBACKS, **DECIMAL_FALLBACKS[decimal_mode]}


def test_a_row_that_does_not_convert_names_the_table_and_column_in_both_paths() -> None:
    key, value = _converters({"schemas.enable": "false"})
    columns: list[tuple[str, int, int, PgType | None, bool, bool, list[Any]]] = [
        ("id", 20, -1, None, True, True, []), ("day", 1082, -1, None, False, False, []),
        ("money", 1700, NUMERIC_8_2, None, True, False, [])]
    table = _table(columns)
    encoded = EncodedTable(table, Encoders(key, value))
    for row, problem in ((["1", "10000-01-01", "1.00"], "Cannot convert column day (io.debezium.time.Date) of table "
                                                         "public.things: ValueError: "),
                         (["1", None, "NaN"], "Cannot convert column money (org.apache.kafka.connect.data.Decimal, "
                                              "NOT NULL) of table public.things: 'NaN' converts to null (NaN and "
                                              "infinities have no Decimal form")):
        for path in (table, encoded):
            with pytest.raises(DataException) as failed:
                path.row(row)
            assert str(failed.value).startswith(problem), str(failed.value)


ARRAYS = {name: PgType(oid, f"_{name}", "b", element=element) for name, oid, element in (
    ("bytea", 1001, 17), ("int2", 1005, 21), ("int8", 1016, 20), ("date", 1182, 1082), ("uuid", 2951, 2950),
    ("jsonb", 3807, 3802), ("timestamptz", 1185, 1184), ("float8", 1022, 701))}
# Every column unchanged TOAST (type oid, pg_type entry, NOT NULL); the key "1"
TOASTED: list[tuple[str, int, int, PgType | None, bool, bool, list[Any]]] = [
    ("id", 20, -1, None, True, True, ["1"])] + [
    (name, oid, -1, custom, not_null, False, [UNCHANGED_TOAST]) for name, oid, custom, not_null in (
        ("body", 25, None, True), ("doc", 3802, None, False), ("blob", 17, None, True), ("blob_n", 17, None, False),
        ("words", 1009, TEXT_ARRAY, True), ("words_n", 1009, TEXT_ARRAY, False), ("ints", 1007, INT4_ARRAY, True),
        ("ints_n", 1007, INT4_ARRAY, False), ("smalls", 1005, ARRAYS["int2"], True),
        ("longs", 1016, ARRAYS["int8"], True), ("days", 1182, ARRAYS["date"], True),
        ("blobs", 1001, ARRAYS["bytea"], True), ("uids", 2951, ARRAYS["uuid"], True),
        ("docs", 3807, ARRAYS["jsonb"], True), ("times", 1185, ARRAYS["timestamptz"], True),
        ("floats", 1022, ARRAYS["float8"], False))]


# What Debezium 2.7's UnchangedToastedPlaceholder gives (the UUIDs from Java's UUID.nameUUIDFromBytes)
@pytest.mark.parametrize(("setting", "text", "binary", "ints", "uuid"), [
    (None, UNAVAILABLE, UNAVAILABLE.encode(), list(UNAVAILABLE.encode()), "b68a35a7-17ad-35b3-af2a-ae46edb4545a"),
    ("hex:00ff41", "\x00\ufffdA", b"\x00\xffA", [0, -1, 65], "d396e6af-3f09-39f2-8c5b-e42adadb290f")])
@pytest.mark.parametrize("settings", CONVERTER_SETTINGS[:2], ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_unchanged_toast_values_are_debeziums_placeholder_in_every_shape_in_both_paths(
        setting: str | None, text: str, binary: bytes, ints: list[int], uuid: str, settings: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: 1_732_000_000_123_456_789)
    key, value = _converters(settings)
    table = _table(TOASTED, Placeholder(setting) if setting else None)
    encoded = EncodedTable(table, Encoders(key, value))
    src = ChangeSource(1_700_000_000_000_002, "false", 77, 8192, 8000, '["8000","8192"]')
    row = [c[6][0] for c in TOASTED]
    _both(table, encoded, key, value, lambda t: t.event("u", None, t.row(row), src, {}, {}))
    got = json.loads(encoded.event("u", None, encoded.row(row), src, {}, {})[2] or b"")
    after = got["payload"]["after"] if "payload" in got else got["after"]
    b64 = base64.b64encode(binary).decode()
    assert after == {"id": 1, "body": text, "doc": text, "blob": b64, "blob_n": b64, "words": [text],
                     "words_n": [text], "ints": ints, "ints_n": ints, "smalls": ints, "longs": ints, "days": ints,
                     "blobs": [b64], "uids": [uuid], "docs": [text], "times": [text], "floats": None}


def test_a_bad_hex_placeholder_fails_validation_naming_the_key() -> None:
    from pydantic import ValidationError

    from headwater.connectors.postgres.config import PostgresSourceConfig

    base = {"name": "pg", "connector.class": "PostgresConnector", "database.hostname": "h", "database.user": "u",
            "database.dbname": "d", "topic.prefix": "p"}
    assert PostgresSourceConfig.model_validate(base).unavailable_value_placeholder == UNAVAILABLE
    for bad in ("hex:zz", "hex:abc", "hex:"):
        with pytest.raises(ValidationError, match="unavailable.value.placeholder"):
            PostgresSourceConfig.model_validate({**base, "unavailable.value.placeholder": bad})


def _tuple_data(values: list[Any]) -> bytes:
    """A pgoutput TupleData of text values (None: 'n', UNCHANGED_TOAST: 'u'), as the server sends it."""
    import struct

    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v is UNCHANGED_TOAST:
            out += b"u"
        else:
            text = v.encode()
            out += b"t" + struct.pack(">i", len(text)) + text
    return out


STRINGS = ["plain", "", 'q"uote', "back\\slash", "tab\there", "\x01ctl", "caf\u00e9", "\U0001f600", "\x7f"]


@pytest.mark.parametrize("settings", CONVERTER_SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("decimal_mode", ["precise", "string"])
def test_streamed_changes_from_pgoutput_bytes_write_what_event_writes(settings: dict[str, str], decimal_mode: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming fast path (``raw_row`` + ``streamed``, from the message's bytes) against ``row`` +
    ``event`` (from decoded text), byte for byte: every mapped type, NULLs, unchanged TOAST values, strings
    that need escaping, a tuple shorter than the table, inserts and updates, two transactions."""
    from headwater.connectors.postgres.encoded import StreamedTx
    from headwater.connectors.postgres.pgoutput import Begin

    monkeypatch.setattr(time, "time_ns", lambda: 1_732_000_000_123_456_789)
    key, value = _converters(settings)
    table = _table(COLUMNS, decimal_mode=decimal_mode)
    encoded = EncodedTable(table, Encoders(key, value))
    rows = _rows(COLUMNS)
    names = [c[0] for c in COLUMNS]
    for text in STRINGS:  # every string column: text that is its own JSON once quoted, and text that is not
        rows.append([text if n in ("name", "code", "doc", "uid", "mood") else r for n, r in zip(names, rows[0],
                                                                                               strict=True)])
    rows.append(rows[0][:5])  # a row from before columns were added: the rest are null
    compared = 0
    for begin in (Begin(8000, 1_700_000_000_000_002, 77), Begin(9000, 1_700_000_000_100_003, 78)):
        tx = StreamedTx(begin)
        for lsn, row in enumerate(rows, start=begin.final_lsn - 500):
            data = b"junk" + _tuple_data(row)
            after, key_json, end = encoded.raw_row(data, 4)
            assert end == len(data)
            assert encoded.streamed_row(data, 4) == (after, key_json, end)  # unrolled for the table
            src = ChangeSource(begin.commit_ts_us, "false", begin.xid, lsn, begin.final_lsn,
                               f'["{begin.final_lsn}","{lsn}"]')
            for op in ("c", "u"):
                got = encoded.streamed(op, None, after, key_json, lsn, tx)
                want = encoded.event(op, None, encoded.row(row), src, {}, {})
                assert got == want, (op, row)
                _both(table, encoded, key, value, lambda t, op=op, row=row, src=src: t.event(op, None, t.row(row),
                                                                                             src, {}, {}))
                compared += 1
    assert compared == 2 * 2 * len(rows)


def test_a_streamed_row_that_does_not_convert_names_the_column_as_row_does() -> None:
    key, value = _converters({"schemas.enable": "false"})
    table = _table([("id", 20, -1, None, True, True, []), ("day", 1082, -1, None, False, False, []),
                    ("i", 23, -1, None, True, False, [])])
    encoded = EncodedTable(table, Encoders(key, value))
    for row in (["1", "10000-01-01", "3"], ["1", None, UNCHANGED_TOAST]):
        with pytest.raises(DataException) as slow:
            encoded.row(row)
        for fast_path in (encoded.raw_row, encoded.streamed_row):
            with pytest.raises(DataException) as fast:
                fast_path(_tuple_data(row), 0)
            assert str(fast.value) == str(slow.value)
