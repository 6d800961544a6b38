"""Kafka Connect's built-in SMTs and predicates (connect/transforms)."""

from __future__ import annotations

import base64
import datetime as dt
import struct as pystruct
from decimal import Decimal
from typing import Any

import pluggy
import pytest

import headwater.connect.transforms as transforms
from headwater.connect.api import ConfigException, DataException, Header, SinkRecord, SourceRecord, Struct
from headwater.connect.api.data import (
    BOOLEAN_SCHEMA,
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    SchemaType,
    array_schema,
)
from headwater.connect.api.hookspecs import HeadwaterSpec
from headwater.connect.api.transforms import Predicate, Transformation
from headwater.connect.transforms import (
    CastKey,
    CastValue,
    DropHeaders,
    ExtractFieldKey,
    ExtractFieldValue,
    Filter,
    FlattenKey,
    FlattenValue,
    HasHeaderKey,
    HeaderFromKey,
    HeaderFromValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldKey,
    InsertFieldValue,
    InsertHeader,
    MaskFieldKey,
    MaskFieldValue,
    RecordIsTombstone,
    RegexRouter,
    ReplaceFieldKey,
    ReplaceFieldValue,
    SetSchemaMetadataKey,
    SetSchemaMetadataValue,
    TimestampConverterKey,
    TimestampConverterValue,
    TimestampRouter,
    TopicNameMatches,
    ValueToKey,
)
from headwater.connect.transforms.dateformat import JavaDateFormat
from headwater.connect.transforms.fields import parse_field_path
from headwater.connect.transforms.routing import java_regex
from headwater.connect.transforms.util import DECIMAL_NAME, date_schema, time_schema, timestamp_schema

UTC = dt.UTC
TS_MS = 1_700_000_000_123  # 2023-11-14T22:13:20.123Z
TS = dt.datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=UTC)


def make(cls: type, **props: Any) -> Any:
    t = cls()
    t.configure({k.replace("_", "."): v for k, v in props.items()})
    return t


def configured(cls: type, props: dict[str, Any]) -> Any:
    t = cls()
    t.configure(props)
    return t


def rec(
    value: Any = None,
    key: Any = None,
    value_schema: Schema | None = None,
    key_schema: Schema | None = None,
    topic: str = "orders",
    **kw: Any,
) -> SourceRecord:
    return SourceRecord(
        topic=topic, value=value, key=key, value_schema=value_schema, key_schema=key_schema, **kw
    )


def config_error(cls: type, props: dict[str, Any]) -> ConfigException:
    with pytest.raises(ConfigException) as info:
        configured(cls, props)
    return info.value


def f32(x: float) -> float:
    return pystruct.unpack("f", pystruct.pack("f", x))[0]


PERSON = (
    SchemaBuilder.struct()
    .name("Person")
    .version(3)
    .field("name", STRING_SCHEMA)
    .field("age", OPTIONAL_INT32_SCHEMA)
    .field("score", FLOAT64_SCHEMA)
    .build()
)


def person(name: str = "ann", age: int | None = 42, score: float = 1.5) -> Struct:
    return Struct(PERSON, {"name": name, "age": age, "score": score})


# -- registration -------------------------------------------------------------------------------------------


def test_lists_and_aliases() -> None:
    assert len(transforms.TRANSFORMS) == 26 and len(transforms.PREDICATES) == 3
    assert all(issubclass(c, Transformation) for c in transforms.TRANSFORMS)
    assert all(issubclass(c, Predicate) for c in transforms.PREDICATES)
    assert InsertFieldValue.aliases[0] == "org.apache.kafka.connect.transforms.InsertField$Value"
    assert "InsertField$Value" in InsertFieldValue.aliases
    assert TopicNameMatches.aliases[0] == "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"
    java_names = [c.aliases[0] for c in transforms.TRANSFORMS + transforms.PREDICATES]
    assert len(set(java_names)) == len(java_names)
    for cls in transforms.TRANSFORMS:
        short = cls.aliases[0].rsplit(".", 1)[1]
        assert cls.aliases == (cls.aliases[0], short)


def test_pluggy_hooks() -> None:
    pm = pluggy.PluginManager("headwater")
    pm.add_hookspecs(HeadwaterSpec)
    from headwater.connect import builtins

    pm.register(builtins)
    assert pm.hook.headwater_transforms() == [transforms.TRANSFORMS]
    assert pm.hook.headwater_predicates() == [transforms.PREDICATES]


def test_missing_required_key_names_the_key() -> None:
    err = config_error(ExtractFieldValue, {})
    assert err.field == "field" and '"field"' in str(err)


# -- Cast ---------------------------------------------------------------------------------------------------


def test_cast_schemaless_fields_doc_example() -> None:
    t = make(CastValue, spec="age:int64,score:float32")
    original = {"age": "42", "score": 1.1, "name": "ann"}
    out = t.apply(rec(original))
    assert out.value == {"age": 42, "score": f32(1.1), "name": "ann"}
    assert original["age"] == "42"


def test_cast_whole_value_schemaless_and_key() -> None:
    assert make(CastValue, spec="int32").apply(rec("42")).value == 42
    out = make(CastKey, spec="string").apply(rec("v", key=7))
    assert out.key == "7" and out.value == "v"


