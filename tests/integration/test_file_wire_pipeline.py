"""The file connectors with JsonConverter through ``headwater up`` (real broker, real REST): the sink reads
the converter's wire form itself (``put_encoded``) and the source's batches are written a few hundred
lines at a time; both must give the same topic contents and sink files as the record path (forced by a
transform that changes nothing), for lines that take the shortcuts and lines that do not (escapes,
unicode, control characters, lines that look like JSON, empty lines, invalid UTF-8).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.connectproc import (
    JSON_CONVERTER,
    NEVER_MATCHING_FILTER,
    ConnectProcess,
    consume,
    module_connect,
    sink_config,
    source_config,
    unique,
    wait_for,
)

from headwater.connect.api.data import STRING_SCHEMA
from headwater.connect.converters import JsonConverter

pytestmark = pytest.mark.timeout(120)

connect = module_connect("file-encoded")


def tricky_input() -> bytes:
    """Plain lines (the shortcuts) over several batches, then batches mixing in lines that need escapes."""
    plain = b"".join(b"plain line %05d %s\n" % (i, b"x" * (i % 50)) for i in range(6000))
    tricky = [
        lambda i: 'unicodé ✓ 漢字 🚀 %d\n'.encode() % i,
        lambda i: b'{"schema":{"type":"string","optional":false},"payload":"looks like json %d"}\n' % i,
        lambda i: b'say "hi" %d\n' % i,
        lambda i: b"back\\slash %d\n" % i,
        lambda i: b"tab\tand \x01 \x1f controls %d\n" % i,
        lambda i: b"\n",
        lambda i: b"del \x7f %d\n" % i,
        lambda i: b"invalid \xff utf-8 %d\n" % i,
        lambda i: b"windows %d\r\n" % i,
    ]
    mixed = b"".join(tricky[i % len(tricky)](i) for i in range(900))
    return plain + mixed + plain[:200_000] + b"the end\n"


def file_lines(data: bytes) -> list[str]:
    return [line.decode("utf-8", "replace") for line in data.splitlines()]


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.parametrize("schemas", ["true", "false"])
def test_json_file_pipeline_encoded_equals_record_path(connect: ConnectProcess, tmp_path: Path, schemas: str) -> None:
    data = tricky_input()
    lines = file_lines(data)
    expected = "".join(line + "\n" for line in lines).encode()
    src = tmp_path / "in.txt"
    src.write_bytes(data)
    json_settings = {"value.converter": JSON_CONVERTER, "value.converter.schemas.enable": schemas}

    topic_fast, topic_record = unique("json-fast"), unique("json-record")
    sources = {unique("src-fast"): source_config(src, topic_fast, **json_settings),
               unique("src-record"): source_config(src, topic_record, **json_settings, **NEVER_MATCHING_FILTER)}
    # each sink path reading each source path's topic
    sinks = {
        "fast-fast": (topic_fast, {}),
        "record-record": (topic_record, NEVER_MATCHING_FILTER),
        "fast-record": (topic_fast, NEVER_MATCHING_FILTER),
        "record-fast": (topic_record, {}),
    }
    outs = {key: tmp_path / f"{key}.out" for key in sinks}
    names = {key: unique(f"sink-{key}") for key in sinks}
    for key, (topic, extra) in sinks.items():
        connect.create(names[key], sink_config(outs[key], topic, **json_settings, **extra))
    for name, config in sources.items():
        connect.create(name, config)

    wait_for(lambda: all(line_count(out) >= len(lines) for out in outs.values()), 60, 0.1,
             "every sink file to hold the whole input", connect.log_text)
    for name in [*sources, *names.values()]:
        assert connect.call("PUT", f"/connectors/{name}/stop").status == 204
    for name in [*sources, *names.values()]:
        connect.wait_state(name, "STOPPED", tasks=0)

    for key, out in outs.items():
        assert out.read_bytes() == expected, key

    conv = JsonConverter()
    conv.configure({"schemas.enable": schemas})
    want = [conv.from_connect_data(topic_fast, STRING_SCHEMA, line) for line in lines]
    assert [m.value for m in consume(connect.bootstrap, topic_fast, count=len(lines))] == want
    assert [m.value for m in consume(connect.bootstrap, topic_record, count=len(lines))] == want
    for name in [*sources, *names.values()]:
        connect.ok("DELETE", f"/connectors/{name}", expect=204)
