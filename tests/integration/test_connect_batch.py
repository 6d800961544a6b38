"""The batch path through ``headwater up`` (real broker, real REST): connectors without transforms move
records with ``poll_batch`` / ``put_batch``; a transform that changes nothing forces the record path. Both
must give the same topic contents, sink files and source offsets, and the sink's batch path must hand
partitions it cannot take (a value that does not convert, records with headers, differing schemas) to the
record path, with errors.tolerance and the dead letter queue as usual.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from support.connectproc import (
    JSON_CONVERTER,
    NEVER_MATCHING_FILTER,
    ConnectProcess,
    TopicReader,
    consume,
    module_connect,
    produce,
    sink_config,
    source_config,
    unique,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)


connect = module_connect("connect-batch")


_TERMINATOR = re.compile(rb"\r\n|\r|\n")


def file_lines(data: bytes) -> list[str]:
    """The lines FileStreamSource reads from ``data`` (ending in a terminator other than a lone \\r):
    split at \\n, \\r\\n or \\r, decoded as UTF-8 with U+FFFD for invalid bytes."""
    assert not data.endswith(b"\r")
    parts = _TERMINATOR.split(data)
    assert parts[-1] == b""
    return [p.decode("utf-8", "replace") for p in parts[:-1]]


def mixed_input() -> bytes:
    """Over one read chunk (1 MiB) of plain ASCII lines, read on the fast path, then lines ending in
    \\r\\n and lone \\r, non-ASCII, empty lines and invalid UTF-8, read on the general path."""
    ascii_part = b"".join(b"ascii line %06d %s\n" % (i, b"." * (i % 13)) for i in range(45_000))
    assert len(ascii_part) > 1 << 20
    tricky = [
        lambda i: b"windows line %d\r\n" % i,
        lambda i: b"old mac line %d\r" % i,
        lambda i: "unicodé ✓ 漢字 🚀 %d\n".encode() % i,
        lambda i: b"invalid \xff\xfe \xc3( utf-8 %d\n" % i,
        lambda i: b"\n",
        lambda i: b"\r\n",
        lambda i: b"plain %d\n" % i,
        lambda i: b"truncated \xe2\x9c %d\r\n" % i,
    ]
    mixed_part = b"".join(tricky[i % len(tricky)](i) for i in range(4_000))
    return ascii_part + mixed_part + b"the end\n"


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def offsets_of(connect: ConnectProcess, name: str) -> list[dict]:
    return connect.ok("GET", f"/connectors/{name}/offsets", expect=200)["offsets"]


def stop(connect: ConnectProcess, *names: str) -> None:
    """Stopping flushes sink files and commits source offsets."""
    for name in names:
        assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    for name in names:
        connect.wait_state(name, "STOPPED", tasks=0)


def delete(connect: ConnectProcess, *names: str) -> None:
    for name in names:
        connect.ok("DELETE", f"/connectors/{name}", expect=204)


def test_file_round_trip_batch_path_equals_record_path(connect: ConnectProcess, tmp_path: Path) -> None:
    data = mixed_input()
    lines = file_lines(data)
    expected = "".join(line + "\n" for line in lines).encode("utf-8")
    assert "\ufffd" in expected.decode() and "\r" not in expected.decode()
    src = tmp_path / "in.txt"
    src.write_bytes(data)

    topic_batch, topic_record = unique("batch-path"), unique("record-path")
    src_batch, src_record = unique("src-batch"), unique("src-record")
    # sinks: each path end to end, and each sink path reading the other source path's topic
    sinks = {
        "batch-batch": (topic_batch, {}),
        "record-record": (topic_record, NEVER_MATCHING_FILTER),
        "batch-record": (topic_batch, NEVER_MATCHING_FILTER),
        "record-batch": (topic_record, {}),
    }
    outs = {key: tmp_path / f"{key}.out" for key in sinks}
    names = {key: unique(f"sink-{key}") for key in sinks}
    for key, (topic, extra) in sinks.items():
        connect.create(names[key], sink_config(outs[key], topic, **extra))
    connect.create(src_batch, source_config(src, topic_batch, **{"batch.size": "700"}))
    connect.create(src_record, source_config(src, topic_record, **{"batch.size": "700"}, **NEVER_MATCHING_FILTER))

    def all_written() -> bool:
        return all(line_count(out) >= len(lines) for out in outs.values())

    wait_for(all_written, 30, 0.1, "every sink file to hold the whole input", connect.log_text)
    stop(connect, src_batch, src_record, *names.values())

    for key, out in outs.items():
        got = out.read_bytes()
        assert len(got) == len(expected), key
        assert got == expected, key

    want = [line.encode("utf-8") for line in lines]
    got_batch = consume(connect.bootstrap, topic_batch, count=len(lines))
    got_record = consume(connect.bootstrap, topic_record, count=len(lines))
    assert [m.value for m in got_batch] == want
    assert [m.value for m in got_record] == want
    assert all(m.key is None and m.headers == () for m in got_batch + got_record)

    # both paths committed the position after the last line
    committed = [{"partition": {"filename": str(src)}, "offset": {"position": len(data)}}]
    assert offsets_of(connect, src_batch) == committed
    assert offsets_of(connect, src_record) == committed
    delete(connect, src_batch, src_record, *names.values())


def test_unconvertible_value_falls_back_to_record_path_and_dlq(connect: ConnectProcess, tmp_path: Path) -> None:
    topic, dlq, name = unique("json-in"), unique("json-dlq"), unique("json-sink")
    out = tmp_path / "json.out"
    first = [json.dumps(f"valid-{i} é").encode() for i in range(40)]
    bad_at = 17
    first[bad_at] = b"not json {"
    produce(connect.bootstrap, topic, [(None, v, []) for v in first])  # no headers: a batch is tried
    connect.create(name, sink_config(out, topic, **{
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}))
    valid = [f"valid-{i} é" for i in range(40) if i != bad_at]

    def lines() -> list[str]:  # read while the sink writes: a cut "é" is U+FFFD, not an error (the end compares)
        return out.read_text(encoding="utf-8", errors="replace").splitlines() if out.exists() else []

    wait_for(lambda: len(lines()) >= len(valid), 20, 0.1, "the valid records in the sink file", connect.log_text)
    dead = consume(connect.bootstrap, dlq, count=1, timeout=20, settle=0.3)
    assert len(dead) == 1
    assert dead[0].value == b"not json {" and dead[0].key is None
    ctx = {k: v.decode() for k, v in dead[0].headers}
    assert ctx["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert ctx["__connect.errors.offset"] == str(bad_at)
    assert ctx["__connect.errors.topic"] == topic

    # the task goes on: later records (all valid) arrive too
    later = [json.dumps(f"later-{i}").encode() for i in range(25)]
    produce(connect.bootstrap, topic, [(None, v, []) for v in later])
    valid += [f"later-{i}" for i in range(25)]
    wait_for(lambda: len(lines()) >= len(valid), 20, 0.1, "the later records in the sink file", connect.log_text)
    assert connect.status(name)["tasks"][0]["state"] == "RUNNING"
    stop(connect, name)
    assert lines() == valid
    assert len(consume(connect.bootstrap, dlq, settle=0.3)) == 1
    delete(connect, name)


def test_differing_schemas_fall_back_to_record_path(connect: ConnectProcess, tmp_path: Path) -> None:
    """JsonConverter with schemas: one partition's values of different schemas cannot form a batch."""
    topic, name, out = unique("schemas-in"), unique("schemas-sink"), tmp_path / "schemas.out"

    def envelope(schema: str, payload: object) -> bytes:
        return json.dumps({"schema": {"type": schema, "optional": False}, "payload": payload}).encode()

    produce(connect.bootstrap, topic, [(None, envelope("string", "a"), []), (None, envelope("int32", 5), []),
                                       (None, envelope("boolean", True), []), (None, envelope("string", "b"), [])])
    connect.create(name, sink_config(out, topic, **{"value.converter": JSON_CONVERTER}))
    wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= 4, 20, 0.1, "4 lines",
             connect.log_text)
    produce(connect.bootstrap, topic, [(None, envelope("string", f"s-{i}"), []) for i in range(10)])
    wait_for(lambda: len(out.read_text().splitlines()) >= 14, 20, 0.1, "14 lines", connect.log_text)
    stop(connect, name)
    assert out.read_text().splitlines() == ["a", "5", "true", "b", *(f"s-{i}" for i in range(10))]
    delete(connect, name)