def test_cast_whole_value_with_schema() -> None:
    out = make(CastValue, spec="int32").apply(rec(2**40 + 5, value_schema=INT64_SCHEMA))
    assert out.value_schema.type == SchemaType.INT32 and out.value == 5
    out = make(CastValue, spec="string").apply(rec(1.5, value_schema=FLOAT64_SCHEMA))
    assert out.value_schema == STRING_SCHEMA and out.value == "1.5"


def test_cast_struct_fields_updates_schema() -> None:
    t = make(CastValue, spec="age:int64,score:float32,name:string")
    out = t.apply(rec(person(), value_schema=PERSON))
    schema = out.value_schema
    assert schema.name == "Person" and schema.version == 3
    assert schema.field("age").schema.type == SchemaType.INT64 and schema.field("age").schema.optional
    assert schema.field("score").schema.type == SchemaType.FLOAT32
    assert out.value.to_dict() == {"name": "ann", "age": 42, "score": 1.5}
    assert out.value.schema is schema
    again = t.apply(rec(person("bob", None), value_schema=PERSON))
    assert again.value_schema is schema and again.value.values["age"] is None


def test_cast_number_semantics() -> None:
    assert make(CastValue, spec="int8").apply(rec(300)).value == 44  # Java narrowing wraps
    assert make(CastValue, spec="int32").apply(rec(3.99)).value == 3
    assert make(CastValue, spec="int32").apply(rec(1e20)).value == 2**31 - 1
    assert make(CastValue, spec="boolean").apply(rec("TRUE")).value is True
    assert make(CastValue, spec="boolean").apply(rec("yes")).value is False
    assert make(CastValue, spec="boolean").apply(rec(0.5)).value is False
    assert make(CastValue, spec="float64").apply(rec(True)).value == 1.0
    assert make(CastValue, spec="string").apply(rec(False)).value == "false"
    assert make(CastValue, spec="string").apply(rec(1e10)).value == "1.0E10"
    for bad in ("300", "abc", "1.5"):
        with pytest.raises(DataException, match="out of range"):
            make(CastValue, spec="int8").apply(rec(bad))


def test_cast_bytes_and_logical_types() -> None:
    out = make(CastValue, spec="string").apply(rec(b"\x00\x01hi", value_schema=BYTES_SCHEMA))
    assert out.value == base64.b64encode(b"\x00\x01hi").decode()
    out = make(CastValue, spec="string").apply(rec(TS, value_schema=timestamp_schema()))
    assert out.value == "2023-11-14T22:13:20.123Z" and out.value_schema.name is None
    out = make(CastValue, spec="int64").apply(rec(TS, value_schema=timestamp_schema()))
    assert out.value == TS_MS and out.value_schema.type == SchemaType.INT64
    decimal_schema = Schema(SchemaType.BYTES, name=DECIMAL_NAME, parameters=(("scale", "2"),))
    assert (
        make(CastValue, spec="float64").apply(rec(Decimal("12.34"), value_schema=decimal_schema)).value
        == 12.34
    )
    with pytest.raises(DataException, match="Unexpected type in Cast transformation: bytes"):
        make(CastValue, spec="int32").apply(rec(b"x", value_schema=BYTES_SCHEMA))


def test_cast_unsupported_inputs() -> None:
    with pytest.raises(DataException, match="does not support casting from MAP"):
        make(CastValue, spec="a:string").apply(rec({"a": {"nested": 1}}))
    schema = SchemaBuilder.struct().field("tags", array_schema(STRING_SCHEMA)).build()
    with pytest.raises(DataException, match="does not support casting from ARRAY"):
        make(CastValue, spec="tags:string").apply(rec(Struct(schema, {"tags": ["a"]}), value_schema=schema))
    with pytest.raises(
        DataException, match="Only Map objects supported in absence of schema for \\[cast types\\]"
    ):
        make(CastValue, spec="a:int32").apply(rec("text"))


def test_cast_tombstones_pass_through() -> None:
    r = rec(None, value_schema=PERSON)
    assert make(CastValue, spec="age:int64").apply(r) is r
    r = rec("v", key=None)
    assert make(CastKey, spec="int32").apply(r) is r


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("", "at least one field"),
        ("age:foo", "Invalid type found in casting"),
        ("int32,age:int64", "may ony specify a single cast"),
        ("age:bytes", "does not support casting to BYTES"),
        ("a:b:c", "Invalid cast mapping"),
    ],
)
def test_cast_config_errors(spec: str, needle: str) -> None:
    err = config_error(CastValue, {"spec": spec})
    assert err.field == "spec" and needle in str(err)


# -- DropHeaders --------------------------------------------------------------------------------------------


def test_drop_headers() -> None:
    headers = [Header("a", 1), Header("b", 2), Header("a", 3), Header("c", 4)]
    r = rec("v", headers=headers)
    out = make(DropHeaders, headers="a, c").apply(r)
    assert [h.key for h in out.headers] == ["b"]
    assert len(r.headers) == 4
    assert config_error(DropHeaders, {"headers": ""}).field == "headers"


# -- ExtractField -------------------------------------------------------------------------------------------


def test_extract_field_schemaless_and_schema() -> None:
    assert make(ExtractFieldValue, field="id").apply(rec({"id": 7, "x": 1})).value == 7
    assert make(ExtractFieldValue, field="missing").apply(rec({"id": 7})).value is None
    out = make(ExtractFieldValue, field="name").apply(rec(person(), value_schema=PERSON))
    assert out.value == "ann" and out.value_schema == STRING_SCHEMA
    out = make(ExtractFieldKey, field="id").apply(rec("v", key={"id": 1}))
    assert out.key == 1 and out.value == "v"


