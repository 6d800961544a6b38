"""The batch path (SourceTask.poll_batch / SinkTask.put_batch, Converter.*_values) must mean exactly what the
record path means: bulk conversion equals per-record conversion, the file source's ``poll_batch`` yields the
lines and offsets ``poll`` yields, the file sink's ``put_batch`` writes the bytes ``put`` writes, and the
worker picks the batch path only when allowed and falls back to the record path when a batch cannot be used.
No broker: the worker tasks get fake producers and hand-made consumer records.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from support.connectproc import NEVER_MATCHING_FILTER
from support.taskcontexts import FakeSourceContext

from headwater.connect.api import (
    SinkBatch,
    SinkRecord,
    SourceBatch,
    SourceRecord,
    Struct,
    TopicPartition,
)
from headwater.connect.api.converters import Converter, SchemaAndValue
from headwater.connect.api.data import (
    INT32_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    SchemaType,
)
from headwater.connect.api.errors import DataException
from headwater.connect.api.logical import TIMESTAMP_SCHEMA, decimal_schema
from headwater.connect.converters import ByteArrayConverter, JsonConverter, StringConverter
from headwater.connect.plugins import PluginRegistry
from headwater.connect.runtime.errors import ErrorHandler
from headwater.connect.runtime.sink_paths import BatchDelivery, EncodedDelivery, RecordDelivery, choose_delivery_path
from headwater.connect.runtime.sink_task import WorkerSinkTask
from headwater.connect.runtime.source_paths import BatchPath, RecordPath, choose_send_path
from headwater.connect.runtime.source_task import WorkerSourceTask
from headwater.connect.runtime.transform_chain import TransformationChain, build_chain
from headwater.connect.runtime.worker_task import TaskPipeline
from headwater.connect.status import TargetState, TaskId
from headwater.connect.storage.offsets import offset_key
from headwater.connectors.file import source as file_source
from headwater.connectors.file.sink import FileStreamSinkTask
from headwater.connectors.file.source import FileStreamSourceTask

TOPIC = "t"


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(fn(), 30))


# -- converters: bulk == per record ---------------------------------------------------------------------------


def string_converter(**configs: str) -> StringConverter:
    conv = StringConverter()
    conv.configure(configs, False)
    return conv


def json_converter(schemas: bool) -> JsonConverter:
    conv = JsonConverter()
    conv.configure({"schemas.enable": str(schemas).lower()}, False)
    return conv


def assert_from_values_like_records(conv: Converter, schema: Any, values: list[Any]) -> list[bytes | None]:
    bulk = conv.from_connect_values(TOPIC, schema, values)
    single = [conv.from_connect_data(TOPIC, schema, v) for v in values]
    assert bulk == single
    assert len(bulk) == len(values)
    return bulk


def assert_to_values_like_records(conv: Converter, datas: list[bytes | None]) -> SchemaAndValue:
    bulk = conv.to_connect_values(TOPIC, list(datas))
    single = [conv.to_connect_data(TOPIC, d) for d in datas]
    assert bulk is not None, "values of one schema must convert as a list"
    assert all(sv.schema == bulk.schema for sv in single)
    assert bulk.value == [sv.value for sv in single]
    assert [type(v) for v in bulk.value] == [type(sv.value) for sv in single]
    return bulk


TEXTS = ["plain", "", "unicodé ✓ 漢字 🚀", "tab\tand\x00nul", "x" * 1000, "lone surrogate \ud800 here"]


@pytest.mark.parametrize("encoding", [None, "utf-8", "UTF-16", "ISO-8859-1", "US-ASCII"])
def test_string_converter_bulk_equals_per_record(encoding: str | None) -> None:
    conv = string_converter(**({"converter.encoding": encoding} if encoding else {}))
    # all strings: the fast path
    datas = assert_from_values_like_records(conv, STRING_SCHEMA, TEXTS)
    assert datas[0] == "plain".encode(conv.encoding)
    assert all(isinstance(d, bytes) for d in datas)
    # strings with nulls and non-strings: the per-record fallback, in the same order
    mixed = ["a", None, 42, -7, 1.5, True, False, "ü", b"raw bytes", None, [1, "x"], {"k": 2}]
    datas = assert_from_values_like_records(conv, None, mixed)
    assert datas[1] is None and datas[9] is None
    assert datas[2] == "42".encode(conv.encoding)
    assert datas[4] == "1.5".encode(conv.encoding)
    assert datas[5] == "true".encode(conv.encoding)
    # only ints
    assert assert_from_values_like_records(conv, INT32_SCHEMA, [1, 2, 3]) == [s.encode(conv.encoding)
                                                                              for s in ("1", "2", "3")]
    # all nulls, and no values at all
    assert assert_from_values_like_records(conv, None, [None, None, None]) == [None, None, None]
    assert conv.from_connect_values(TOPIC, None, []) == []

    # back: bytes in this encoding, with nulls, and bytes that do not decode
    encoded = [t.encode(conv.encoding, "replace") for t in TEXTS]
    back = assert_to_values_like_records(conv, [*encoded, None, b"\xff\xfe\xfd invalid", None])
    assert back.schema == OPTIONAL_STRING_SCHEMA
    assert back.value[-1] is None and back.value[-3] is None
    assert back.value[0] == "plain"
    nulls = assert_to_values_like_records(conv, [None, None])
    assert nulls.schema == OPTIONAL_STRING_SCHEMA and nulls.value == [None, None]
    # the round trip of what the per-record path writes
    assert conv.to_connect_values(TOPIC, conv.from_connect_values(TOPIC, None, mixed)).value == [
        conv.to_connect_data(TOPIC, conv.from_connect_data(TOPIC, None, v)).value for v in mixed]


def test_string_converter_nondefault_encoding_really_used() -> None:
    """Guards the test above: a configured encoding changes the bytes (both paths)."""
    utf16, latin1 = string_converter(**{"converter.encoding": "UTF-16"}), string_converter(
        **{"converter.encoding": "ISO-8859-1"})
    assert utf16.from_connect_values(TOPIC, None, ["é"]) == ["é".encode("utf-16")] != [b"\xc3\xa9"]
    assert latin1.from_connect_values(TOPIC, None, ["é", None, 5]) == [b"\xe9", None, b"5"]
    assert latin1.to_connect_values(TOPIC, [b"\xe9", None]) == SchemaAndValue(OPTIONAL_STRING_SCHEMA, ["é", None])
    assert utf16.to_connect_values(TOPIC, ["é".encode("utf-16")]).value == ["é"]


def test_bytearray_converter_bulk_equals_per_record() -> None:
    conv = ByteArrayConverter()
    conv.configure({}, False)
    values: list[Any] = [b"abc", None, bytearray(b"\x00\xff"), memoryview(b"mv"), b""]
    datas = assert_from_values_like_records(conv, None, values)
    assert datas == [b"abc", None, b"\x00\xff", b"mv", b""]
    assert all(d is None or type(d) is bytes for d in datas)
    back = assert_to_values_like_records(conv, datas)
    assert back.schema == OPTIONAL_BYTES_SCHEMA
    assert back.value == datas
    assert assert_to_values_like_records(conv, [None, None]).value == [None, None]
    # a value it cannot take fails the bulk call just as the record call (the worker then falls back)
    with pytest.raises(DataException):
        conv.from_connect_values(TOPIC, None, [b"ok", "a str"])
    with pytest.raises(DataException):
        conv.from_connect_data(TOPIC, None, "a str")
    with pytest.raises(DataException):
        conv.from_connect_values(TOPIC, STRING_SCHEMA, [b"x"])


@pytest.mark.parametrize("schemas", [False, True], ids=["schemaless", "schemas"])
def test_json_converter_bulk_equals_per_record(schemas: bool) -> None:
    conv = json_converter(schemas)
    struct_schema = SchemaBuilder.struct().name("rec").field("id", INT32_SCHEMA).field(
        "name", OPTIONAL_STRING_SCHEMA).build()
    structs = [Struct(struct_schema).put("id", i).put("name", None if i == 1 else f"n-{i}") for i in range(3)]
    struct_datas = assert_from_values_like_records(conv, struct_schema, structs)
    assert all(d is not None for d in struct_datas)
    back = assert_to_values_like_records(conv, struct_datas)
    if schemas:
        assert back.schema == struct_schema and back.value == structs
    else:
        assert back.value == [{"id": i, "name": None if i == 1 else f"n-{i}"} for i in range(3)]

    plain: list[Any] = [{"a": 1, "b": [1, 2.5, None]}, "text", 7, None, True, [], {"ü": "✓"}]
    datas = assert_from_values_like_records(conv, None, plain)
    assert datas[3] is None
    back = assert_to_values_like_records(conv, datas)
    assert back.schema is None
    assert back.value == plain
    assert assert_to_values_like_records(conv, [None, None]).value == [None, None]

    strings = assert_from_values_like_records(conv, STRING_SCHEMA, ["x", "ÿ"])
    assert assert_to_values_like_records(conv, strings).value == ["x", "ÿ"]


def envelope(schema_json: str, payload: str, tail: str = "}") -> bytes:
    return ('{"schema":' + schema_json + ',"payload":' + payload + tail).encode()


def test_json_converter_bulk_paths_equal_per_record_on_odd_values() -> None:
    """The bulk paths' shortcuts (the schema's envelope prefix matched as bytes, a string payload parsed
    alone, final-typed payloads past their reader) give what value-by-value conversion gives, and leave
    every unusual record to it."""
    conv = json_converter(True)
    texts = ["plain", "", "quote \" back\\ slash", "ctl \x00\n\t", "unicodé ✓ 漢字 🚀", "x" * 5000]
    for schema in (STRING_SCHEMA, OPTIONAL_STRING_SCHEMA, Schema(SchemaType.STRING, True, default="d"),
                   Schema(SchemaType.STRING, name="named", doc="dòc ✓\nline two")):
        datas = assert_from_values_like_records(conv, schema, texts)
        assert assert_to_values_like_records(conv, datas).value == texts
        mixed = assert_from_values_like_records(conv, schema, ["a", None, "b"]) if schema.optional else None
        if mixed is not None:
            assert assert_to_values_like_records(conv, mixed).value[1] == (None if schema.default is None else "d")
    with pytest.raises(DataException):  # a lone surrogate cannot be UTF-8: the per-record error
        conv.from_connect_values(TOPIC, STRING_SCHEMA, ["ok", "lone \ud800"])
    with pytest.raises(DataException):  # a non-string for a string schema
        conv.from_connect_values(TOPIC, STRING_SCHEMA, ["ok", 5])
    with pytest.raises(DataException):  # a null for a required string
        conv.from_connect_values(TOPIC, STRING_SCHEMA, ["ok", None])

    class Shout(str):
        def __str__(self) -> str:
            return self.upper()
    assert_from_values_like_records(conv, STRING_SCHEMA, ["a", Shout("b")])

    # non-ASCII in the schema text: the payload's offset in characters differs from the one in bytes
    unicode_schema = '{"type":"string","optional":false,"doc":"ü ✓ 漢字"}'
    odd: list[bytes | None] = [envelope(unicode_schema, '"a"'), envelope(unicode_schema, '"b"  ', "\n}"),
           envelope(unicode_schema, '"ü\\u00e9"'), envelope(unicode_schema, '"c"'),
           envelope(unicode_schema.replace(",", ", "), '"spaced schema"')]
    assert assert_to_values_like_records(conv, odd).value == ["a", "b", "üé", "c", "spaced schema"]
    not_bytes: list[Any] = [odd[0], bytearray(odd[3] or b"")]  # a bytes-like record goes the per-record way
    assert assert_to_values_like_records(conv, not_bytes).value == ["a", "c"]
    with pytest.raises(DataException):  # text after the envelope
        conv.to_connect_values(TOPIC, [odd[0], envelope(unicode_schema, '"a"', "}x")])
    with pytest.raises(DataException):  # invalid UTF-8 inside the payload
        conv.to_connect_values(TOPIC, [odd[0], envelope(unicode_schema, '"a') + b'\xff"}'])
    with pytest.raises(DataException):  # a number where the schema says string
        conv.to_connect_values(TOPIC, [odd[0], envelope(unicode_schema, "5")])
    with pytest.raises(DataException):  # an unterminated string
        conv.to_connect_values(TOPIC, [odd[0], envelope(unicode_schema, '"abc')])

    # payloads that are final as parsed, and ones that need their reader (logical types, ints from floats)
    struct_schema = SchemaBuilder.struct().field("n", INT32_SCHEMA).field("s", OPTIONAL_STRING_SCHEMA).build()
    for schema, values in ((INT32_SCHEMA, [1, -5, 2**31 - 1]), (Schema(SchemaType.FLOAT64), [1.5, 2.0]),
                           (Schema(SchemaType.BOOLEAN), [True, False]),
                           (TIMESTAMP_SCHEMA, [datetime(2026, 1, 2, tzinfo=UTC), datetime(1970, 1, 1, tzinfo=UTC)]),
                           (decimal_schema(2), [Decimal("1.25"), Decimal("-3.00")]),
                           (struct_schema, [Struct(struct_schema).put("n", 1).put("s", "x")])):
        datas = assert_from_values_like_records(conv, schema, values)
        assert assert_to_values_like_records(conv, datas).value == values
    int_schema = '{"type":"int32","optional":false}'
    ints: list[bytes | None] = [envelope(int_schema, "1"), envelope(int_schema, "2.9"), envelope(int_schema, "true")]
    assert assert_to_values_like_records(conv, ints[:2]).value == [1, 2]
    with pytest.raises(DataException):
        conv.to_connect_values(TOPIC, ints)


def test_json_converter_bulk_read_parses_the_schema_once_and_follows_a_change_of_schema() -> None:
    conv = json_converter(True)
    calls: list[bytes | None] = []
    per_record = conv.to_connect_data

    def counting(topic: str, data: bytes | None) -> SchemaAndValue:
        calls.append(data)
        return per_record(topic, data)
    conv.to_connect_data = counting  # type: ignore[method-assign]
    a = conv.from_connect_values(TOPIC, STRING_SCHEMA, [f"a{i}" for i in range(100)])
    assert conv.to_connect_values(TOPIC, a) == SchemaAndValue(STRING_SCHEMA, [f"a{i}" for i in range(100)])
    assert calls == [a[0]], "only the first record of one schema goes the per-record way"
    # another schema next: its own envelope prefix, not the one of the batch before
    int_schema = Schema(SchemaType.INT64, True)
    b = conv.from_connect_values(TOPIC, int_schema, list(range(50)))
    assert conv.to_connect_values(TOPIC, b) == SchemaAndValue(int_schema, list(range(50)))
    assert calls == [a[0], b[0]]
    calls.clear()
    assert conv.to_connect_values(TOPIC, a[:3]) == SchemaAndValue(STRING_SCHEMA, ["a0", "a1", "a2"])
    assert calls == [a[0]]
    # records of two schemas in one list: no shared schema
    assert conv.to_connect_values(TOPIC, [b[0], a[0]]) is None
    assert conv.to_connect_values(TOPIC, [a[0], b[0]]) is None


def test_converter_default_to_values_is_none_when_schemas_differ() -> None:
    conv = json_converter(True)
    a = b'{"schema":{"type":"string","optional":false},"payload":"a"}'
    b = b'{"schema":{"type":"int32","optional":false},"payload":5}'
    same = conv.to_connect_values(TOPIC, [a, a])
    assert same == SchemaAndValue(conv.to_connect_data(TOPIC, a).schema, ["a", "a"])
    assert conv.to_connect_values(TOPIC, [a, b]) is None
    assert conv.to_connect_values(TOPIC, [b, a, a]) is None
    # a null envelope has no schema: also different from a string envelope
    assert conv.to_connect_values(TOPIC, [a, None]) is None
    # schemaless JSON never differs in schema (always None)
    loose = json_converter(False)
    assert loose.to_connect_values(TOPIC, [b'"a"', b"5", None]) == SchemaAndValue(None, ["a", 5, None])
    # a value that does not parse raises from the bulk call too (the worker then uses the record path)
    with pytest.raises(DataException):
        loose.to_connect_values(TOPIC, [b'"a"', b"not json {", b'"c"'])


# -- FileStreamSourceTask: poll_batch == poll --------------------------------------------------------------------


@pytest.fixture(autouse=True)
def short_idle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle poll waits 1 s for file events; draining a file needs one idle poll per drain."""
    monkeypatch.setattr(file_source, "IDLE_WAIT", 0.02)