def test_records_with_headers_reach_the_sink_exactly(connect: ConnectProcess, tmp_path: Path) -> None:
    topic, name, out = unique("headers-in"), unique("headers-sink"), tmp_path / "headers.out"
    records = []
    for i in range(60):
        value: bytes | None = [f"value {i}".encode(), f"unicodé ✓ {i}".encode(), b"", b"bad \xff %d" % i,
                               None][i % 5]
        headers = [("trace", f"t-{i}".encode()), ("n", b"")] if i % 3 else []
        key = f"k{i}".encode() if i % 2 or value is None else None  # a tombstone needs a key
        records.append((key, value, headers))
    produce(connect.bootstrap, topic, records)
    with TopicReader(connect.bootstrap, topic) as reader:
        sent = reader.read(len(records))
        assert [bool(m.headers) for m in sent] == [bool(h) for _, _, h in records]

    def expected_line(value: bytes | None) -> str:
        return "null" if value is None else value.decode("utf-8", "replace")

    connect.create(name, sink_config(out, topic))
    want = "".join(expected_line(v) + "\n" for _, v, _ in records).encode()
    wait_for(lambda: line_count(out) >= len(records), 20, 0.1, "every record in the sink file", connect.log_text)
    # then records without headers (the batch path), appended after the others: invalid UTF-8 is
    # replaced and a null value written as "null", as on the record path
    more: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (None, f"plain {i}".encode(), []) for i in range(30)]
    more[5:5] = [(None, b"bad \xfe\xff tail \xe2\x9c", []), (b"tomb", None, []), (None, "ünïcode ✓".encode(), []),
                 (None, b"", [])]
    produce(connect.bootstrap, topic, more)
    want += "".join(expected_line(v) + "\n" for _, v, _ in more).encode()
    assert "\ufffd" in want.decode().rsplit("plain 4\n", 1)[1]
    wait_for(lambda: line_count(out) >= len(records) + len(more), 20, 0.1, "the later records in the sink file",
             connect.log_text)
    time.sleep(0.3)  # nothing more may arrive
    stop(connect, name)
    assert out.read_bytes() == want
    delete(connect, name)