def test_extract_field_nulls_pass_and_errors() -> None:
    assert make(ExtractFieldValue, field="id").apply(rec(None)).value is None
    out = make(ExtractFieldValue, field="age").apply(rec(None, value_schema=PERSON))
    assert out.value is None and out.value_schema == OPTIONAL_INT32_SCHEMA
    with pytest.raises(DataException) as info:
        make(ExtractFieldValue, field="id").apply(rec("plain"))
    assert (
        str(info.value)
        == "Only Map objects supported in absence of schema for [field extraction], found: str"
    )
    with pytest.raises(DataException, match="Unknown field: nope"):
        make(ExtractFieldValue, field="nope").apply(rec(person(), value_schema=PERSON))


def test_extract_field_replace_null_with_default() -> None:
    schema = SchemaBuilder.struct().field("n", Schema(SchemaType.INT32, True, default=5)).build()
    value = Struct(schema, {"n": None})
    assert make(ExtractFieldValue, field="n").apply(rec(value, value_schema=schema)).value == 5
    t = configured(ExtractFieldValue, {"field": "n", "replace.null.with.default": "false"})
    assert t.apply(rec(value, value_schema=schema)).value is None


def test_extract_field_v2_paths() -> None:
    assert parse_field_path("a.b", "V1") == ["a.b"]
    assert parse_field_path("a.b.c", "V2") == ["a", "b", "c"]
    assert parse_field_path("`foo.bar`.baz", "V2") == ["foo.bar", "baz"]
    assert parse_field_path("a.", "V2") == ["a", ""]
    t = configured(ExtractFieldValue, {"field": "a.b", "field.syntax.version": "v2"})
    assert t.apply(rec({"a": {"b": 3}})).value == 3
    assert t.apply(rec({"a": None})).value is None
    inner = SchemaBuilder.struct().field("b", INT64_SCHEMA).build()
    outer = SchemaBuilder.struct().field("a", inner).build()
    out = t.apply(rec(Struct(outer, {"a": Struct(inner, {"b": 9})}), value_schema=outer))
    assert out.value == 9 and out.value_schema == INT64_SCHEMA
    v1 = make(ExtractFieldValue, field="a.b")
    assert v1.apply(rec({"a.b": 1, "a": {"b": 2}})).value == 1


def test_extract_field_config_errors() -> None:
    assert (
        config_error(ExtractFieldValue, {"field": "x", "field.syntax.version": "V3"}).field
        == "field.syntax.version"
    )
    err = config_error(ExtractFieldValue, {"field": "`a.b", "field.syntax.version": "V2"})
    assert err.field == "field" and "Incomplete backtick pair" in str(err)


# -- Filter and predicates ---------------------------------------------------------------------------------


def test_filter_drops_everything() -> None:
    assert make(Filter).apply(rec("v")) is None
    assert make(Filter).apply(rec(None)) is None


def test_has_header_key() -> None:
    p = make(HasHeaderKey, name="trace")
    assert p.test(rec("v", headers=[Header("x", 1), Header("trace", None)]))
    assert not p.test(rec("v", headers=[Header("x", 1)]))
    assert config_error(HasHeaderKey, {"name": ""}).field == "name"
    assert config_error(HasHeaderKey, {}).field == "name"


def test_record_is_tombstone() -> None:
    p = make(RecordIsTombstone)
    assert p.test(rec(None, key="k")) and not p.test(rec({"a": 1}))


def test_topic_name_matches_is_a_full_match() -> None:
    p = make(TopicNameMatches, pattern="orders-.*")
    assert p.test(rec("v", topic="orders-eu")) and not p.test(rec("v", topic="old-orders-eu"))
    assert not make(TopicNameMatches, pattern="orders").test(rec("v", topic="orders2"))
    assert make(TopicNameMatches, pattern="(?<region>eu|us)-.*").test(rec("v", topic="eu-x"))
    assert config_error(TopicNameMatches, {"pattern": "("}).field == "pattern"
    assert config_error(TopicNameMatches, {"pattern": ""}).field == "pattern"


# -- Flatten ------------------------------------------------------------------------------------------------


def test_flatten_schemaless() -> None:
    value = {"a": {"b": {"c": 1}, "d": [1, 2]}, "e": None, "f": "x", "g": {}}
    assert make(FlattenValue).apply(rec(value)).value == {"a.b.c": 1, "a.d": [1, 2], "e": None, "f": "x"}
    assert make(FlattenValue, delimiter="_").apply(rec(value)).value["a_b_c"] == 1
    assert make(FlattenKey).apply(rec("v", key={"k": {"id": 1}})).key == {"k.id": 1}
    with pytest.raises(DataException, match="not supported by Connect's data API"):
        make(FlattenValue).apply(rec({"a": {1, 2}}))