async def start_source(path: Path, batch_size: int) -> FileStreamSourceTask:
    config = {"file": str(path), "topic": TOPIC, "batch.size": str(batch_size)}
    task = FileStreamSourceTask()
    task.initialize(FakeSourceContext(config))
    await task.start(config)
    return task


IDLE_POLLS = 3  # polls in a row that return nothing before a file counts as drained


async def drain_poll(task: FileStreamSourceTask) -> list[list[SourceRecord]]:
    """Poll until ``IDLE_POLLS`` polls in a row return nothing."""
    polls: list[list[SourceRecord]] = []
    idle = 0
    for _ in range(100_000):
        got = await task.poll()
        if not got:
            idle += 1
            if idle == IDLE_POLLS:
                return polls
            continue
        idle = 0
        polls.append(got)
    raise AssertionError("poll never ran dry")


async def drain_poll_batch(task: FileStreamSourceTask) -> list[SourceBatch]:
    batches: list[SourceBatch] = []
    idle = 0
    for _ in range(100_000):
        got = await task.poll_batch()
        if got is None:
            idle += 1
            if idle == IDLE_POLLS:
                return batches
            continue
        assert len(got) > 0, "an empty batch must be None"
        idle = 0
        batches.append(got)
    raise AssertionError("poll_batch never ran dry")


