"""The file connectors' wire-form shortcuts against the converters' record path.

``LineWire.lines`` (the file sink's ``put_encoded``) must give exactly the bytes the record path writes
(each value through the converter, then the sink's line), or None whenever the record path would do
anything else: fail, see another schema, or read a line the shortcut cannot vouch for. JsonConverter's
``from_connect_values`` for strings (the file source's batches) writes plain text a few hundred lines at
a time and must give ``from_connect_data``'s bytes for every line, or the same error.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from headwater.connect.api import DataException
from headwater.connect.api.data import OPTIONAL_STRING_SCHEMA, STRING_SCHEMA
from headwater.connect.converters import ByteArrayConverter, JsonConverter, StringConverter
from headwater.connectors.file.encoded import CHUNK, LineWire
from headwater.connectors.file.sink import _line

TOPIC = "t"

# lines of text a file may hold: plain, unicode, things a JSON string escapes, lines that look like JSON
TRICKY = ["", "plain line", "unicodé ✓ 漢字 🚀", 'say "hi"', "back\\slash", "tab\there", "nul\x00byte",
          "unit\x1fsep", "del\x7f", "line\u2028sep", '{"schema":{"type":"string","optional":false},"payload":"x"}',
          '"quoted"', "}", '"}', "\ufffd replaced", " trailing space "]


def converters() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for schemas in ("true", "false"):
        conv = JsonConverter()
        conv.configure({"schemas.enable": schemas})
        out.append((f"json-schemas-{schemas}", conv))
    string = StringConverter()
    string.configure({})
    out.append(("string", string))
    return out


CONVERTERS = converters()


def record_path(conv: Any, values: list[bytes | None]) -> bytes | None:
    """What FileStreamSink writes for these values on the record path; None when a value does not convert."""
    lines = []
    for data in values:
        try:
            lines.append(_line(conv.to_connect_data(TOPIC, data).value))
        except DataException:
            return None
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(("name", "conv"), CONVERTERS, ids=[n for n, _ in CONVERTERS])
def test_sink_lines_equal_the_record_path(name: str, conv: Any) -> None:
    wire = LineWire.of(conv)
    assert wire is not None
    rng = random.Random(30)
    plain = [f"line {i} " + "x" * rng.randrange(0, 120) + " é✓" * (i % 3) for i in range(CHUNK * 3 + 7)]
    for lines in (plain, plain[:1], [""], ["", ""], plain[:CHUNK], plain[:CHUNK + 1]):
        values = conv.from_connect_values(TOPIC, STRING_SCHEMA, lines)
        got = wire.lines(values)
        assert got is not None, "plain lines take the shortcut"
        assert got == record_path(conv, values) == ("\n".join(lines) + "\n").encode()
    for line in TRICKY:
        values = conv.from_connect_values(TOPIC, STRING_SCHEMA, [*plain[:300], line, *plain[:5]])
        got = wire.lines(values)
        assert record_path(conv, values) == ("\n".join([*plain[:300], line, *plain[:5]]) + "\n").encode()
        assert got is None or got == record_path(conv, values), repr(line)
        escaped = wire.json and any(c in line for c in '"\\\x00\x09\x1f')
        assert (got is None) == escaped, repr(line)  # only lines with escapes leave the shortcut
    assert wire.lines([]) == b""


@pytest.mark.parametrize(("name", "conv"), CONVERTERS, ids=[n for n, _ in CONVERTERS])
def test_sink_lines_refuse_what_the_record_path_reads_otherwise(name: str, conv: Any) -> None:
    """Random records made of envelope pieces: the shortcut gives the record path's bytes or None, and
    None whenever a record fails to convert."""
    wire = LineWire.of(conv)
    assert wire is not None
    head, tail = (wire.head, wire.tail) if wire.json else (b"", b"")
    other = JsonConverter()
    other.configure({})
    optional = other.from_connect_data(TOPIC, OPTIONAL_STRING_SCHEMA, "x")
    assert optional is not None
    pieces = [head, tail, b"a", b"abc", b"\n", b'"', b"}", b"\\", b"\\n", "é".encode(), b"\xff", b"\xc3", b" ",
              b"5", optional[:20]]
    rng = random.Random(4)
    refused = taken = 0
    for _ in range(3000):
        values: list[bytes | None] = []
        for _ in range(rng.randrange(1, 6)):
            if rng.random() < 0.6:  # most records well formed: a wrong one among right ones is the hard case
                values.append(head + b"".join(rng.choice([b"a", b"xy", "ü".encode(), b" "])
                                              for _ in range(rng.randrange(0, 4))) + tail)
            elif rng.random() < 0.05:
                values.append(None)
            else:
                values.append(b"".join(rng.choice(pieces) for _ in range(rng.randrange(0, 6))))
        expected = record_path(conv, values)
        got = wire.lines(values)
        if got is None:
            refused += 1
        else:
            taken += 1
            assert expected is not None and got == expected, values
    assert refused > 100 and taken > 100  # both outcomes were exercised


def test_sink_lines_refuse_records_that_are_not_exactly_an_envelope() -> None:
    conv = JsonConverter()
    conv.configure({})
    wire = LineWire.of(conv)
    assert wire is not None
    good = conv.from_connect_data(TOPIC, STRING_SCHEMA, "a")
    assert good is not None
    short = wire.head[:-1] + b'"}'  # the envelope with '"}' as payload: not a JSON string
    inner_quote = good.replace(b'"a"', b'"a"b"')
    cases: list[list[bytes | None]] = [[short], [good, short], [short, good], [good, short, good], [good, good[:-1]],
                                       [inner_quote], [good, inner_quote]]
    for values in cases:
        assert record_path(conv, values) is None, values  # the record path fails on these
        assert wire.lines(values) is None, values
    # read fine by the record path, but not the exact form: left to it
    assert record_path(conv, [good + b" "]) == b"a\n"
    assert wire.lines([good + b" "]) is None


def test_wire_is_only_for_the_converters_it_knows() -> None:
    latin1 = StringConverter()
    latin1.configure({"converter.encoding": "latin-1"})
    assert LineWire.of(latin1) is None
    assert LineWire.of(ByteArrayConverter()) is None

    class Custom(JsonConverter):
        pass
    assert LineWire.of(Custom()) is None


@pytest.mark.parametrize("schemas", ["true", "false"])
def test_json_string_lists_equal_per_record(schemas: str) -> None:
    """from_connect_values for strings: written together when nothing needs an escape, one by one
    otherwise; always from_connect_data's bytes, in order, across chunk boundaries."""
    conv = JsonConverter()
    conv.configure({"schemas.enable": schemas})
    rng = random.Random(7)
    alphabet = ["a", "b", " ", "é", "✓", "🚀", '"', "\\", "\n", "\r", "\x00", "\x1f", "\x7f", "\u2028", "}"]
    for size in (1, 2, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5):
        for plain in (True, False):
            pool = alphabet[:6] if plain else alphabet
            values = ["".join(rng.choice(pool) for _ in range(rng.randrange(0, 30))) for _ in range(size)]
            assert conv.from_connect_values(TOPIC, STRING_SCHEMA, values) == [
                conv.from_connect_data(TOPIC, STRING_SCHEMA, v) for v in values]
    # one escape (a newline is one too) in a late chunk sends the whole list the per-record way
    for odd in ('a "quote"', "two\nlines", "\n", "cr\r"):
        values = [f"v{i}" for i in range(2 * CHUNK)] + [odd]
        assert conv.from_connect_values(TOPIC, STRING_SCHEMA, values) == [
            conv.from_connect_data(TOPIC, STRING_SCHEMA, v) for v in values]
    with pytest.raises(DataException):  # a lone surrogate fails as it does record by record
        conv.from_connect_values(TOPIC, STRING_SCHEMA, ["ok"] * CHUNK + ["lone \ud800"])