def test_flatten_structs() -> None:
    address = (
        SchemaBuilder.struct()
        .name("Address")
        .optional()
        .field("city", STRING_SCHEMA)
        .field("zip", OPTIONAL_INT32_SCHEMA)
        .build()
    )
    schema = (
        SchemaBuilder.struct()
        .name("Customer")
        .field("id", INT64_SCHEMA)
        .field("address", address)
        .field("tags", array_schema(STRING_SCHEMA))
        .build()
    )
    value = Struct(schema, {"id": 1, "address": Struct(address, {"city": "Oslo", "zip": 150}), "tags": ["a"]})
    t = make(FlattenValue)
    out = t.apply(rec(value, value_schema=schema))
    s = out.value_schema
    assert [f.name for f in s.fields] == ["id", "address.city", "address.zip", "tags"]
    assert s.name == "Customer" and not s.field("id").schema.optional
    assert s.field("address.city").schema.optional  # the parent struct is optional
    assert s.field("tags").schema.value_schema == STRING_SCHEMA
    assert out.value.to_dict() == {"id": 1, "address.city": "Oslo", "address.zip": 150, "tags": ["a"]}
    empty = t.apply(rec(Struct(schema, {"id": 2, "address": None, "tags": []}), value_schema=schema))
    assert empty.value_schema is s and empty.value.to_dict()["address.city"] is None


def test_flatten_tombstone_passes() -> None:
    r = rec(None, value_schema=PERSON)
    assert make(FlattenValue).apply(r) is r


# -- HeaderFrom ---------------------------------------------------------------------------------------------


def test_header_from_schemaless_copy_and_move() -> None:
    r = rec({"id": 1, "name": "ann"}, headers=[Header("old", 0)])
    copied = make(HeaderFromValue, fields="id,name", headers="h_id,h_name", operation="copy").apply(r)
    assert copied.value == {"id": 1, "name": "ann"}
    assert [(h.key, h.value) for h in copied.headers] == [("old", 0), ("h_id", 1), ("h_name", "ann")]
    moved = make(HeaderFromValue, fields="id", headers="h_id", operation="move").apply(r)
    assert moved.value == {"name": "ann"} and moved.headers[-1] == Header("h_id", 1, None)
    assert len(r.headers) == 1 and r.value == {"id": 1, "name": "ann"}
    key = make(HeaderFromKey, fields="k", headers="hk", operation="copy").apply(rec("v", key={"k": "x"}))
    assert key.headers[-1].value == "x"


def test_header_from_with_schema() -> None:
    t = make(HeaderFromValue, fields="age", headers="h_age", operation="move")
    out = t.apply(rec(person(), value_schema=PERSON))
    assert [f.name for f in out.value_schema.fields] == ["name", "score"]
    assert out.value.to_dict() == {"name": "ann", "score": 1.5}
    assert out.headers[-1] == Header("h_age", 42, OPTIONAL_INT32_SCHEMA)
    copy = make(HeaderFromValue, fields="name", headers="n", operation="copy").apply(
        rec(person(), value_schema=PERSON)
    )
    assert copy.value_schema is PERSON and copy.headers[-1] == Header("n", "ann", STRING_SCHEMA)


def test_header_from_config_errors() -> None:
    err = config_error(HeaderFromValue, {"fields": "a,b", "headers": "x", "operation": "copy"})
    assert err.field == "headers" and "same number of elements" in str(err)
    assert (
        config_error(HeaderFromValue, {"fields": "a", "headers": "x", "operation": "cut"}).field
        == "operation"
    )


# -- HoistField ---------------------------------------------------------------------------------------------


def test_hoist_field() -> None:
    assert make(HoistFieldValue, field="line").apply(rec("hello")).value == {"line": "hello"}
    out = make(HoistFieldValue, field="line").apply(rec("hello", value_schema=STRING_SCHEMA))
    assert out.value_schema.field("line").schema == STRING_SCHEMA and out.value.get("line") == "hello"
    out = make(HoistFieldKey, field="id").apply(rec("v", key=5, key_schema=INT64_SCHEMA))
    assert out.key.to_dict() == {"id": 5} and out.value == "v"
    assert make(HoistFieldValue, field="line").apply(rec(None)).value == {"line": None}


# -- InsertField --------------------------------------------------------------------------------------------


def test_insert_field_doc_example() -> None:
    t = make(InsertFieldValue, static_field="data_source", static_value="test-file-source")
    assert t.apply(rec({"line": "x"})).value == {"line": "x", "data_source": "test-file-source"}


def test_insert_field_schemaless_metadata() -> None:
    t = configured(
        InsertFieldValue,
        {"topic.field": "t", "partition.field": "p", "offset.field": "o", "timestamp.field": "ts"},
    )
    r = SinkRecord(topic="orders", value={"a": 1}, kafka_partition=3, kafka_offset=99, timestamp=TS_MS)
    assert t.apply(r).value == {"a": 1, "t": "orders", "p": 3, "o": 99, "ts": TS_MS}
    with pytest.raises(DataException, match="Only SinkRecord supported for \\[field insertion\\]"):
        t.apply(rec({"a": 1}))


def test_insert_field_with_schema() -> None:
    t = configured(
        InsertFieldValue,
        {
            "topic.field": "t!",
            "partition.field": "p?",
            "timestamp.field": "ts",
            "static.field": "src",
            "static.value": "file",
        },
    )
    out = t.apply(rec(person(), value_schema=PERSON, kafka_partition=1, timestamp=TS_MS))
    s = out.value_schema
    assert s.name == "Person" and [f.name for f in s.fields] == [
        "name",
        "age",
        "score",
        "t",
        "p",
        "ts",
        "src",
    ]
    assert s.field("t").schema == STRING_SCHEMA and s.field("p").schema == OPTIONAL_INT32_SCHEMA
    assert s.field("ts").schema == timestamp_schema(True) and s.field("src").schema == OPTIONAL_STRING_SCHEMA
    assert out.value.get("ts") == TS and out.value.get("t") == "orders" and out.value.get("name") == "ann"
    no_partition = t.apply(rec(person(), value_schema=PERSON))
    assert no_partition.value_schema is s and no_partition.value.get("p") is None