_TERMINATOR = re.compile(rb"\r\n|\r|\n")


def reference_lines(data: bytes) -> list[tuple[str, int]]:
    """Each complete line of ``data`` (\\n, \\r\\n or \\r; a \\r at the very end may still become \\r\\n),
    decoded as UTF-8 with replacement, and the byte position after its terminator."""
    out, start = [], 0
    for m in _TERMINATOR.finditer(data):
        if m.group() == b"\r" and m.end() == len(data):
            break
        out.append((data[start:m.start()].decode("utf-8", "replace"), m.end()))
        start = m.end()
    return out


def check_same(path: Path, polls: list[list[SourceRecord]], batches: list[SourceBatch], batch_size: int,
               expected: list[tuple[str, int]]) -> None:
    records = [r for p in polls for r in p]
    assert [r.value for r in records] == [v for v, _ in expected]
    assert [r.source_offset for r in records] == [{"position": pos} for _, pos in expected]
    assert all(r.source_partition == {"filename": str(path)} for r in records)
    assert all(r.topic == TOPIC and r.value_schema == STRING_SCHEMA and r.key is None for r in records)
    assert all(0 < len(p) <= batch_size for p in polls)

    assert [v for b in batches for v in b.values] == [r.value for r in records]
    assert all(0 < len(b) <= batch_size for b in batches)
    taken = 0
    for b in batches:
        taken += len(b)
        # the batch's offset is the offset of the last record poll() gave for the same lines
        assert b.source_offset == records[taken - 1].source_offset
        assert b.source_partition == {"filename": str(path)}
        assert b.topic == TOPIC and b.value_schema == STRING_SCHEMA and b.kafka_partition is None
        as_records = b.records()
        assert [r.value for r in as_records] == b.values
        assert all(r.source_offset == b.source_offset and r.value_schema == STRING_SCHEMA for r in as_records)


