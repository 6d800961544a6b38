"""The upsert lake's encoded path without Spark: canonical keys (the bucket of a key must not depend on the
path that wrote it) and what the decoder leaves to the record path."""

from __future__ import annotations

import json

import pyarrow as pa

from headwater.connect.converters.json import JsonConverter
from headwater.connectors.spark.changes import ChangeDecoder, canonical, latest


def test_canonical_keys_are_the_record_paths_json() -> None:
    keys = pa.table({"id": [1, -5, 2**62, 0], "s": ["a b", 'x"y', "é", "back\\slash"],
                     "b": [True, False, True, False]})
    plain = pa.table({"id": [1, 2], "code": ["A-1", "[x]~"]})
    for table in (keys, plain, keys.select(["id"])):
        want = [json.dumps(k, sort_keys=True, separators=(",", ":")) for k in table.to_pylist()]
        assert canonical(table) == want


def converters(schemas: bool = False) -> tuple[JsonConverter, JsonConverter]:
    key, value = JsonConverter(), JsonConverter()
    key.configure({"schemas.enable": str(schemas).lower()}, True)
    value.configure({"schemas.enable": str(schemas).lower()}, False)
    return key, value


def envelope(op: str, after: dict | None, lsn: int) -> bytes:
    return json.dumps({"before": None, "after": after, "op": op, "source": {"lsn": lsn}}).encode()


def test_latest_change_per_key_by_position_then_offset_and_what_goes_the_record_path() -> None:
    decoder = ChangeDecoder(*converters(), "__debezium_unavailable_value")
    keys = [json.dumps({"id": k}).encode() for k in (1, 2, 1, 3, 2, 4, 5)]
    values = [envelope("c", {"id": 1, "n": 1}, 10), envelope("c", {"id": 2, "n": 2}, 11),
              envelope("u", {"id": 1, "n": 3}, 9),  # an earlier position at a later offset
              envelope("t", None, 13), None, envelope("d", None, 14), None]
    decoded = decoder.decode("t", keys, values, list(range(7)))
    assert decoded is not None and decoded.table.num_rows == 6  # the truncate is no change
    found = latest([decoded.table], decoded.key_types, pa.schema([("id", pa.int64()), ("n", pa.int64())]), 0, 4)
    got = {k["id"]: (d, r) for k, d, r in zip(found.keys.to_pylist(), found.deleted.to_pylist(),
                                              found.rows.to_pylist(), strict=True)}
    assert got[1] == (False, {"id": 1, "n": 1})
    # a tombstone deletes; it has no source position, so (as on the record path) it orders before changes that have
    assert got[2] == (False, {"id": 2, "n": 2})
    assert got[4][0] is True and got[5][0] is True and 3 not in got
    # the placeholder, a plain row, a key without a field, a key that is not an object: the record path's
    placeholder = envelope("u", {"id": 1, "n": "__debezium_unavailable_value"}, 20)
    assert decoder.decode("t", keys[:1], [placeholder], [0]) is None
    assert decoder.decode("t", keys[:1], [json.dumps({"id": 1, "n": 1}).encode()], [0]) is None
    assert decoder.decode("t", [b'{"id": 1}', b'{"other": 2}'], values[:2], [0, 1]) is None
    assert decoder.decode("t", [b"1"], values[:1], [0]) is None