def test_insert_field_key_and_tombstone() -> None:
    out = make(InsertFieldKey, topic_field="topic").apply(rec("v", key={"id": 1}))
    assert out.key == {"id": 1, "topic": "orders"}
    r = rec(None, value_schema=PERSON)
    assert make(InsertFieldValue, topic_field="t").apply(r) is r
    with pytest.raises(DataException, match="found: int"):
        make(InsertFieldValue, topic_field="t").apply(rec(5))


def test_insert_field_config_errors() -> None:
    assert "No field insertion configured" in str(config_error(InsertFieldValue, {}))
    assert config_error(InsertFieldValue, {"static.field": "src"}).field == "static.value"


# -- InsertHeader -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "literal,schema,value",
    [
        ("hello world", STRING_SCHEMA, "hello world"),
        ("true", BOOLEAN_SCHEMA, True),
        ("42", INT8_SCHEMA, 42),
        ("1000", INT16_SCHEMA, 1000),
        ("100000", INT32_SCHEMA, 100000),
        ("10000000000", INT64_SCHEMA, 10000000000),
        ("1.5", FLOAT32_SCHEMA, 1.5),
        ("2023-11-14", date_schema(), dt.date(2023, 11, 14)),
        ("[1, 2]", array_schema(INT8_SCHEMA), [1, 2]),
    ],
)
def test_insert_header_literal(literal: str, schema: Schema, value: Any) -> None:
    r = rec("v", headers=[Header("x", 1)])
    out = make(InsertHeader, header="h", value_literal=literal).apply(r)
    assert out.headers[-1] == Header("h", value, schema) and len(r.headers) == 1


def test_insert_header_config() -> None:
    assert config_error(InsertHeader, {"header": "h"}).field == "value.literal"


# -- MaskField ----------------------------------------------------------------------------------------------


def test_mask_field_schemaless_null_equivalents() -> None:
    value = {
        "i": 5,
        "f": 1.5,
        "b": True,
        "s": "secret",
        "l": [1],
        "m": {"a": 1},
        "n": None,
        "d": Decimal("2"),
        "keep": "x",
    }
    out = make(MaskFieldValue, fields="i,f,b,s,l,m,n,d").apply(rec(value))
    assert out.value == {
        "i": 0,
        "f": 0.0,
        "b": False,
        "s": "",
        "l": [],
        "m": {},
        "n": None,
        "d": Decimal(0),
        "keep": "x",
    }
    assert value["s"] == "secret"
    with pytest.raises(DataException, match="Cannot mask value of type"):
        make(MaskFieldValue, fields="x").apply(rec({"x": b"raw"}))


def test_mask_field_replacement_doc_example() -> None:
    t = make(MaskFieldValue, fields="ssn", replacement="***-***-****")
    assert t.apply(rec({"ssn": "123-45-6789"})).value == {"ssn": "***-***-****"}
    assert make(MaskFieldValue, fields="n", replacement="123").apply(rec({"n": 7})).value == {"n": 123}
    with pytest.raises(DataException, match="Unable to convert"):
        make(MaskFieldValue, fields="n", replacement="abc").apply(rec({"n": 7}))
    with pytest.raises(DataException, match="with custom replacement"):
        make(MaskFieldValue, fields="b", replacement="x").apply(rec({"b": True}))


def test_mask_field_with_schema_and_key() -> None:
    out = make(MaskFieldValue, fields="name,age").apply(rec(person(), value_schema=PERSON))
    assert out.value_schema is PERSON and out.value.to_dict() == {"name": "", "age": 0, "score": 1.5}
    small = SchemaBuilder.struct().field("n", INT8_SCHEMA).build()
    with pytest.raises(DataException, match="Unable to convert"):
        make(MaskFieldValue, fields="n", replacement="1000").apply(
            rec(Struct(small, {"n": 1}), value_schema=small)
        )
    assert make(MaskFieldKey, fields="id").apply(rec("v", key={"id": 9})).key == {"id": 0}
    assert config_error(MaskFieldValue, {"fields": "a", "replacement": ""}).field == "replacement"
    assert config_error(MaskFieldValue, {}).field == "fields"


# -- RegexRouter --------------------------------------------------------------------------------------------


def test_regex_router_doc_example() -> None:
    t = make(RegexRouter, regex="(.*)-(.*)", replacement="$2")
    assert t.apply(rec("v", topic="prefix-orders")).topic == "orders"
    assert t.apply(rec("v", topic="a-b-c")).topic == "c"  # greedy group 1
    unchanged = rec("v", topic="noseparator")
    assert t.apply(unchanged) is unchanged


def test_regex_router_java_replacement_syntax() -> None:
    assert make(RegexRouter, regex="abc", replacement="x").apply(rec("v", topic="abcd")).topic == "abcd"
    t = make(RegexRouter, regex="(?<db>\\w+)\\.(?<table>\\w+)", replacement="${table}_from_$1\\$")
    assert t.apply(rec("v", topic="shop.orders")).topic == "orders_from_shop$"
    t = make(RegexRouter, regex="(a)(b)?", replacement="[$2]$10")
    assert (
        t.apply(rec("v", topic="a")).topic == "[]a0"
    )  # $10 is group 1 then "0"; an unmatched group is empty
    assert (
        make(RegexRouter, regex="(.*)", replacement="$1-routed").apply(rec("v", topic="t")).topic
        == "t-routed"
    )