async def both_ways(path: Path, batch_size: int) -> tuple[list[list[SourceRecord]], list[SourceBatch]]:
    task = await start_source(path, batch_size)
    try:
        polls = await drain_poll(task)
    finally:
        task.stop()
    task = await start_source(path, batch_size)
    try:
        batches = await drain_poll_batch(task)
    finally:
        task.stop()
    return polls, batches


def numbered(n: int, fmt: Callable[[int], bytes]) -> bytes:
    return b"".join(fmt(i) for i in range(n))


def crlf_line(i: int) -> bytes:
    return [b"crlf %d\r\n" % i, b"cr %d\r" % i, b"lf %d\n" % i, b"\r\n", b"\r"][i % 5]


MIXED = b"a\r\nb\rc\n\xc3\xa9\n\xff\n\r\n\n\rz\x0bstill z\x0c\x1c\x85same line\n"

SOURCE_FILES: dict[str, bytes] = {
    "ascii": numbered(53, lambda i: b"line %d %s\n" % (i, b"#" * (i % 7))) + b"\n\nafter empty lines\n",
    "crlf-and-cr": numbered(40, crlf_line) + b"last\n",
    "utf8": numbered(37, lambda i: "unicodé ✓ 漢字 🚀 %d\n".encode() % (i,) if i % 3 else b"ascii %d\n" % (i,)),
    "invalid-utf8": numbered(31, lambda i: b"bad \xff\xfe \xc3( %d\n" % (i,) if i % 4 == 0 else
                             b"ok \xc3\xa9 %d\r\n" % (i,) if i % 4 == 1 else b"plain %d\n" % (i,))
    + b"truncated \xe2\x9c\n",
    "mixed": MIXED * 3,
}


@pytest.mark.parametrize("name", list(SOURCE_FILES))
@pytest.mark.parametrize("batch_size", [1, 3, 10])
def test_file_source_poll_batch_equals_poll(tmp_path: Path, name: str, batch_size: int) -> None:
    data = SOURCE_FILES[name]
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    expected = reference_lines(data)
    assert len(expected) > batch_size
    assert expected[-1][1] == len(data)  # every line is terminated here

    polls, batches = run(lambda: both_ways(path, batch_size))
    assert len(polls) > 1 and len(batches) > 1
    check_same(path, polls, batches, batch_size, expected)
    assert batches[-1].source_offset == {"position": len(data)}


def test_file_source_reference_is_not_trivial() -> None:
    """The reference splitter agrees with hand-written expectations for the tricky file."""
    assert reference_lines(MIXED) == [
        ("a", 3), ("b", 5), ("c", 7), ("é", 10), ("\ufffd", 12), ("", 14), ("", 15),
        ("", 16), ("z\x0bstill z\x0c\x1c\ufffdsame line", 38)]


def test_file_source_lines_across_read_chunks(tmp_path: Path) -> None:
    """More than one READ_CHUNK: a \\r\\n and a multi-byte character straddle chunk boundaries."""
    chunk = file_source.READ_CHUNK
    head = b"x" * (chunk - 1) + b"\r"  # the first chunk ends between \r and \n
    body = b"\nnext\n" + "é".encode() * 10
    fill = b"y" * (2 * chunk - len(head) - len(body) - 1)
    data = head + body + fill + "é".encode() + b"\r\nend\rreally end\n"  # é straddles the second boundary
    assert data[2 * chunk - 1: 2 * chunk + 1] == "é".encode()
    path = tmp_path / "big.txt"
    path.write_bytes(data)
    expected = reference_lines(data)
    assert [v[:3] for v, _ in expected] == ["xxx", "nex", "éé" + "é", "end", "rea"]
    polls, batches = run(lambda: both_ways(path, 2))
    check_same(path, polls, batches, 2, expected)


