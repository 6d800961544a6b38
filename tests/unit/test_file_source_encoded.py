"""The file source's encoded lane (``encode_with`` / ``poll_encoded``) against the converters.

Every value the lane writes must be byte for byte what the value converter writes for the line ``poll``
gives (``from_connect_data`` with the string schema), with the same source offsets, for lines that take
the shortcut (ASCII chunks, wrapped by joins and replaces) and lines that do not (escapes, control
characters, unicode, invalid UTF-8, \\r line ends): these go through the converter itself. The worker
takes the lane only when nothing needs record objects, and sends its values as the batch path does.
No broker: a fake producer with aiokafka's real batch builders.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.memory_records import MemoryRecords
from support.connectproc import NEVER_MATCHING_FILTER
from support.taskcontexts import FakeSourceContext

from headwater.connect.api import EncodedValues, SourceBatch, SourceRecord
from headwater.connect.api.data import STRING_SCHEMA
from headwater.connect.converters import ByteArrayConverter, JsonConverter, StringConverter
from headwater.connect.plugins import PluginRegistry
from headwater.connect.runtime.errors import ErrorHandler
from headwater.connect.runtime.source_paths import BatchPath, EncodedPath, RecordPath, choose_send_path
from headwater.connect.runtime.source_task import WorkerSourceTask
from headwater.connect.runtime.transform_chain import TransformationChain, build_chain
from headwater.connect.runtime.worker_task import TaskPipeline
from headwater.connect.status import TargetState, TaskId
from headwater.connect.storage.offsets import offset_key
from headwater.connectors.file import encoded as file_encoded
from headwater.connectors.file import source as file_source
from headwater.connectors.file.encoded import LineWire
from headwater.connectors.file.source import FileStreamSourceTask

TOPIC = "t"


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(asyncio.wait_for(fn(), 30))


def converter(kind: str) -> Any:
    conv: Any = StringConverter() if kind == "string" else JsonConverter()
    conv.configure({"schemas.enable": "true" if kind == "json-schemas" else "false"}, False)
    return conv


KINDS = ["json-schemas", "json-plain", "string"]

# lines a file may hold: plain, quotes, backslashes, control characters, unicode, invalid UTF-8, \r ends
AWKWARD = [b"plain", b"", b'say "hi"', b"back\\slash", b"tab\there", b"nul\x00byte", b"unit\x1fsep", b"del\x7f",
           b'{"schema":{"type":"string","optional":false},"payload":"x"}', b'"}', "unicodé ✓ 漢字 🚀".encode(),
           "line\u2028sep".encode(), b"bad \xff\xfe \xc3(", b"truncated \xe2\x9c", b" trailing space "]


def awkward_file(n: int) -> bytes:
    """Runs of plain ASCII lines (the shortcut) between single awkward lines, with \\n, \\r\\n and \\r ends."""
    rng = random.Random(7)
    out = []
    for i in range(n):
        if i % 37 == 0:
            line, end = AWKWARD[(i // 37) % len(AWKWARD)], rng.choice([b"\n", b"\r\n", b"\r"])
        else:
            line, end = b"line %d %s" % (i, b"x" * rng.randrange(60)), b"\n"
        out.append(line + end)
    return b"".join(out) + b"last\n"


@pytest.fixture(autouse=True)
def short_idle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_source, "IDLE_WAIT", 0.02)


async def start_source(path: Path | str, batch_size: int) -> FileStreamSourceTask:
    config = {"file": str(path), "topic": TOPIC, "batch.size": str(batch_size)}
    task = FileStreamSourceTask()
    task.initialize(FakeSourceContext(config))
    await task.start(config)
    return task


async def drain(poll: Callable[[], Awaitable[Any]]) -> list[Any]:
    """Poll until three polls in a row return nothing."""
    got: list[Any] = []
    idle = 0
    for _ in range(100_000):
        polled = await poll()
        if not polled:
            idle += 1
            if idle == 3:
                return got
            continue
        idle = 0
        got.append(polled)
    raise AssertionError("the source never ran dry")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("read_chunk", "piece"), [(1 << 20, 1 << 15), (300, 40)], ids=["big-reads", "small-reads"])
def test_poll_encoded_writes_the_converters_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str,
                                                  read_chunk: int, piece: int) -> None:
    monkeypatch.setattr(file_source, "READ_CHUNK", read_chunk)
    monkeypatch.setattr(file_encoded, "PIECE", piece)
    path = tmp_path / "in.txt"
    path.write_bytes(awkward_file(3000))
    conv, key_conv = converter(kind), converter(kind)
    wrapped: list[int] = []  # lines each chunk that took the shortcut held
    values = LineWire.values

    def counted(self: LineWire, data: bytes, end: int | None = None) -> list[bytes] | None:
        out = values(self, data, end)
        if out is not None:
            wrapped.append(len(out))
        return out

    monkeypatch.setattr(LineWire, "values", counted)

    async def scenario() -> tuple[list[SourceRecord], list[EncodedValues], FileStreamSourceTask]:
        task = await start_source(path, 64)
        try:
            records = [r for polled in await drain(task.poll) for r in polled]
        finally:
            task.stop()
        task = await start_source(path, 64)
        try:
            assert task.encode_with(key_conv, conv)
            batches = await drain(task.poll_encoded)
        finally:
            task.stop()
        return records, batches, task

    records, batches, task = run(scenario)
    assert len(records) == 3001 and len(batches) > 40
    want = [conv.from_connect_data(TOPIC, STRING_SCHEMA, r.value) for r in records]
    assert [v for b in batches for v in b.values] == want
    # both kinds of chunk were read: some lines took the shortcut, some the converter
    assert any(b'\\"' in v or b"\\u0000" in v for v in want) == kind.startswith("json")
    taken = 0
    for b in batches:
        assert 0 < len(b) <= 64
        taken += len(b)
        assert b.source_offset == records[taken - 1].source_offset  # the position after its last line
        assert (b.topic, b.key, b.kafka_partition, b.source_partition) == (TOPIC, None, None, {"filename": str(path)})
    assert batches[-1].source_offset == {"position": path.stat().st_size}
    if read_chunk < 1000:  # chunks of a few lines: most are plain ASCII
        assert 1000 < sum(wrapped) < len(records)
    assert task.key == key_conv.from_connect_data(TOPIC, None, None)


@pytest.mark.parametrize("kind", ["json-schemas", "json-plain"])
def test_line_wire_values_wraps_plain_lines_and_refuses_escapes(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    conv = converter(kind)
    wire = LineWire.of(conv)
    assert wire is not None
    rng = random.Random(3)
    lines = ["".join(rng.choice("ab c{}:,'/") for _ in range(rng.randrange(30))) for _ in range(500)]
    complete = "".join(line + "\n" for line in lines).encode()
    for piece in (1, 7, 1 << 15):
        monkeypatch.setattr(file_encoded, "PIECE", piece)
        assert wire.values(complete) == [conv.from_connect_data(TOPIC, STRING_SCHEMA, line) for line in lines]
        for bad in (b'"', b"\\", b"\t", b"\x00", b"\x1f"):
            assert wire.values(complete[:500] + bad + complete[500:]) is None, bad
    assert wire.values(b"\n") == [conv.from_connect_data(TOPIC, STRING_SCHEMA, "")]
    # read in place: a partial line after the last newline (escapes and all) is not read
    for piece in (1, 7, 1 << 15):
        monkeypatch.setattr(file_encoded, "PIECE", piece)
        for partial in (b"", b"x", b'"\\\t', b"partial line"):
            assert wire.values(complete + partial, len(complete) - 1) == wire.values(complete), (piece, partial)


# -- the worker: when it takes the lane, and what it sends ---------------------------------------------------


def pipeline(task: Any, value_converter: Any, chain: Any, tolerance: str) -> TaskPipeline:
    errors = SimpleNamespace(errors_tolerance=tolerance, errors_retry_timeout=0, errors_retry_delay_max_ms=60000,
                             errors_log_enable=False, errors_log_include_messages=False)
    converters = (converter("string"), value_converter, converter("string"))
    return TaskPipeline(task, {}, converters, chain if chain is not None else TransformationChain([]),
                        ErrorHandler("conn", 0, errors), "127.0.0.1:1", {}, 60000, set())


def source_worker(task: Any, value_converter: Any, chain: Any = None, tolerance: str = "none") -> WorkerSourceTask:
    return WorkerSourceTask(TaskId("conn", 0), pipeline(task, value_converter, chain, tolerance),
                            offset_store=None,  # type: ignore[arg-type]
                            flush_timeout_ms=1000, target_state=TargetState.STARTED, on_status=lambda *a: None)


def test_worker_takes_the_lane_only_when_nothing_needs_records(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\n")
    registry = PluginRegistry()
    never = build_chain(NEVER_MATCHING_FILTER, registry)

    async def scenario() -> None:
        async def path_of(value_converter: Any, chain: Any = None, tolerance: str = "none",
                          file: Path | str = path) -> type:
            task = await start_source(file, 10)
            try:
                return type(choose_send_path(source_worker(task, value_converter, chain, tolerance)))
            finally:
                task.stop()

        for kind in KINDS:
            assert await path_of(converter(kind)) is EncodedPath, kind
            # a transform needs record objects; errors.tolerance=all skips records one by one
            assert await path_of(converter(kind), chain=never) is RecordPath, kind
            assert await path_of(converter(kind), tolerance="all") is BatchPath, kind
        assert await path_of(ByteArrayConverter()) is BatchPath  # a converter the lane does not know
        latin = StringConverter()
        latin.configure({"converter.encoding": "latin-1"}, False)
        assert await path_of(latin) is BatchPath

    run(scenario)


class FakeProducer:
    """aiokafka's real batch builders (``batch_size`` bytes each), read back record by record when sent."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.sent: list[tuple[str, int, list[tuple[Any, ...]]]] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_size, 0)

    async def send_batch(self, builder: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        records = list(MemoryRecords(bytes(builder._build())).next_batch())
        self.sent.append((topic, partition, [(r.offset, r.key, r.value, list(r.headers)) for r in records]))
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(SimpleNamespace(offset=0))
        return fut

    async def partitions_for(self, topic: str) -> set[int]:
        return {0}

    def records(self) -> list[tuple[Any, ...]]:
        return [(t, p, k, v, h) for t, p, batch in self.sent for _, k, v, h in batch]


def fake(worker: WorkerSourceTask) -> FakeProducer:
    assert isinstance(worker.producer, FakeProducer)
    return worker.producer


LINES = ["plain", "", "unicodé ✓", 'say "hi"', "x" * 300, *(f"line {i}" for i in range(40))]


@pytest.mark.parametrize("batch_size", [1 << 20, 200], ids=["one-builder", "many-builders"])
def test_encoded_values_are_sent_as_the_batch_path_sends_converted_values(batch_size: int) -> None:
    conv = converter("json-schemas")

    async def scenario() -> tuple[WorkerSourceTask, WorkerSourceTask]:
        encoded, batch = (source_worker(FileStreamSourceTask(), conv, tolerance="all") for _ in range(2))
        encoded.producer, batch.producer = FakeProducer(batch_size), FakeProducer(batch_size)  # type: ignore[assignment]
        values = conv.from_connect_values(TOPIC, STRING_SCHEMA, LINES)
        await EncodedPath(encoded).send([EncodedValues(TOPIC, values[:10], None, {"filename": "f"}, {"position": 9}),
                                         EncodedValues(TOPIC, values[10:], None, {"filename": "f"}, {"position": 99})])
        await BatchPath(batch).send(SourceBatch(TOPIC, list(LINES), STRING_SCHEMA, {"filename": "f"},
                                                {"position": 99}))
        return encoded, batch

    encoded, batch = run(scenario)
    sent_encoded, sent_batch = fake(encoded).records(), fake(batch).records()
    assert sent_encoded == sent_batch == [(TOPIC, 0, None, conv.from_connect_data(TOPIC, STRING_SCHEMA, line), [])
                                          for line in LINES]
    producer = fake(encoded)
    assert all([o for o, *_ in b] == list(range(len(b))) for _, _, b in producer.sent)
    assert (len(producer.sent) > 5) == (batch_size < 1 << 20)
    (entry,) = encoded.outstanding
    assert len(entry.futures) == len(producer.sent)  # the offset waits for every builder, rolled ones too
    assert entry.offsets == {offset_key("conn", {"filename": "f"}): {"position": 99}}
    assert encoded.records_sent == len(LINES)