def test_regex_router_config_errors() -> None:
    assert config_error(RegexRouter, {"regex": "(", "replacement": "x"}).field == "regex"
    err = config_error(RegexRouter, {"regex": "(.*)", "replacement": "$2"})
    assert err.field == "replacement" and "No group 2" in str(err)
    assert config_error(RegexRouter, {"regex": "x", "replacement": "a\\"}).field == "replacement"
    assert config_error(RegexRouter, {"regex": "x"}).field == "replacement"


def test_java_regex_translation() -> None:
    assert java_regex("\\Qa.b\\E").fullmatch("a.b") and not java_regex("\\Qa.b\\E").fullmatch("axb")
    assert java_regex("(?<x>a)\\k<x>").fullmatch("aa")
    assert java_regex("(?<=a)b").search("ab")


# -- ReplaceField -------------------------------------------------------------------------------------------


def test_replace_field_schemaless() -> None:
    value = {"foo": 1, "bar": 2, "abc": 3, "drop": 4}
    t = make(ReplaceFieldValue, renames="foo:renamed_foo,abc:xyz", exclude="drop")
    assert t.apply(rec(value)).value == {"renamed_foo": 1, "bar": 2, "xyz": 3}
    t = make(ReplaceFieldValue, include="foo,bar,drop", exclude="drop")
    assert t.apply(rec(value)).value == {"foo": 1, "bar": 2}
    assert make(ReplaceFieldKey, renames="id:key_id").apply(rec("v", key={"id": 1})).key == {"key_id": 1}


def test_replace_field_legacy_names() -> None:
    value = {"a": 1, "b": 2, "c": 3}
    assert make(ReplaceFieldValue, whitelist="a,b").apply(rec(value)).value == {"a": 1, "b": 2}
    assert make(ReplaceFieldValue, blacklist="a").apply(rec(value)).value == {"b": 2, "c": 3}
    assert configured(ReplaceFieldValue, {"blacklist": "a", "exclude": "b"}).apply(rec(value)).value == {
        "a": 1,
        "c": 3,
    }


def test_replace_field_with_schema() -> None:
    t = make(ReplaceFieldValue, exclude="score", renames="name:full_name")
    out = t.apply(rec(person(), value_schema=PERSON))
    assert out.value_schema.name == "Person" and [f.name for f in out.value_schema.fields] == [
        "full_name",
        "age",
    ]
    assert out.value.to_dict() == {"full_name": "ann", "age": 42}
    assert t.apply(rec(person("bob"), value_schema=PERSON)).value_schema is out.value_schema


def test_replace_field_tombstone_and_errors() -> None:
    r = rec(None, value_schema=PERSON)
    assert make(ReplaceFieldValue, exclude="a").apply(r) is r
    err = config_error(ReplaceFieldValue, {"renames": "foo"})
    assert err.field == "renames" and "Invalid rename mapping: foo" in str(err)


# -- SetSchemaMetadata --------------------------------------------------------------------------------------


def test_set_schema_metadata() -> None:
    t = configured(SetSchemaMetadataValue, {"schema.name": "com.example.Person", "schema.version": "7"})
    out = t.apply(rec(person(), value_schema=PERSON))
    assert out.value_schema.name == "com.example.Person" and out.value_schema.version == 7
    assert out.value_schema.fields == PERSON.fields and out.value.schema is out.value_schema
    assert out.value.to_dict() == person().to_dict()
    key = configured(SetSchemaMetadataKey, {"schema.version": "2"}).apply(
        rec("v", key="k", key_schema=STRING_SCHEMA)
    )
    assert key.key_schema.type == SchemaType.STRING and key.key_schema.version == 2 and key.key == "k"
    tomb = t.apply(rec(None, value_schema=PERSON))
    assert tomb.value is None and tomb.value_schema.name == "com.example.Person"


def test_set_schema_metadata_errors() -> None:
    with pytest.raises(DataException, match="Schema required for \\[updating schema metadata\\]"):
        configured(SetSchemaMetadataValue, {"schema.name": "x"}).apply(rec({"a": 1}))
    assert "Neither schema name nor version configured" in str(config_error(SetSchemaMetadataValue, {}))
    assert config_error(SetSchemaMetadataValue, {"schema.version": "one"}).field == "schema.version"


# -- TimestampConverter -------------------------------------------------------------------------------------


def test_timestamp_converter_string_unix_round_trip() -> None:
    fmt = "yyyy-MM-dd HH:mm:ss.SSS"
    to_unix = configured(TimestampConverterValue, {"target.type": "unix", "format": fmt, "field": "ts"})
    to_string = configured(TimestampConverterValue, {"target.type": "string", "format": fmt, "field": "ts"})
    unix = to_unix.apply(rec({"ts": "2023-11-14 22:13:20.123", "x": 1})).value
    assert unix == {"ts": TS_MS, "x": 1}
    assert to_string.apply(rec(unix)).value == {"ts": "2023-11-14 22:13:20.123", "x": 1}