@pytest.mark.parametrize("use_batches", [False, True], ids=["poll", "poll_batch"])
def test_file_source_reads_a_long_line_in_one_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   use_batches: bool) -> None:
    """A line longer than several read chunks comes out of the first poll, without idle waits between chunks."""
    monkeypatch.setattr(file_source, "IDLE_WAIT", 10.0)
    long_line = b"z" * (3 * file_source.READ_CHUNK + 5)
    path = tmp_path / "long.txt"
    path.write_bytes(long_line + b"\nshort\n")

    async def first_poll() -> tuple[list[str], float]:
        task = await start_source(path, 10)
        try:
            started = time.monotonic()
            if use_batches:
                got = await task.poll_batch()
                values = got.values if got else []
            else:
                values = [r.value for r in await task.poll() or []]
            return values, time.monotonic() - started
        finally:
            task.stop()

    values, took = run(first_poll)
    assert values == [long_line.decode(), "short"]
    assert took < 5.0, f"first poll took {took:.2f}s: it waited between chunks"


@pytest.mark.parametrize("use_batches", [False, True], ids=["poll", "poll_batch"])
def test_file_source_waits_for_the_end_of_the_last_line(tmp_path: Path, use_batches: bool) -> None:
    path = tmp_path / "tail.txt"
    path.write_bytes(b"one\ntwo\r\nthree\rpartial \xc3")

    async def scenario() -> list[tuple[list[str], int]]:
        task = await start_source(path, 2)
        got: list[tuple[list[str], int]] = []

        async def drain() -> None:
            if use_batches:
                got.extend((b.values, b.source_offset["position"]) for b in await drain_poll_batch(task))
            else:
                got.extend(([r.value for r in p], p[-1].source_offset["position"]) for p in await drain_poll(task))

        try:
            await drain()
            assert [v for vs, _ in got for v in vs] == ["one", "two", "three"]
            with path.open("ab") as f:
                f.write(b"\xa9 line\r")  # completes é; a final \r may still be the start of \r\n
            await drain()
            assert [v for vs, _ in got for v in vs] == ["one", "two", "three"]
            with path.open("ab") as f:
                f.write(b"\nlast")
            await drain()
            assert [v for vs, _ in got for v in vs] == ["one", "two", "three", "partial é line"]
            with path.open("ab") as f:
                f.write(b"\n")
            await drain()
        finally:
            task.stop()
        return got

    got = run(scenario)
    assert [v for vs, _ in got for v in vs] == ["one", "two", "three", "partial é line", "last"]
    data = path.read_bytes()
    expected = reference_lines(data)
    assert got[-1][1] == len(data) == expected[-1][1]
    # each drain's last position is the position after the last line it gave
    flat = [v for vs, _ in got for v in vs]
    position_after = dict(zip(range(len(expected)), (pos for _, pos in expected), strict=True))
    taken = 0
    for values, pos in got:
        taken += len(values)
        assert pos == position_after[taken - 1]
    assert flat == [v for v, _ in expected]


# -- FileStreamSinkTask: put_batch == put ------------------------------------------------------------------------


SINK_VALUES: list[list[Any]] = [
    ["a", "", "unicodé ✓ 🚀", "\ufffd"],
    ["x", None, "y", None],
    [None, None],
    [1, "two", 3.0, True, None, -4],
    [b"bytes", {"k": 1}, [1, None], False],
    [],
    ["last"],
]


def sink_records(values: list[Any], first_offset: int) -> list[SinkRecord]:
    return [SinkRecord(TOPIC, v, None, 0, None, None, 0, [], first_offset + i) for i, v in enumerate(values)]


def sink_batch(values: list[Any], first_offset: int) -> SinkBatch:
    raw = [SimpleNamespace(offset=first_offset + i, timestamp=0) for i in range(len(values))]
    return SinkBatch(TOPIC, 0, None, [None] * len(values), None, list(values), raw)


def test_file_sink_put_batch_writes_what_put_writes(tmp_path: Path) -> None:
    by_put, by_batch = tmp_path / "put.txt", tmp_path / "batch.txt"
    put_task, batch_task = FileStreamSinkTask(), FileStreamSinkTask()
    put_task.start({"file": str(by_put)})
    batch_task.start({"file": str(by_batch)})
    offset = 0
    try:
        for values in SINK_VALUES:
            put_task.put(sink_records(values, offset))
            batch_task.put_batch(sink_batch(values, offset))
            offset += len(values)
            # written at once, not only at flush/stop
            assert by_put.read_bytes() == by_batch.read_bytes()
    finally:
        put_task.stop()
        batch_task.stop()
    written = by_batch.read_bytes()
    assert written == by_put.read_bytes()
    assert written.decode("utf-8").split("\n") == [
        "a", "", "unicodé ✓ 🚀", "\ufffd",
        "x", "null", "y", "null",
        "null", "null",
        "1", "two", "3.0", "true", "null", "-4",
        "bytes", "{k=1}", "[1, null]", "false",
        "last", ""]


# -- the worker: when the batch path is used, and its fallbacks --------------------------------------------------


def error_config(tolerance: str) -> SimpleNamespace:
    return SimpleNamespace(errors_tolerance=tolerance, errors_retry_timeout=0, errors_retry_delay_max_ms=60000,
                           errors_log_enable=False, errors_log_include_messages=False)




@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry()


