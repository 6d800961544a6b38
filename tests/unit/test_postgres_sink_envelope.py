"""The Postgres sink's light read of schemaless Debezium envelopes and keys answers what JsonConverter reads (the
after row, the source's schema/table/db; a whole key) or declines: never a value the converter would not give."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.connect.converters.json.converter import JsonConverter
from headwater.connectors.postgres.sink_envelope import DECLINED, LightJson


def _converter(schemas: bool = False) -> JsonConverter:
    converter = JsonConverter()
    converter.configure({"schemas.enable": str(schemas).lower()}, False)
    return converter


CONVERTER = _converter()
_LIGHT = LightJson.of(CONVERTER)
assert _LIGHT is not None
LIGHT: LightJson = _LIGHT
READ = LIGHT.envelope


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True in Python; key order counts)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is float:
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return bool(a == b)


def _converted(data: bytes) -> tuple[dict[str, Any], tuple[Any, Any, Any]] | None:
    """What the sink's lane takes of the converter's value (None: not a c/r/u envelope with an object row and
    source block), or raises what the converter raises."""
    value = CONVERTER.to_connect_data("t", data).value
    if type(value) is not dict or value.get("op") not in ("c", "r", "u"):
        return None
    after, source = value.get("after"), value.get("source")
    if type(after) is not dict or type(source) is not dict or "op" not in value:
        return None
    return after, (source.get("schema"), source.get("table"), source.get("db"))


def _agrees(data: bytes) -> bool:
    """The light read declines, or answers exactly what the converter's value gives. True when it answered."""
    read = READ(data)
    if read is None:
        return False
    want = _converted(data)  # the converter must read it (a failure here is a wrong answer of the light read)
    assert want is not None, data
    assert _same(read[0], want[0]) and _same(list(read[1]), list(want[1])), (data, read, want)
    return True


# Envelopes the light read must answer, exactly as the converter reads them.
ANSWERED = [
    b'{"before":null,"after":{"id":1,"v":"v"},"source":{"version":"2.5.0.Final","connector":"postgresql",'
    b'"ts_ms":1764316800000,"snapshot":"false","db":"bench","sequence":"[\\"0\\",\\"40\\"]","schema":"public",'
    b'"table":"lat_t","txId":1000,"lsn":40,"xmin":null},"op":"c","ts_ms":1764316800001,"transaction":null}',
    # escapes and unicode: \u escapes, surrogate pairs, raw UTF-8, quotes, backslashes, \/ and control escapes
    '{"after":{"id":2,"s":"caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ \\/ \\t\\n\\r\\b\\f","t":"ünï 漢字 😀"},'
    '"source":{"schema":"p\\u00fcblic","table":"it\\u0065ms","db":"d\\"b","note":"ß\\u2028"},"op":"r"}'.encode(),
    # keys in another order, whitespace between tokens, a before image, an update
    b' { "op" : "u" ,\t"source" : { "table" : "t" } ,\n"before" : {"id":3,"v":[1,{"a":null}]},'
    b' "after" : { "id" : 3 , "v" : [ 1 , 2 ] } } \r\n',
    # duplicate keys: the last one wins, at the first one's place
    b'{"op":"d","after":null,"source":{"table":"x"},"op":"c","after":{"id":4,"id":5,"v":1},'
    b'"source":{"schema":"s","schema":"s2"}}',
    # numbers at the edges: big integers, -0, exponents, subnormals, overflow to inf in a skipped field
    b'{"op":"c","after":{"a":123456789012345678901234567890,"b":-0,"c":-0.0,"d":1E5,"e":1e-400,'
    b'"f":4.9406564584124654e-324,"g":1.7976931348623157e308,"h":-9223372036854775809,"i":0.1,'
    b'"j":18446744073709551616,"k":true,"l":false,"m":null,"n":{"o":[[]]}},'
    b'"source":{"ts":1e999999,"big":' + b"9" * 4000 + b'},"ts_ns":1764316800001000000}',
    # source fields that are not strings, missing ones
    b'{"op":"c","after":{},"source":{"schema":null,"table":7,"db":[1]}}',
    b'{"op":"u","after":{"id":6},"source":{}}',
]

