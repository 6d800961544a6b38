"""Converters: Kafka-exact JsonConverter envelopes, String/ByteArray converters, header converters."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

import pluggy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.connect.api.converters import Converter, HeaderConverter, SchemaAndValue
from headwater.connect.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    SchemaType,
    Struct,
    array_schema,
    map_schema,
)
from headwater.connect.api.errors import ConfigException, DataException
from headwater.connect.api.hookspecs import HeadwaterSpec
from headwater.connect.api.logical import (
    DATE_SCHEMA,
    TIME_SCHEMA,
    TIMESTAMP_SCHEMA,
    decimal_from_bytes,
    decimal_schema,
    decimal_to_bytes,
)
from headwater.connect.converters import (
    CONVERTERS,
    ByteArrayConverter,
    JsonConverter,
    SimpleHeaderConverter,
    StringConverter,
)
from headwater.connect.converters.json import ENVELOPE_ERROR

UTC = dt.UTC
KAFKA_ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)


def json_converter(**configs: str) -> JsonConverter:
    conv = JsonConverter()
    conv.configure({k.replace("_", "."): v for k, v in configs.items()}, False)
    return conv


def envelope(schema_json: str, payload_json: str) -> bytes:
    return ('{"schema":' + schema_json + ',"payload":' + payload_json + "}").encode()


@pytest.fixture
def conv() -> JsonConverter:
    return json_converter()


# -- JsonConverter: primitives ------------------------------------------------------------------------

@pytest.mark.parametrize(("schema", "value", "schema_json", "payload"), [
    (BOOLEAN_SCHEMA, True, '{"type":"boolean","optional":false}', "true"),
    (INT8_SCHEMA, 12, '{"type":"int8","optional":false}', "12"),
    (INT16_SCHEMA, -12345, '{"type":"int16","optional":false}', "-12345"),
    (INT32_SCHEMA, 42, '{"type":"int32","optional":false}', "42"),
    (INT64_SCHEMA, 4398046511104, '{"type":"int64","optional":false}', "4398046511104"),
    (FLOAT32_SCHEMA, 12.5, '{"type":"float","optional":false}', "12.5"),
    (FLOAT64_SCHEMA, 12.34, '{"type":"double","optional":false}', "12.34"),
    (STRING_SCHEMA, "foo-bar-baz", '{"type":"string","optional":false}', '"foo-bar-baz"'),
    (BYTES_SCHEMA, b"test-string", '{"type":"bytes","optional":false}', '"dGVzdC1zdHJpbmc="'),
    (OPTIONAL_INT32_SCHEMA, 7, '{"type":"int32","optional":true}', "7"),
])
def test_primitive_envelopes(conv, schema, value, schema_json, payload):
    data = conv.from_connect_data("t", schema, value)
    assert data == envelope(schema_json, payload)
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, value)


def test_float_written_for_int_value_and_int_read_for_float_schema(conv):
    assert conv.from_connect_data("t", FLOAT64_SCHEMA, 3) == envelope('{"type":"double","optional":false}', "3.0")
    assert conv.to_connect_data("t", envelope('{"type":"double","optional":false}', "3")).value == 3.0


def test_nonfinite_floats_are_strings_like_jackson(conv):
    data = conv.from_connect_data("t", FLOAT64_SCHEMA, math.inf)
    assert data == envelope('{"type":"double","optional":false}', '"Infinity"')
    assert conv.to_connect_data("t", data).value == math.inf
    nan = conv.to_connect_data("t", conv.from_connect_data("t", FLOAT64_SCHEMA, math.nan)).value
    assert math.isnan(nan)
    assert json_converter(schemas_enable="false").from_connect_data("t", None, [-math.inf]) == b'["-Infinity"]'


def test_unicode_is_written_as_utf8_not_escaped(conv):
    data = conv.from_connect_data("t", STRING_SCHEMA, 'héllo "wörld"\n')
    assert data == envelope('{"type":"string","optional":false}', '"héllo \\"wörld\\"\\n"')
    assert conv.to_connect_data("t", data).value == 'héllo "wörld"\n'


@pytest.mark.parametrize(("schema", "value", "message"), [
    (INT8_SCHEMA, 128, "Invalid value for INT8"),
    (INT32_SCHEMA, "1", "Invalid type for INT32"),
    (INT64_SCHEMA, True, "Invalid type for INT64"),
    (BOOLEAN_SCHEMA, 1, "Invalid type for BOOLEAN"),
    (STRING_SCHEMA, 1, "Invalid type for STRING"),
    (BYTES_SCHEMA, "x", "Invalid type for bytes type"),
    (array_schema(INT32_SCHEMA), {1}, "Invalid type for ARRAY"),
])
def test_wrong_python_types_are_data_exceptions(conv, schema, value, message):
    with pytest.raises(DataException, match=message):
        conv.from_connect_data("t", schema, value)


# -- JsonConverter: structs, arrays, maps ----------------------------------------------------------------

ADDRESS = (SchemaBuilder.struct().name("com.example.Address").version(2).doc("where")
           .field("street", STRING_SCHEMA).field("zip", OPTIONAL_INT32_SCHEMA).build())
PERSON = (SchemaBuilder.struct().name("com.example.Person")
          .field("id", INT32_SCHEMA).field("name", OPTIONAL_STRING_SCHEMA).field("address", ADDRESS)
          .field("tags", array_schema(STRING_SCHEMA)).build())
ADDRESS_JSON = ('{"type":"struct","fields":[{"type":"string","optional":false,"field":"street"},'
                '{"type":"int32","optional":true,"field":"zip"}],"optional":false,"name":"com.example.Address",'
                '"version":2,"doc":"where"}')
PERSON_JSON = ('{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},'
               '{"type":"string","optional":true,"field":"name"},'
               + ADDRESS_JSON[:-1] + ',"field":"address"},'
               '{"type":"array","items":{"type":"string","optional":false},"optional":false,"field":"tags"}],'
               '"optional":false,"name":"com.example.Person"}')


def person() -> Struct:
    address = Struct(ADDRESS).put("street", "Main St").put("zip", None)
    return Struct(PERSON, {"id": 1, "name": "Ann", "address": address, "tags": ["a", "b"]})


def test_nested_struct_envelope_is_byte_exact(conv):
    data = conv.from_connect_data("t", PERSON, person())
    assert data == envelope(PERSON_JSON, '{"id":1,"name":"Ann","address":{"street":"Main St","zip":null},'
                                         '"tags":["a","b"]}')
    back = conv.to_connect_data("t", data)
    assert back.schema == PERSON
    assert back.value == person()
    assert back.value["address"]["street"] == "Main St"


def test_struct_schema_mismatch_and_missing_required_field(conv):
    other = SchemaBuilder.struct().name("other").field("id", INT32_SCHEMA).build()
    with pytest.raises(DataException, match="Mismatching schema."):
        conv.from_connect_data("t", PERSON, Struct(other, {"id": 1}))
    with pytest.raises(DataException, match="null value for field that is required and has no default value"):
        conv.from_connect_data("t", PERSON, Struct(PERSON, {"id": 1, "tags": []}))
    with pytest.raises(DataException, match="Invalid null value for required INT32 field"):
        conv.to_connect_data("t", envelope(PERSON_JSON, '{"name":"x"}'))


def test_struct_accepts_a_plain_dict(conv):
    value: dict[str, Any] = {"id": 1, "name": None, "address": {"street": "s"}, "tags": []}
    assert conv.from_connect_data("t", PERSON, value).endswith(
        b'"payload":{"id":1,"name":null,"address":{"street":"s","zip":null},"tags":[]}}')


def test_array_envelope(conv):
    schema = array_schema(INT32_SCHEMA)
    data = conv.from_connect_data("t", schema, [1, 2, 3])
    assert data == envelope('{"type":"array","items":{"type":"int32","optional":false},"optional":false}', "[1,2,3]")
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, [1, 2, 3])


def test_map_with_string_keys_is_an_object(conv):
    schema = map_schema(STRING_SCHEMA, INT32_SCHEMA)
    data = conv.from_connect_data("t", schema, {"a": 1, "b": 2})
    assert data == envelope('{"type":"map","keys":{"type":"string","optional":false},'
                            '"values":{"type":"int32","optional":false},"optional":false}', '{"a":1,"b":2}')
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, {"a": 1, "b": 2})


def test_map_with_non_string_keys_is_an_array_of_pairs(conv):
    schema = map_schema(INT32_SCHEMA, STRING_SCHEMA)
    data = conv.from_connect_data("t", schema, {1: "a", 2: "b"})
    assert data == envelope('{"type":"map","keys":{"type":"int32","optional":false},'
                            '"values":{"type":"string","optional":false},"optional":false}', '[[1,"a"],[2,"b"]]')
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, {1: "a", 2: "b"})
    with pytest.raises(DataException, match="expected length 2 but found :3"):
        conv.to_connect_data("t", data.replace(b'[1,"a"]', b'[1,"a",3]'))


def test_schemaless_maps_choose_object_or_pairs_like_kafka():
    conv = json_converter(schemas_enable="false")
    assert conv.from_connect_data("t", None, {"a": 1}) == b'{"a":1}'
    assert conv.from_connect_data("t", None, {1: "x", 2: "y"}) == b'[[1,"x"],[2,"y"]]'
    assert conv.from_connect_data("t", None, {"a": {True: 1}}) == b'{"a":[[true,1]]}'
    assert conv.from_connect_data("t", None, [{"k": {2: b"\x00"}}]) == b'[{"k":[[2,"AA=="]]}]'


# -- JsonConverter: null, optional, defaults ----------------------------------------------------------

def test_null_handling(conv):
    assert conv.from_connect_data("t", None, None) is None
    assert conv.to_connect_data("t", None) == SchemaAndValue(None, None)
    assert conv.from_connect_data("t", OPTIONAL_INT32_SCHEMA, None) == envelope(
        '{"type":"int32","optional":true}', "null")
    assert conv.to_connect_data("t", envelope('{"type":"int32","optional":true}', "null")) == \
        SchemaAndValue(OPTIONAL_INT32_SCHEMA, None)
    with pytest.raises(DataException, match="null value for field that is required"):
        conv.from_connect_data("t", INT32_SCHEMA, None)
    assert conv.from_connect_data("t", None, 5) == b'{"schema":null,"payload":5}'
    assert conv.to_connect_data("t", b'{"schema":null,"payload":{"a":[1.5]}}') == SchemaAndValue(None, {"a": [1.5]})
    plain = json_converter(schemas_enable="false")
    assert plain.from_connect_data("t", OPTIONAL_INT32_SCHEMA, None) == b"null"
    assert plain.to_connect_data("t", b"null") == SchemaAndValue(None, None)
    assert plain.to_connect_data("t", b"") == SchemaAndValue(None, None)


def test_default_values_in_schema_and_payload():
    schema = Schema(SchemaType.INT32, optional=True, default=42)
    struct_schema = SchemaBuilder.struct().field("n", schema).build()
    schema_json = ('{"type":"struct","fields":[{"type":"int32","optional":true,"default":42,"field":"n"}],'
                   '"optional":false}')
    conv = json_converter()
    assert conv.from_connect_data("t", schema, None) == envelope('{"type":"int32","optional":true,"default":42}', "42")
    data = conv.from_connect_data("t", struct_schema, Struct(struct_schema))
    assert data == envelope(schema_json, '{"n":42}')
    assert conv.to_connect_data("t", envelope(schema_json, '{"n":null}')).value.values == {"n": 42}
    assert conv.to_connect_data("t", envelope(schema_json, '{"n":null}')).schema == struct_schema

    keep_null = json_converter(replace_null_with_default="false")
    assert keep_null.from_connect_data("t", struct_schema, Struct(struct_schema)) == envelope(schema_json, '{"n":null}')
    assert keep_null.to_connect_data("t", envelope(schema_json, '{"n":null}')).value.values == {"n": None}


def test_struct_and_logical_defaults_round_trip(conv):
    dec = Schema(SchemaType.BYTES, name="org.apache.kafka.connect.data.Decimal", version=1,
                 parameters=(("scale", "2"),), default=Decimal("1.00"))
    data = conv.from_connect_data("t", dec, None)
    assert data == envelope('{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal",'
                            '"version":1,"parameters":{"scale":"2"},"default":"ZA=="}', '"ZA=="')
    assert conv.to_connect_data("t", data) == SchemaAndValue(dec, Decimal("1.00"))


def test_schema_metadata_key_order_is_kafkas():
    schema = Schema(SchemaType.STRING, optional=True, name="com.example.Code", version=3, doc="a code",
                    parameters=(("b", "2"), ("a", "1")), default="zz")
    conv = json_converter()
    data = conv.from_connect_data("t", schema, "x")
    assert data == envelope('{"type":"string","optional":true,"name":"com.example.Code","version":3,"doc":"a code",'
                            '"parameters":{"b":"2","a":"1"},"default":"zz"}', '"x"')
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, "x")


def test_numeric_decimal_default_in_schema():
    schema = Schema(SchemaType.BYTES, optional=True, name="org.apache.kafka.connect.data.Decimal", version=1,
                    parameters=(("scale", "2"),), default=Decimal("9.99"))
    conv = json_converter(decimal_format="NUMERIC")
    data = conv.from_connect_data("t", schema, None)
    assert data == envelope('{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal",'
                            '"version":1,"parameters":{"scale":"2"},"default":9.99}', "9.99")
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, Decimal("9.99"))


# -- JsonConverter: logical types ---------------------------------------------------------------------

DECIMAL_2 = decimal_schema(2)
DECIMAL_JSON = ('{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,'
                '"parameters":{"scale":"2"}}')


def test_decimal_base64_matches_kafka(conv):
    data = conv.from_connect_data("t", DECIMAL_2, Decimal("1.56"))
    assert data == envelope(DECIMAL_JSON, '"AJw="')  # Kafka's JsonConverterTest vector
    assert conv.to_connect_data("t", data) == SchemaAndValue(DECIMAL_2, Decimal("1.56"))
    assert conv.from_connect_data("t", DECIMAL_2, Decimal("1.5")) == data.replace(b"AJw=", b"AJY=")  # rescaled
    with pytest.raises(DataException, match="mismatching scale"):
        conv.from_connect_data("t", DECIMAL_2, Decimal("1.567"))


def test_decimal_numeric_format():
    conv = json_converter(decimal_format="NUMERIC")
    value = Decimal("123456789012345678901234567890.12")
    data = conv.from_connect_data("t", DECIMAL_2, value)
    assert data == envelope(DECIMAL_JSON, "123456789012345678901234567890.12")
    assert conv.to_connect_data("t", data) == SchemaAndValue(DECIMAL_2, value)  # exact digits
    # either format reads either representation
    assert json_converter().to_connect_data("t", data).value == value
    assert conv.to_connect_data("t", envelope(DECIMAL_JSON, '"AJw="')).value == Decimal("1.56")
    struct_schema = SchemaBuilder.struct().field("price", DECIMAL_2).field("qty", FLOAT64_SCHEMA).build()
    plain = json_converter(decimal_format="numeric", schemas_enable="false")
    assert plain.from_connect_data("t", struct_schema, {"price": Decimal("-0.05"), "qty": 2.5}) == \
        b'{"price":-0.05,"qty":2.5}'


@pytest.mark.parametrize(("value", "unscaled"), [
    (Decimal("0.00"), b"\x00"), (Decimal("1.27"), b"\x7f"), (Decimal("1.28"), b"\x00\x80"),
    (Decimal("-1.28"), b"\x80"), (Decimal("-0.01"), b"\xff"), (Decimal("-1.29"), b"\xff\x7f"),
])
def test_decimal_bytes_are_javas_big_integer_bytes(value, unscaled):
    assert decimal_to_bytes(value, 2) == unscaled
    assert decimal_from_bytes(unscaled, 2) == value


def test_date_time_timestamp_match_kafka(conv):
    date_json = '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1}'
    time_json = '{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Time","version":1}'
    ts_json = '{"type":"int64","optional":false,"name":"org.apache.kafka.connect.data.Timestamp","version":1}'
    cases = [
        (DATE_SCHEMA, dt.date(1997, 5, 19), date_json, "10000"),
        (TIME_SCHEMA, dt.time(4, 0), time_json, "14400000"),
        (TIMESTAMP_SCHEMA, dt.datetime(1970, 2, 16, 7, 6, 40, tzinfo=UTC), ts_json, "4000000000"),
        (TIMESTAMP_SCHEMA, dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC), ts_json, "-1"),
    ]
    for schema, value, schema_json, payload in cases:
        data = conv.from_connect_data("t", schema, value)
        assert data == envelope(schema_json, payload)
        assert conv.to_connect_data("t", data) == SchemaAndValue(schema, value)
    assert conv.from_connect_data("t", TIMESTAMP_SCHEMA, dt.datetime(1970, 1, 1, 1)).endswith(b'"payload":3600000}')
    with pytest.raises(DataException, match="Date type should not have any time fields"):
        conv.from_connect_data("t", DATE_SCHEMA, dt.datetime(2024, 1, 1, 12, tzinfo=UTC))
    with pytest.raises(DataException, match="Invalid type for Date, underlying representation should be integer"):
        conv.to_connect_data("t", envelope(date_json, '"x"'))


# -- JsonConverter: schemas.enable=false, envelope errors, config ------------------------------------------

@pytest.mark.parametrize("value", [
    {"id": 1, "name": "x", "nested": {"list": [1, 2.5, None, True, "s"]}}, [1, "two", [3]], "text", 12, 1.5,
    True, {},
])
def test_schemaless_round_trip(value):
    conv = json_converter(schemas_enable="false")
    data = conv.from_connect_data("t", None, value)
    assert data == json.dumps(value, separators=(",", ":")).encode()
    assert conv.to_connect_data("t", data) == SchemaAndValue(None, value)


def test_schemaless_with_a_schema_uses_it_without_writing_it():
    conv = json_converter(schemas_enable="false")
    assert conv.from_connect_data("t", PERSON, person()) == \
        b'{"id":1,"name":"Ann","address":{"street":"Main St","zip":null},"tags":["a","b"]}'
    assert conv.from_connect_data("t", None, person()) == conv.from_connect_data("t", PERSON, person())
    with pytest.raises(DataException, match="does not have corresponding schema type"):
        conv.from_connect_data("t", None, {"price": Decimal("1.0")})
    with pytest.raises(DataException, match="does not have corresponding schema type"):
        conv.from_connect_data("t", None, {1: {2, 3}})


@pytest.mark.parametrize("data", [
    b'{"a":1}', b'{"schema":null}', b'{"payload":1}', b'{"schema":null,"payload":1,"extra":2}', b"[1,2]", b"12",
])
def test_schemas_enable_rejects_anything_but_the_envelope(conv, data):
    with pytest.raises(DataException) as info:
        conv.to_connect_data("t", data)
    assert str(info.value) == KAFKA_ENVELOPE_ERROR == ENVELOPE_ERROR


def test_reads_envelopes_written_by_other_tools(conv):
    # whitespace, key order, and missing "optional" as Kafka's own tests write them
    result = conv.to_connect_data("t", b'{ "payload": [1, 2], "schema": { "type": "array", "items": '
                                       b'{ "type": "int64" } } }')
    assert result == SchemaAndValue(array_schema(INT64_SCHEMA), [1, 2])
    assert conv.to_connect_data("t", b'{ "schema": { "type": "boolean" }, "payload": true }') == \
        SchemaAndValue(BOOLEAN_SCHEMA, True)


@pytest.mark.parametrize(("schema_json", "message"), [
    ('{"optional":false}', "Schema must contain 'type' field"),
    ('{"type":"nope"}', "Unknown schema type: nope"),
    ('{"type":"array"}', "Array schema did not specify the element type"),
    ('{"type":"map","values":{"type":"int8"}}', "Map schema did not specify the key type"),
    ('{"type":"struct","fields":{}}', 'Struct schema\'s "fields" argument is not an array.'),
    ('{"type":"struct","fields":[{"type":"int8"}]}', "Struct schema's field name not specified properly"),
    ('{"type":"int8","parameters":{"a":1}}', "Schema parameters must have string values."),
])
def test_bad_schemas(conv, schema_json, message):
    with pytest.raises(DataException) as info:
        conv.to_connect_data("t", envelope(schema_json, "1"))
    assert str(info.value) == message


def test_invalid_json_is_a_data_exception(conv):
    with pytest.raises(DataException, match="Converting byte\\[\\] to Kafka Connect data failed"):
        conv.to_connect_data("t", b"{not json")
    with pytest.raises(DataException, match="Converting byte\\[\\] to Kafka Connect data failed"):
        json_converter(schemas_enable="false").to_connect_data("t", b"\xff\xfe{")


def test_config_validation():
    with pytest.raises(ConfigException) as info:
        json_converter(decimal_format="HEX")
    assert info.value.field == "decimal.format"
    with pytest.raises(ConfigException):
        json_converter(schemas_enable="maybe")
    with pytest.raises(ConfigException):
        json_converter(schemas_cache_size="-1")


def test_schema_cache_is_reused_and_bounded():
    conv = json_converter(schemas_cache_size="2")
    assert conv.from_connect_data("t", PERSON, person()) == conv.from_connect_data("t", PERSON, person())
    assert len(conv._write_by_eq) == 1
    equal_copy = SchemaBuilder.struct().name("com.example.Person").field("id", INT32_SCHEMA) \
        .field("name", OPTIONAL_STRING_SCHEMA).field("address", ADDRESS).field("tags", array_schema(STRING_SCHEMA)) \
        .build()
    assert equal_copy is not PERSON and equal_copy == PERSON
    assert conv.from_connect_data("t", equal_copy, Struct(equal_copy, person().values)) == \
        conv.from_connect_data("t", PERSON, person())
    assert len(conv._write_by_eq) == 1
    for n in range(5):
        schema = SchemaBuilder.struct().name(f"s{n}").field("x", INT8_SCHEMA).build()
        data = conv.from_connect_data("t", schema, {"x": n})
        assert conv.to_connect_data("t", data) == SchemaAndValue(schema, Struct(schema, {"x": n}))
    assert len(conv._write_by_eq) <= 2 and len(conv._read_by_text) <= 2
    uncached = json_converter(schemas_cache_size="0")
    assert uncached.to_connect_data("t", uncached.from_connect_data("t", PERSON, person())).value == person()


def test_json_converter_is_a_header_converter():
    conv = JsonConverter()
    conv.configure({"schemas.enable": "false"})
    data = conv.from_connect_header("t", "h", None, {"a": [1, 2]})
    assert data == b'{"a":[1,2]}'
    assert conv.to_connect_header("t", "h", data) == SchemaAndValue(None, {"a": [1, 2]})
    assert isinstance(conv, Converter) and isinstance(conv, HeaderConverter)


# -- StringConverter and ByteArrayConverter ---------------------------------------------------------

def test_string_converter():
    conv = StringConverter()
    conv.configure({}, False)
    assert conv.from_connect_data("t", STRING_SCHEMA, "héllo") == "héllo".encode()
    assert conv.from_connect_data("t", None, None) is None
    assert conv.from_connect_data("t", None, 12) == b"12"
    assert conv.from_connect_data("t", None, True) == b"true"  # Java's Boolean.toString
    assert conv.from_connect_data("t", None, 1e10) == b"1.0E10"  # Java's Double.toString
    assert conv.from_connect_data("t", None, [1, None]) == b"[1, null]"
    assert conv.to_connect_data("t", "héllo".encode()) == SchemaAndValue(OPTIONAL_STRING_SCHEMA, "héllo")
    assert conv.to_connect_data("t", None) == SchemaAndValue(OPTIONAL_STRING_SCHEMA, None)

    latin = StringConverter()
    latin.configure({"converter.encoding": "ISO-8859-1"}, True)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"
    assert latin.to_connect_data("t", b"\xe9").value == "é"
    assert latin.from_connect_header("t", "h", None, "é") == b"\xe9"
    assert latin.to_connect_header("t", "h", b"\xe9") == SchemaAndValue(OPTIONAL_STRING_SCHEMA, "é")
    with pytest.raises(ConfigException):
        StringConverter().configure({"converter.encoding": "no-such-charset"}, False)


def test_byte_array_converter():
    conv = ByteArrayConverter()
    conv.configure({}, False)
    assert conv.from_connect_data("t", BYTES_SCHEMA, b"\x00\x01") == b"\x00\x01"
    assert conv.from_connect_data("t", None, bytearray(b"ab")) == b"ab"
    assert conv.from_connect_data("t", None, None) is None
    assert conv.to_connect_data("t", b"\xff") == SchemaAndValue(OPTIONAL_BYTES_SCHEMA, b"\xff")
    assert conv.to_connect_data("t", None) == SchemaAndValue(OPTIONAL_BYTES_SCHEMA, None)
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter: STRING"):
        conv.from_connect_data("t", STRING_SCHEMA, b"x")
    with pytest.raises(DataException, match="ByteArrayConverter is not compatible with objects of type"):
        conv.from_connect_data("t", None, "text")
    assert conv.to_connect_header("t", "h", conv.from_connect_header("t", "h", None, b"x")).value == b"x"


# -- SimpleHeaderConverter ----------------------------------------------------------------------------

@pytest.fixture
def headers() -> SimpleHeaderConverter:
    conv = SimpleHeaderConverter()
    conv.configure({})
    return conv


@pytest.mark.parametrize(("value", "written", "schema", "read"), [
    ("hello world", b"hello world", STRING_SCHEMA, "hello world"),
    ("", b"", STRING_SCHEMA, ""),
    (True, b"true", BOOLEAN_SCHEMA, True),
    (100, b"100", INT8_SCHEMA, 100),
    (1000, b"1000", INT16_SCHEMA, 1000),
    (100000, b"100000", INT32_SCHEMA, 100000),
    (1 << 40, b"1099511627776", INT64_SCHEMA, 1 << 40),
    (-1.5, b"-1.5", FLOAT32_SCHEMA, -1.5),
    (2.5e-7, b"2.5E-7", FLOAT32_SCHEMA, 2.5e-7),
    (1e300, b"1.0E300", FLOAT64_SCHEMA, 1e300),
    (b"\x00\x01", b"AAE=", STRING_SCHEMA, "AAE="),
    ([1, 2, 3], b"[1,2,3]", array_schema(INT8_SCHEMA), [1, 2, 3]),
    (["a", 'b"c'], b'["a","b\\"c"]', array_schema(STRING_SCHEMA), ["a", 'b"c']),
    ({"a": 1, "b": 300}, b'{"a":1,"b":300}', map_schema(STRING_SCHEMA, INT16_SCHEMA), {"a": 1, "b": 300}),
    ({"a": [1.5, 2]}, b'{"a":[1.5,2]}', map_schema(STRING_SCHEMA, array_schema(FLOAT32_SCHEMA)),
     {"a": [1.5, 2.0]}),
    (dt.date(2024, 2, 29), b"2024-02-29", DATE_SCHEMA, dt.date(2024, 2, 29)),
    (dt.time(12, 34, 56, 789000), b"12:34:56.789Z", TIME_SCHEMA, dt.time(12, 34, 56, 789000)),
    (dt.datetime(2024, 2, 29, 12, 34, 56, 789000, tzinfo=UTC), b"2024-02-29T12:34:56.789Z", TIMESTAMP_SCHEMA,
     dt.datetime(2024, 2, 29, 12, 34, 56, 789000, tzinfo=UTC)),
    (Decimal("123456789012345678901234567890"), b"123456789012345678901234567890", decimal_schema(0),
     Decimal("123456789012345678901234567890")),
])
def test_simple_header_converter_round_trip(headers, value, written, schema, read):
    data = headers.from_connect_header("t", "h", None, value)
    assert data == written
    assert headers.to_connect_header("t", "h", data) == SchemaAndValue(schema, read)


@pytest.mark.parametrize("text", ["1,2", "true}", "[1,2", "{a", "12 apples", "-", "[1] trailing", "2024-13-45"])
def test_simple_header_converter_keeps_odd_text_as_a_string(headers, text):
    assert headers.to_connect_header("t", "h", text.encode()) == SchemaAndValue(STRING_SCHEMA, text)


@pytest.mark.parametrize(("text", "schema", "value"), [
    ('["a:b", "c,d"]', array_schema(STRING_SCHEMA), ["a:b", "c,d"]),
    ('{"t":12:34:56.789Z}', map_schema(STRING_SCHEMA, TIME_SCHEMA), {"t": dt.time(12, 34, 56, 789000)}),
    ("[2024-01-01,2024-01-02]", array_schema(DATE_SCHEMA), [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]),
    ("[1, 2.5, 3]", array_schema(FLOAT32_SCHEMA), [1.0, 2.5, 3.0]),
    ('{"a":{"b":[1,2]}}', map_schema(STRING_SCHEMA, map_schema(STRING_SCHEMA, array_schema(INT8_SCHEMA))),
     {"a": {"b": [1, 2]}}),
    ("{1:true}", map_schema(INT8_SCHEMA, BOOLEAN_SCHEMA), {1: True}),
    (" [1] ", array_schema(INT8_SCHEMA), [1]),
    ("1e3", INT16_SCHEMA, 1000),
    ("1.0", INT8_SCHEMA, 1),
    ("+7", INT8_SCHEMA, 7),
    ("1e400", decimal_schema(-400), Decimal("1e400")),
    ("false", BOOLEAN_SCHEMA, False),
])
def test_simple_header_converter_inference(headers, text, schema, value):
    assert headers.to_connect_header("t", "h", text.encode()) == SchemaAndValue(schema, value)


def test_simple_header_converter_nulls_and_structs(headers):
    assert headers.from_connect_header("t", "h", None, None) is None
    assert headers.to_connect_header("t", "h", None) == SchemaAndValue(None, None)
    assert headers.from_connect_header("t", "h", ADDRESS, Struct(ADDRESS, {"street": "x", "zip": 1})) == \
        b'{"street":"x","zip":1}'
    assert headers.to_connect_header("t", "h", b"[1,null]") == \
        SchemaAndValue(array_schema(Schema(SchemaType.INT8, optional=True)), [1, None])


# -- properties ---------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(JSON_VALUES.filter(lambda v: v is not None))
def test_schemaless_bytes_equal_compact_json_and_round_trip(value):
    plain = json_converter(schemas_enable="false")
    data = plain.from_connect_data("t", None, value)
    assert data == json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    assert plain.to_connect_data("t", data) == SchemaAndValue(None, value)
    enveloped = json_converter()
    assert enveloped.to_connect_data("t", enveloped.from_connect_data("t", None, value)) == SchemaAndValue(None, value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_garbage_in_is_only_ever_a_data_exception(data):
    for conv in (json_converter(), json_converter(schemas_enable="false")):
        try:
            conv.to_connect_data("t", data)
        except DataException:
            pass
    SimpleHeaderConverter().to_connect_header("t", "h", data)


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1) | st.lists(st.integers(-1000, 1000), min_size=1))
def test_header_integers_round_trip(value):
    conv = SimpleHeaderConverter()
    assert conv.to_connect_header("t", "h", conv.from_connect_header("t", "h", None, value)).value == value


# -- plugin registration ---------------------------------------------------------------------------------

def test_hook_returns_all_converters_with_kafka_aliases():
    import headwater.connect.builtins as module

    pm = pluggy.PluginManager("headwater")
    pm.add_hookspecs(HeadwaterSpec)
    pm.register(module)
    (registered,) = pm.hook.headwater_converters()
    assert registered == CONVERTERS
    aliases = {alias: cls for cls in CONVERTERS for alias in cls.aliases}
    assert aliases == {
        "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
        "headwater.connect.converters.json_converter.JsonConverter": JsonConverter,
        "org.apache.kafka.connect.storage.StringConverter": StringConverter,
        "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
        "org.apache.kafka.connect.storage.SimpleHeaderConverter": SimpleHeaderConverter,
    }
    for cls in CONVERTERS:
        assert hasattr(cls, "from_connect_header")