@pytest.fixture(scope="module")
def never_chain(registry: PluginRegistry) -> TransformationChain:
    return build_chain(NEVER_MATCHING_FILTER, registry)


def pipeline(task: Any, converters: tuple[Any, Any, Any], chain: Any = None,
             tolerance: str = "all") -> TaskPipeline:
    return TaskPipeline(task, {}, converters, chain if chain is not None else TransformationChain([]),
                        ErrorHandler("conn", 0, error_config(tolerance)), "127.0.0.1:1", {}, 60000, set())


def source_worker(task: Any, value_converter: Any = None, chain: Any = None) -> WorkerSourceTask:
    converters = (string_converter(), value_converter or string_converter(), string_converter())
    return WorkerSourceTask(TaskId("conn", 0), pipeline(task, converters, chain), offset_store=None,  # type: ignore[arg-type]
                            flush_timeout_ms=1000, target_state=TargetState.STARTED, on_status=lambda *a: None)


def sink_worker(task: Any, value_converter: Any = None, chain: Any = None, key_converter: Any = None,
                tolerance: str = "all") -> WorkerSinkTask:
    converters = (key_converter or string_converter(), value_converter or string_converter(), string_converter())
    return WorkerSinkTask(TaskId("conn", 0), pipeline(task, converters, chain, tolerance), consumer_overrides={},
                          connector_config=None,  # type: ignore[arg-type]
                          target_state=TargetState.STARTED, on_status=lambda *a: None)


def test_never_matching_filter_changes_nothing(never_chain: TransformationChain) -> None:
    """The transform the integration tests use to force the record path leaves records as they are."""
    assert never_chain
    record = SourceRecord(TOPIC, "unicodé \ufffd", None, None, None, STRING_SCHEMA, None, [], {"filename": "f"},
                          {"position": 3})
    out = never_chain.apply(record)
    assert out is not None
    assert (out.topic, out.value, out.key, out.value_schema, out.headers, out.source_offset) == (
        TOPIC, "unicodé \ufffd", None, STRING_SCHEMA, [], {"position": 3})


class CommitRecordSource(FileStreamSourceTask):
    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        pass


def test_worker_uses_batches_only_when_allowed(registry: PluginRegistry, never_chain: TransformationChain,
                                               tmp_path: Path) -> None:
    empty_chain = build_chain({"connector.class": "FileStreamSourceConnector", "transforms": ""}, registry)

    async def scenario() -> None:
        def path(worker: WorkerSourceTask) -> type:
            return type(choose_send_path(worker))

        def delivery(worker: WorkerSinkTask) -> type:
            return type(choose_delivery_path(worker))

        assert path(source_worker(FileStreamSourceTask())) is BatchPath
        assert path(source_worker(FileStreamSourceTask(), chain=empty_chain)) is BatchPath
        assert delivery(sink_worker(FileStreamSinkTask(), chain=empty_chain)) is BatchDelivery
        assert path(source_worker(FileStreamSourceTask(), chain=never_chain)) is RecordPath
        assert path(source_worker(CommitRecordSource())) is RecordPath
        from headwater.connectors.file.spooldir import SpoolDirSourceTask  # no poll_batch of its own
        assert path(source_worker(SpoolDirSourceTask())) is RecordPath
        assert delivery(sink_worker(FileStreamSinkTask())) is BatchDelivery
        assert delivery(sink_worker(FileStreamSinkTask(), chain=never_chain)) is RecordDelivery
        # a sink writing a file reads String and JSON values' wire form itself
        to_file = FileStreamSinkTask()
        to_file.start({"file": str(tmp_path / "out.txt")})
        assert delivery(sink_worker(to_file)) is EncodedDelivery
        assert delivery(sink_worker(to_file, value_converter=json_converter(True))) is EncodedDelivery
        assert delivery(sink_worker(to_file, value_converter=ByteArrayConverter())) is BatchDelivery
        assert delivery(sink_worker(to_file, chain=never_chain)) is RecordDelivery
        to_file.stop()

    run(scenario)


class FakeProducer:
    """aiokafka's real batch builders (``batch_size`` bytes each), read back record by record when sent."""

    def __init__(self, batch_size: int = 1 << 20) -> None:
        self.batch_size = batch_size
        self.sent: list[tuple[str, int, list[tuple[Any, ...]]]] = []
        self.timestamps: list[int] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_size, 0)

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        records = list(MemoryRecords(bytes(builder._build())).next_batch())
        self.sent.append((topic, partition, [(r.offset, r.key, r.value, list(r.headers)) for r in records]))
        self.timestamps.extend(r.timestamp for r in records)
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(SimpleNamespace(offset=0))
        return fut

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    async def flush(self) -> None:
        pass

    def records(self) -> list[tuple[Any, ...]]:
        """(topic, partition, key, value, headers) of every record sent, in order."""
        return [(t, p, k, v, h) for t, p, batch in self.sent for _, k, v, h in batch]


def fake(worker: WorkerSourceTask) -> FakeProducer:
    """The test double a worker was given, as its own type."""
    assert isinstance(worker.producer, FakeProducer)
    return worker.producer


LINES = ["plain", "", "unicodé ✓", "\ufffd bad", "x" * 300, *(f"line {i}" for i in range(40))]


def source_batch() -> SourceBatch:
    return SourceBatch(TOPIC, list(LINES), STRING_SCHEMA, {"filename": "f"}, {"position": 99})