def test_sink_task_puts_encoded_batches_and_hands_back_the_others(tmp_path: Any) -> None:
    from types import SimpleNamespace

    from headwater.connect.api.batch import EncodedSinkBatch
    from headwater.connectors.file.sink import FileStreamSinkTask

    def batch(values: list[bytes | None], keys: list[bytes | None] | None = None) -> EncodedSinkBatch:
        keys = keys or [None] * len(values)
        return EncodedSinkBatch(TOPIC, 0, [SimpleNamespace(key=k, value=v, offset=i, timestamp=0)
                                           for i, (k, v) in enumerate(zip(keys, values, strict=True))])

    json_conv = JsonConverter()
    json_conv.configure({})
    out = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.start({"file": str(out)})
    assert task.decode_with(StringConverter(), json_conv)
    lines = ["first", "ünïcode ✓", ""]
    assert task.put_encoded(batch(json_conv.from_connect_values(TOPIC, STRING_SCHEMA, lines)))
    assert out.read_bytes() == "first\nünïcode ✓\n\n".encode()
    # a null, an escape or a record in another form: handed back, nothing written
    refused: list[list[bytes | None]] = [[None], json_conv.from_connect_values(TOPIC, STRING_SCHEMA, ['a "q"']),
                                         [b'"plain json"']]
    for values in refused:
        assert task.put_encoded(batch(values)) is False
    assert out.read_bytes() == "first\nünïcode ✓\n\n".encode()
    # with a key converter that may fail on a key, only null keys are taken
    assert task.decode_with(json_conv, json_conv)
    values = json_conv.from_connect_values(TOPIC, STRING_SCHEMA, ["k"])
    assert task.put_encoded(batch(values, [b"not json"])) is False
    assert task.put_encoded(batch(values))
    assert out.read_bytes().endswith(b"\nk\n")
    task.stop()

    stdout_task = FileStreamSinkTask()
    stdout_task.start({})
    assert not stdout_task.decode_with(StringConverter(), json_conv)  # stdout keeps the converted path