def test_timestamp_converter_whole_value_types() -> None:
    def conv(target: str, value: Any, schema: Schema | None = None, **extra: str) -> Any:
        t = configured(TimestampConverterValue, {"target.type": target, **extra})
        return t.apply(rec(value, value_schema=schema))

    assert conv("Timestamp", TS_MS).value == TS
    assert conv("unix", TS).value == TS_MS
    assert conv("Date", TS_MS).value == dt.date(2023, 11, 14)
    assert conv("Time", TS_MS).value == dt.time(22, 13, 20, 123_000)
    assert conv("string", TS, format="yyyy-MM-dd'T'HH:mm:ss'Z'").value == "2023-11-14T22:13:20Z"
    out = conv("Timestamp", "2023-11-14", STRING_SCHEMA, format="yyyy-MM-dd")
    assert out.value == dt.datetime(2023, 11, 14, tzinfo=UTC) and out.value_schema == timestamp_schema()
    out = conv("unix", TS, timestamp_schema(True))
    assert out.value == TS_MS and out.value_schema == OPTIONAL_INT64_SCHEMA
    out = conv("Date", dt.date(2023, 11, 14), date_schema())
    assert out.value == dt.date(2023, 11, 14) and out.value_schema == date_schema()
    assert conv("unix", dt.time(0, 0, 1), time_schema()).value == 1000
    assert conv("Timestamp", None, timestamp_schema(True)).value is None
    assert conv("unix", None).value is None


def test_timestamp_converter_unix_precision() -> None:
    def conv(precision: str, target: str, value: Any) -> Any:
        t = configured(TimestampConverterValue, {"target.type": target, "unix.precision": precision})
        return t.apply(rec(value)).value

    assert conv("seconds", "unix", TS) == TS_MS // 1000
    assert conv("microseconds", "unix", TS) == TS_MS * 1000
    assert conv("nanoseconds", "unix", TS) == TS_MS * 1_000_000
    assert conv("seconds", "Timestamp", 1_700_000_000) == TS.replace(microsecond=0)
    assert conv("microseconds", "Timestamp", TS_MS * 1000 + 999) == TS  # Java's Date keeps milliseconds
    assert conv("nanoseconds", "Timestamp", -1_500_000) == dt.datetime(
        1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC
    )


def test_timestamp_converter_struct_field_and_key() -> None:
    schema = (
        SchemaBuilder.struct()
        .name("Event")
        .field("id", INT64_SCHEMA)
        .field("at", Schema(SchemaType.INT64, True))
        .build()
    )
    t = configured(TimestampConverterValue, {"target.type": "Timestamp", "field": "at"})
    out = t.apply(rec(Struct(schema, {"id": 1, "at": TS_MS}), value_schema=schema))
    assert out.value_schema.field("at").schema == timestamp_schema(True) and out.value_schema.name == "Event"
    assert out.value.get("at") == TS and out.value.get("id") == 1
    null_field = t.apply(rec(Struct(schema, {"id": 2, "at": None}), value_schema=schema))
    assert null_field.value.values["at"] is None and null_field.value_schema is out.value_schema
    key = configured(TimestampConverterKey, {"target.type": "unix"}).apply(rec("v", key=TS))
    assert key.key == TS_MS and key.value == "v"


def test_timestamp_converter_errors() -> None:
    err = config_error(TimestampConverterValue, {"target.type": "string"})
    assert err.field == "format" and "requires format option" in str(err)
    assert config_error(TimestampConverterValue, {"target.type": "epoch"}).field == "target.type"
    assert (
        config_error(TimestampConverterValue, {"target.type": "unix", "unix.precision": "hours"}).field
        == "unix.precision"
    )
    assert (
        config_error(TimestampConverterValue, {"target.type": "unix", "format": "yyyy-ww"}).field == "format"
    )
    t = configured(TimestampConverterValue, {"target.type": "unix", "format": "yyyy-MM-dd"})
    with pytest.raises(DataException, match="does not match pattern"):
        t.apply(rec("14/11/2023"))
    with pytest.raises(DataException, match="does not support float"):
        t.apply(rec(1.5))
    with pytest.raises(DataException, match="does not correspond to a known timestamp type"):
        t.apply(rec(True, value_schema=BOOLEAN_SCHEMA))


def test_java_date_format() -> None:
    f = JavaDateFormat("EEE, d MMM yyyy HH:mm:ss Z")
    assert f.format(TS_MS) == "Tue, 14 Nov 2023 22:13:20 +0000"
    assert f.parse("Tue, 14 Nov 2023 23:13:20 +0100") == TS_MS - 123
    iso = JavaDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSSXXX")
    assert iso.parse("2023-11-14T22:13:20.123Z") == TS_MS
    assert iso.parse("2023-11-15T00:13:20.123+02:00") == TS_MS
    assert JavaDateFormat("yyyyMMddHHmm").parse("202311142213") == TS_MS - 20_123
    assert JavaDateFormat("h:mm a").format(TS_MS) == "10:13 PM"
    assert JavaDateFormat("''yy''").format(TS_MS) == "'23'"
    assert JavaDateFormat("yyyy-MM-dd").parse("2023-11-14 trailing text ignored") == TS_MS - 80_000_123
    assert JavaDateFormat("S").format(5) == "5" and JavaDateFormat("SSS").format(5) == "005"
    with pytest.raises(ValueError):
        JavaDateFormat("yyyy-MM-dd").parse("2023-13-01")


# -- TimestampRouter ----------------------------------------------------------------------------------------


def test_timestamp_router() -> None:
    assert make(TimestampRouter).apply(rec("v", topic="logs", timestamp=TS_MS)).topic == "logs-20231114"
    t = configured(TimestampRouter, {"topic.format": "${timestamp}_${topic}", "timestamp.format": "yyyy-MM"})
    assert t.apply(rec("v", topic="logs", timestamp=TS_MS)).topic == "2023-11_logs"
    with pytest.raises(DataException, match="Timestamp missing on record"):
        make(TimestampRouter).apply(rec("v"))
    assert config_error(TimestampRouter, {"timestamp.format": "yyyy-ww"}).field == "timestamp.format"