@pytest.mark.parametrize("batch_size", [1 << 20, 100], ids=["one-builder", "many-builders"])
def test_worker_send_batch_produces_what_send_produces(batch_size: int) -> None:
    async def scenario() -> tuple[Any, Any, int, int]:
        by_batch, by_records = source_worker(FileStreamSourceTask()), source_worker(FileStreamSourceTask())
        by_batch.producer, by_records.producer = FakeProducer(batch_size), FakeProducer(batch_size)
        before = int(time.time() * 1000)
        await BatchPath(by_batch).send(source_batch())
        await RecordPath(by_records).send(source_batch().records())
        return by_batch, by_records, before, int(time.time() * 1000)

    by_batch, by_records, before, after = run(scenario)
    want: list[tuple[Any, ...]] = [(TOPIC, 0, None, line.encode(), []) for line in LINES]
    assert fake(by_records).records() == want
    assert fake(by_batch).records() == want
    for producer in (fake(by_batch), fake(by_records)):
        # every builder numbers its records from 0 (the batch path fills builders itself)
        assert all([o for o, *_ in batch] == list(range(len(batch))) for _, _, batch in producer.sent)
        assert all(before <= ts <= after for ts in producer.timestamps), (before, producer.timestamps, after)
        if batch_size < 1 << 20:
            assert len(producer.sent) > 5
        else:
            assert len(producer.sent) == 1
    # one poll entry, waiting for every builder's future, committing the batch's offset
    for worker in (by_batch, by_records):
        (entry,) = worker.outstanding
        assert len(entry.futures) == len(fake(worker).sent)
        assert entry.offsets == {offset_key("conn", {"filename": "f"}): {"position": 99}}
    assert by_batch.records_sent == by_records.records_sent == len(LINES)


def test_worker_send_batch_with_nulls_and_non_strings() -> None:
    """StringConverter's bulk conversion falls back per record for such values; the bytes are the same."""
    values: list[Any] = ["a", None, 7, "é", True, "lone \ud800 surrogate"]

    async def scenario() -> tuple[Any, Any]:
        by_batch, by_records = source_worker(FileStreamSourceTask()), source_worker(FileStreamSourceTask())
        by_batch.producer, by_records.producer = FakeProducer(), FakeProducer()
        batch = SourceBatch(TOPIC, values, None, {"filename": "f"}, {"position": 5})
        await BatchPath(by_batch).send(batch)
        await RecordPath(by_records).send(batch.records())
        return by_batch, by_records

    by_batch, by_records = run(scenario)
    assert fake(by_batch).records() == fake(by_records).records() == [
        (TOPIC, 0, None, v, []) for v in (b"a", None, b"7", "é".encode(), b"true", b"lone ? surrogate")]


def test_worker_send_batch_falls_back_to_records_when_conversion_fails() -> None:
    """ByteArrayConverter refuses strings: the batch is sent record by record and errors.tolerance applies."""
    sent: list[list[SourceRecord]] = []

    async def scenario() -> WorkerSourceTask:
        worker = source_worker(FileStreamSourceTask(), value_converter=ByteArrayConverter())
        worker.producer = FakeProducer()

        async def send(records: list[SourceRecord]) -> None:
            sent.append(records)

        path = BatchPath(worker)
        path.fallback.send = send  # type: ignore[method-assign, assignment]
        await path.send(source_batch())
        assert fake(worker).sent == []
        # and the real record path skips the bad records under errors.tolerance=all
        real = source_worker(FileStreamSourceTask(), value_converter=ByteArrayConverter())
        real.producer = FakeProducer()
        await BatchPath(real).send(source_batch())
        assert real.errors.skipped == len(LINES)
        assert fake(real).sent == []
        # the skipped records' offset is still committed once the (empty) send is done
        assert [e.offsets for e in real.outstanding] == [{offset_key("conn", {"filename": "f"}): {"position": 99}}]
        return worker

    run(scenario)
    (records,) = sent
    assert [r.value for r in records] == LINES
    assert all(r.source_offset == {"position": 99} and r.source_partition == {"filename": "f"} for r in records)



class RefusingProducer(FakeProducer):
    """send_batch raises ``errors`` in turn before it takes a batch (aiokafka's queue stayed full past
    request.timeout.ms: KafkaTimeoutError, retriable; or a non-retriable error)."""

    def __init__(self, errors: list[Exception]) -> None:
        super().__init__()
        self.errors = errors
        self.calls = 0

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return await super().send_batch(builder, topic, partition=partition)


def refusing(worker: WorkerSourceTask) -> RefusingProducer:
    assert isinstance(worker.producer, RefusingProducer)
    return worker.producer


def test_a_retriable_send_failure_is_retried_not_failing_the_task() -> None:
    """errors.tolerance=none and errors.retry.timeout=0: a send refused with a retriable error is retried
    (retry.backoff.ms apart) until it goes, as Kafka Connect retries a send; one that is not retriable goes
    through errors.tolerance, which fails the task."""
    from aiokafka.errors import KafkaTimeoutError, UnsupportedVersionError

    from headwater.connect.runtime.errors import ToleranceExceeded

    def worker(producer: FakeProducer) -> WorkerSourceTask:
        converters = (string_converter(), string_converter(), string_converter())
        out = WorkerSourceTask(TaskId("conn", 0), pipeline(FileStreamSourceTask(), converters, None, "none"),
                               offset_store=None,  # type: ignore[arg-type]
                               flush_timeout_ms=1000, target_state=TargetState.STARTED, on_status=lambda *a: None)
        out.producer_overrides = {"retry.backoff.ms": "10"}
        out.producer = producer
        return out

    async def scenario() -> None:
        patient = worker(RefusingProducer([KafkaTimeoutError(), KafkaTimeoutError(), KafkaTimeoutError()]))
        await BatchPath(patient).send(source_batch())
        assert refusing(patient).calls == 4 and refusing(patient).records() == [
            (TOPIC, 0, None, line.encode(), []) for line in LINES]
        assert patient.errors.failures == 0
        refused = worker(RefusingProducer([KafkaTimeoutError(), UnsupportedVersionError()]))
        with pytest.raises(ToleranceExceeded):
            await BatchPath(refused).send(source_batch())
        assert refusing(refused).sent == []

    run(scenario)