# Envelopes the light read must decline (the converter's path then reads them, or fails, as before).
DECLINED_ENVELOPES = [
    b'{"op":"c","after":{"id":1},"source":{"v":"\xff"}}',  # not UTF-8 in a field it skips: the converter fails
    b'{"op":"c","after":{"id":1},"source":{"v":"\xed\xa0\x80"}}',  # an encoded surrogate: json.loads reads it
    b'{"op":"c","after":{"id":1},"source":{"v":' + b"1" * 4301 + b"}}",  # beyond Python's int digits: fails
    b'{"op":"c","after":{"id":"\\ud800"},"source":{}}',  # a lone surrogate: the converter reads it
    b'{"op":"c","after":{"id":NaN},"source":{}}',  # NaN, Infinity: the converter reads them
    b'{"op":"c","after":{"id":1.7976931348623159e308},"source":{}}',  # inf for the converter
    b'\xef\xbb\xbf{"op":"c","after":{"id":1},"source":{}}',  # a BOM: json.loads skips it
    '{"op":"c","after":{"id":1},"source":{}}\u00a0'.encode(),  # str.strip()'s whitespace after the value
    b'{"op":"c","after":{"id":' + b"[" * 300 + b"]" * 300 + b'},"source":{}}',  # deep nesting
    b'{"op":"c","after":{"id":1},"source":{"v":"a\tb"}}',  # a raw control character: the converter fails
    b'{"op":"c","after":{"id":1},"source":{"v":01}}',
    b'{"op":"c","after":{"id":1},"source":{}} x',
    b'{"op":"c","after":{"id":1},"source":{},}',
    b'{"op":"d","before":{"id":1},"after":null,"source":{}}',  # not c/r/u, or no row, or no source block
    b'{"op":"t","after":null,"source":{}}',
    b'{"op":"c","after":[1],"source":{}}',
    b'{"op":"c","after":{"id":1}}',
    b'{"op":"c","after":{"id":1},"source":null}',
    b'{"op":"c","after":{"id":1},"source":"s"}',
    b'{"op":{"c":1},"after":{"id":1},"source":{}}',
    b'{"after":{"id":1},"source":{}}',
    b"[]",
    b"",
    b"null",
]


@pytest.mark.parametrize("data", ANSWERED)
def test_envelopes_are_read_as_the_converter_reads_them(data: bytes) -> None:
    assert _agrees(data)


@pytest.mark.parametrize("data", DECLINED_ENVELOPES)
def test_what_the_converter_reads_otherwise_or_refuses_is_declined(data: bytes) -> None:
    assert READ(data) is None


@pytest.mark.parametrize("data", [b'{"id":1}', b'{"id":"caf\\u00e9","id":2,"k":[1.5,null,-0]}', b' 7 ', b'"s"',
                                  b"null", b"123456789012345678901234567890", "{\"é\":\"ü\"}".encode()])
def test_keys_are_read_as_the_converter_reads_them(data: bytes) -> None:
    got = LIGHT.value(data)
    assert got is not DECLINED and _same(got, CONVERTER.to_connect_data("t", data).value)


@pytest.mark.parametrize("data", [b"", b"{", b"NaN", b'"\\ud800"', b'{"id":"\xff"}', b"\xef\xbb\xbf{}",
                                  b"1" * 4301, b"[" * 300 + b"]" * 300, b"1e400"])
def test_keys_the_converter_reads_otherwise_or_refuses_are_declined(data: bytes) -> None:
    assert LIGHT.value(data) is DECLINED


def test_only_a_plain_schemaless_json_converter_gets_the_light_read() -> None:
    class Other(JsonConverter):
        pass

    other = Other()
    other.configure({"schemas.enable": "false"}, False)
    assert LightJson.of(_converter(schemas=True)) is None and LightJson.of(other) is None
    assert LightJson.of(object()) is None


_scalars = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_rows = st.dictionaries(st.text(max_size=6), _values, max_size=5)


@st.composite
def _envelopes(draw: st.DrawFn) -> bytes:
    """Envelopes as JSON writers write them (either escaping or raw unicode), some with a byte changed."""
    envelope = {"before": draw(st.none() | _rows), "after": draw(st.none() | _rows),
                "source": draw(st.dictionaries(st.sampled_from(["schema", "table", "db", "v", "ts_ms"]), _scalars)),
                "op": draw(st.sampled_from(["c", "r", "u", "d", "t"])), "ts_ms": draw(_scalars)}
    data = json.dumps(envelope, ensure_ascii=draw(st.booleans()), separators=draw(
        st.sampled_from([(",", ":"), (", ", ": ")]))).encode()
    if draw(st.booleans()):  # a byte changed: what a damaged record could hold
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1:]
    return data


@settings(max_examples=200, deadline=None)
@given(_envelopes())
def test_any_envelope_is_read_as_the_converter_reads_it_or_declined(data: bytes) -> None:
    _agrees(data)


@settings(max_examples=100, deadline=None)
@given(_envelopes())
def test_any_key_is_read_as_the_converter_reads_it_or_declined(data: bytes) -> None:
    got = LIGHT.value(data)
    if got is not DECLINED:
        assert _same(got, CONVERTER.to_connect_data("t", data).value), data


def test_most_generated_envelopes_take_the_light_read() -> None:
    """The property above is not vacuous: the light read answers the usual envelope."""
    answered = sum(_agrees(json.dumps({"before": None, "after": {"id": i, "s": "é" * i}, "op": "c",
                                       "source": {"schema": "public", "table": "t", "lsn": i}}).encode())
                   for i in range(50))
    assert answered == 50