# -- ValueToKey ---------------------------------------------------------------------------------------------


def test_value_to_key_schemaless() -> None:
    out = make(ValueToKey, fields="id,region").apply(rec({"id": 1, "region": "eu", "x": 0}, key="old"))
    assert out.key == {"id": 1, "region": "eu"} and out.key_schema is None and out.value["x"] == 0
    assert make(ValueToKey, fields="missing").apply(rec({"id": 1})).key == {"missing": None}
    with pytest.raises(DataException, match="copying fields from value to key"):
        make(ValueToKey, fields="id").apply(rec(None))


def test_value_to_key_with_schema() -> None:
    t = make(ValueToKey, fields="name,age")
    out = t.apply(rec(person(), value_schema=PERSON))
    assert [(f.name, f.schema) for f in out.key_schema.fields] == [
        ("name", STRING_SCHEMA),
        ("age", OPTIONAL_INT32_SCHEMA),
    ]
    assert out.key.to_dict() == {"name": "ann", "age": 42} and out.value_schema is PERSON
    with pytest.raises(DataException, match="Field does not exist: nope"):
        make(ValueToKey, fields="nope").apply(rec(person(), value_schema=PERSON))


def test_value_to_key_config_errors() -> None:
    assert config_error(ValueToKey, {"fields": ""}).field == "fields"
    assert "duplicated" in str(config_error(ValueToKey, {"fields": "a,a"}))


# -- general rules ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls,props",
    [
        (CastValue, {"spec": "age:int64"}),
        (FlattenValue, {}),
        (InsertFieldValue, {"topic.field": "t"}),
        (MaskFieldValue, {"fields": "name"}),
        (ReplaceFieldValue, {"renames": "name:n"}),
        (SetSchemaMetadataValue, {"schema.name": "x"}),
        (HoistFieldValue, {"field": "wrapped"}),
    ],
)
def test_input_record_is_not_mutated(cls: type, props: dict[str, Any]) -> None:
    value = person()
    before = dict(value.values)
    r = rec(value, value_schema=PERSON, key="k", headers=[Header("h", 1)])
    out = configured(cls, props).apply(r)
    assert out is not r and value.values == before and r.value_schema is PERSON and r.key == "k"
    assert out.key == "k" and out.headers == r.headers and out.headers is not r.headers


def test_sink_record_fields_survive() -> None:
    r = SinkRecord(topic="t", value={"a": 1}, kafka_partition=2, kafka_offset=10, timestamp=TS_MS)
    out = make(RegexRouter, regex="t", replacement="u").apply(r)
    assert isinstance(out, SinkRecord) and out.topic == "u" and out.original_topic == "t"
    assert out.kafka_offset == 10 and out.timestamp == TS_MS


def test_float_schema_cast_round_trip() -> None:
    out = make(CastValue, spec="string").apply(rec(f32(0.1), value_schema=FLOAT32_SCHEMA))
    assert out.value == "0.1"
    assert make(CastValue, spec="int16").apply(rec("-32768", value_schema=STRING_SCHEMA)).value == -32768
    assert make(CastValue, spec="int64").apply(rec(7, value_schema=INT16_SCHEMA)).value == 7
    assert make(CastValue, spec="float32").apply(rec(1, value_schema=INT32_SCHEMA)).value == 1.0
    assert make(CastValue, spec="float64").apply(rec("1e3", value_schema=STRING_SCHEMA)).value == 1000.0
    assert make(CastValue, spec="int32").apply(rec(1, value_schema=FLOAT64_SCHEMA)).value == 1


def test_timestamp_converter_full_round_trip() -> None:
    def step(target: str, value: Any, schema: Schema | None) -> Any:
        t = configured(
            TimestampConverterValue, {"target.type": target, "format": "yyyy-MM-dd'T'HH:mm:ss.SSS"}
        )
        out = t.apply(rec(value, value_schema=schema))
        return out.value, out.value_schema

    value, schema = step("Timestamp", "2023-11-14T22:13:20.123", STRING_SCHEMA)
    assert (value, schema) == (TS, timestamp_schema())
    value, schema = step("unix", value, schema)
    assert (value, schema) == (TS_MS, INT64_SCHEMA)
    value, schema = step("Timestamp", value, schema)
    value, schema = step("string", value, schema)
    assert (value, schema) == ("2023-11-14T22:13:20.123", STRING_SCHEMA)


def test_defaults_and_replace_null_with_default() -> None:
    schema = (
        SchemaBuilder.struct()
        .field("n", Schema(SchemaType.INT64, True, default=5))
        .field("s", OPTIONAL_STRING_SCHEMA)
        .build()
    )
    value = Struct(schema, {"n": None, "s": "x"})
    out = make(ReplaceFieldValue, renames="n:m").apply(rec(value, value_schema=schema))
    assert out.value.values["m"] == 5
    out = configured(ReplaceFieldValue, {"renames": "n:m", "replace.null.with.default": "false"}).apply(
        rec(value, value_schema=schema)
    )
    assert out.value.values["m"] is None
    cast = make(CastValue, spec="n:string").apply(rec(value, value_schema=schema))
    assert cast.value_schema.field("n").schema.default == "5" and cast.value.values["n"] == "5"