class RecordingSink(FileStreamSinkTask):
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def put(self, records: list[SinkRecord]) -> None:
        self.calls.append(("put", [(r.kafka_offset, r.value, [(h.key, h.value) for h in r.headers])
                                   for r in records]))

    def put_batch(self, batch: SinkBatch) -> None:
        assert len(batch.keys) == len(batch.values) == len(batch.offsets) == len(batch.timestamps)
        self.calls.append(("put_batch", [(o, v, []) for o, v in zip(batch.offsets, batch.values, strict=True)]))


def message(offset: int, value: bytes | None, key: bytes | None = None, headers: Any = (),
            partition: int = 0) -> SimpleNamespace:
    return SimpleNamespace(topic=TOPIC, partition=partition, offset=offset, timestamp=1000 + offset,
                           timestamp_type=0, key=key, value=value, headers=headers)


def deliver(worker: WorkerSinkTask, fetched: dict[TopicPartition, list[Any]]) -> None:
    async def scenario() -> None:
        await BatchDelivery(worker).deliver(fetched)

    run(scenario)


def test_worker_sink_batches_and_record_path_fallbacks() -> None:
    sink = RecordingSink()
    worker = sink_worker(sink, value_converter=json_converter(False))
    clean = [message(i, json.dumps(f"v-{i}").encode()) for i in range(4)]
    with_bad = [message(10 + i, b"not json {" if i == 2 else json.dumps(f"w-{i}").encode(), partition=1)
                for i in range(5)]
    with_headers = [message(20, b'"h-0"', headers=[("trace", b"t")], partition=2), message(21, b'"h-1"', partition=2)]
    tp0, tp1, tp2 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1), TopicPartition(TOPIC, 2)
    deliver(worker, {tp0: clean, tp1: with_bad, tp2: with_headers})
    assert sink.calls[0] == ("put_batch", [(i, f"v-{i}", []) for i in range(4)])
    # the other partitions go through put: the bad record skipped, the headers kept
    assert sink.calls[1:] == [("put", [(10, "w-0", []), (11, "w-1", []), (13, "w-3", []), (14, "w-4", []),
                                       (20, "h-0", [("trace", "t")]), (21, "h-1", [])])]
    assert worker.errors.skipped == 1
    assert {(tp.partition, o) for tp, o in worker.current.items()} == {(0, 4), (1, 15), (2, 22)}


def test_worker_sink_differing_schemas_use_the_record_path() -> None:
    sink = RecordingSink()
    worker = sink_worker(sink, value_converter=json_converter(True))
    a = b'{"schema":{"type":"string","optional":false},"payload":"a"}'
    b = b'{"schema":{"type":"int32","optional":false},"payload":5}'
    deliver(worker, {TopicPartition(TOPIC, 0): [message(0, a), message(1, b), message(2, a)]})
    assert sink.calls == [("put", [(0, "a", []), (1, 5, []), (2, "a", [])])]
    sink.calls.clear()
    deliver(worker, {TopicPartition(TOPIC, 0): [message(3, a), message(4, a)]})
    assert sink.calls == [("put_batch", [(3, "a", []), (4, "a", [])])]
    assert worker.errors.skipped == 0


def test_worker_sink_bad_record_fails_under_tolerance_none() -> None:
    """The fallback keeps errors.tolerance=none strict: the record path raises at the bad record."""
    from headwater.connect.runtime.errors import ToleranceExceeded

    sink = RecordingSink()
    worker = sink_worker(sink, value_converter=json_converter(False), tolerance="none")
    with pytest.raises(ToleranceExceeded):
        deliver(worker, {TopicPartition(TOPIC, 0): [message(0, b'"a"'), message(1, b"oops {"), message(2, b'"c"')]})
    assert sink.calls == []


def test_worker_sink_commit_that_meets_a_rebalance_is_kept_for_after_it() -> None:
    """As Kafka's WorkerSinkTask: a commit refused because the group is rebalancing is logged, the task
    goes on, and the offsets stay uncommitted, so the next commit sends them again."""
    from aiokafka import TopicPartition as KafkaTP
    from aiokafka.errors import CommitFailedError, RebalanceInProgressError

    from headwater.connect.kafka.sink_consumer import SinkConsumer

    class Consumer:
        def __init__(self) -> None:
            self.refuse = True
            self.commits: list[dict[Any, Any]] = []

        def assignment(self) -> set[KafkaTP]:
            return {KafkaTP(TOPIC, 0)}

        async def commit(self, offsets: dict[Any, Any]) -> None:
            if self.refuse:
                raise CommitFailedError("group rebalanced") from RebalanceInProgressError()
            self.commits.append({tp.partition: o.offset for tp, o in offsets.items()})

    worker = sink_worker(RecordingSink())
    worker.task.flush = lambda offsets: None  # type: ignore[method-assign]
    consumer = Consumer()
    worker.consumer = SinkConsumer(consumer)
    worker.current = {TopicPartition(TOPIC, 0): 5}

    run(worker.commit_offsets)  # raises nothing: the task carries on
    assert worker.committed == {} and consumer.commits == []
    consumer.refuse = False
    worker.current = {TopicPartition(TOPIC, 0): 7}
    run(worker.commit_offsets)
    assert consumer.commits == [{0: 7}] and worker.committed == {TopicPartition(TOPIC, 0): 7}


def test_a_file_source_whose_start_failed_early_stops_cleanly() -> None:
    """The worker stops a task whose start raised: stop() must not trip over what start never set."""
    task = FileStreamSourceTask()
    task.initialize(SimpleNamespace(offset_storage_reader=SimpleNamespace(offset=lambda partition: None)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="zz"):
        run(lambda: task.start({"file": "/nonexistent/in.txt", "topic": "t", "batch.size": "zz"}))
    task.stop()
    assert task.stopped and task.watch is None and task.fd is None
