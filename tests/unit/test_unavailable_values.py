"""Debezium's placeholder for values the source did not have (unchanged TOAST values), as the sinks find
and fill it."""

from headwater.connect.api.data import Schema, SchemaBuilder, SchemaType, Struct
from headwater.connectors.envelope import UNAVAILABLE, Unavailable


def test_the_placeholder_is_found_as_text_bytes_and_a_one_element_array() -> None:
    find = Unavailable()
    row = {"id": 1, "body": UNAVAILABLE, "blob": UNAVAILABLE.encode(), "tags": [UNAVAILABLE], "n": 0,
           "other": "text", "list": [UNAVAILABLE, "x"], "none": None}
    assert find.columns(row) == ("body", "blob", "tags")
    assert find.columns({"id": 1, "body": "x" * 5000, "tags": ["a"]}) == ()
    assert Unavailable("??").columns({"a": "??", "b": UNAVAILABLE}) == ("a",)


def test_debeziums_other_shapes_are_found_too() -> None:
    """Integer and date arrays: the bytes as integers; uuid arrays: their name-based UUID (Java's
    UUID.nameUUIDFromBytes); hstore: the text mapped to itself, or that map's JSON; a hex: placeholder's
    bytes as Java's signed integers."""
    find = Unavailable()
    ints = list(UNAVAILABLE.encode())
    row = {"id": 1, "ints": ints, "uids": ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"], "map": {UNAVAILABLE: UNAVAILABLE},
           "json": '{"' + UNAVAILABLE + '":"' + UNAVAILABLE + '"}', "near": ints[:-1], "n": 95}
    assert find.columns(row) == ("ints", "uids", "map", "json")
    assert Unavailable("hex:00ff41").columns({"a": [0, -1, 65], "b": b"\x00\xffA", "c": [0, 255, 65]}) == ("a", "b")


def test_fill_takes_earlier_values_unless_the_earlier_row_lacked_them_too() -> None:
    find = Unavailable()
    row = {"id": 1, "n": 2, "body": UNAVAILABLE, "meta": UNAVAILABLE}
    filled, still = find.fill(row, ("body", "meta"), {"id": 1, "n": 1, "body": "big", "meta": None}, ("meta",))
    assert filled == {"id": 1, "n": 2, "body": "big", "meta": None} and still == ("meta",)
    assert row["body"] == UNAVAILABLE  # the record's own row is left as it was
    schema = SchemaBuilder.struct().field("body", Schema(SchemaType.STRING, True)).build()
    before = Struct(schema, {"body": UNAVAILABLE})
    assert find.fill(row, ("body",), before) == ({**row, "body": None}, ("body",))
    assert find.fill(row, ("body", "meta"), None) == ({**row, "body": None, "meta": None}, ("body", "meta"))
