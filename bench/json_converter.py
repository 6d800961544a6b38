"""JsonConverter throughput, in process (prints a table; not a test), beside the StringConverter and
the SimpleHeaderConverter for scale.

Records of a 10-field struct schema (ints, a long, floats, strings, a boolean, an optional
string, a timestamp) and of schemaless maps, converted one at a time, as the worker's record
path does:

    from_connect_data (serialize, Connect value -> bytes) and to_connect_data (bytes -> value),
    with schemas.enable=true (the envelope) and false; then a 100-character string through the
    StringConverter and a short string and an int header value through the SimpleHeaderConverter.

Then lists of 1,000 as the worker's batch path converts them (from_connect_values /
to_connect_values), schemas.enable=true: the same structs, and 100-character strings with a string
schema (what the file connectors carry); and the file sink's wire-form path (``LineWire.lines``,
what ``put_encoded`` does) on the same string envelopes; and the file source's two ways from a chunk
of lines read to the records' values (str lines and ``from_connect_values``, or ``LineWire.values``).

    python bench/json_converter.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import time
from typing import Any

from headwater.connect.api import SchemaBuilder, Struct
from headwater.connect.api.data import (
    BOOLEAN_SCHEMA,
    FLOAT32_SCHEMA,
    FLOAT64_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
)
from headwater.connect.api.logical import TIMESTAMP_SCHEMA
from headwater.connect.converters import JsonConverter, SimpleHeaderConverter, StringConverter

SCHEMA = (SchemaBuilder.struct().name("bench.Order")
          .field("id", INT64_SCHEMA).field("customer", INT32_SCHEMA).field("quantity", INT16_SCHEMA)
          .field("price", FLOAT64_SCHEMA).field("discount", FLOAT32_SCHEMA).field("sku", STRING_SCHEMA)
          .field("note", OPTIONAL_STRING_SCHEMA).field("paid", BOOLEAN_SCHEMA).field("status", STRING_SCHEMA)
          .field("created", TIMESTAMP_SCHEMA).build())


def _structs(n: int) -> list[Struct]:
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return [Struct(SCHEMA).put("id", i).put("customer", i % 1000).put("quantity", i % 7).put("price", i * 0.25)
            .put("discount", 0.5).put("sku", f"SKU-{i % 5000:05d}").put("note", None if i % 3 else "gift")
            .put("paid", i % 2 == 0).put("status", "NEW").put("created", t0 + dt.timedelta(milliseconds=i))
            for i in range(n)]


def _rate(fn, items: list, repeat: int) -> float:
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            fn(item)
        rates.append(len(items) / (time.perf_counter() - start))
    return statistics.median(rates)


def _rate_lists(fn, items: list, repeat: int, size: int = 1000) -> float:
    lists = [items[i:i + size] for i in range(0, len(items), size)]
    rates = []
    for _ in range(repeat):
        start = time.perf_counter()
        for chunk in lists:
            fn(chunk)
        rates.append(len(items) / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    structs = _structs(args.records)
    maps = [{"id": s.get("id"), "sku": s.get("sku"), "price": s.get("price"), "paid": s.get("paid")} for s in structs]
    print(f"{'case':<38} {'rec/s (median of ' + str(args.repeat) + ')':>24}")
    for schemas in (True, False):
        conv = JsonConverter()
        conv.configure({"schemas.enable": str(schemas).lower()}, is_key=False)
        values, schema = (structs, SCHEMA) if schemas else (maps, None)
        label = "struct, schemas.enable=true" if schemas else "map, schemas.enable=false"
        write = _rate(lambda v, c=conv, s=schema: c.from_connect_data("t", s, v), values, args.repeat)
        data = [conv.from_connect_data("t", schema, v) for v in values]
        read = _rate(lambda d, c=conv: c.to_connect_data("t", d), data, args.repeat)
        print(f"{'from_connect_data ' + label:<38} {write:>24,.0f}")
        print(f"{'to_connect_data ' + label:<38} {read:>24,.0f}")
    string, header = StringConverter(), SimpleHeaderConverter()
    string.configure({}, is_key=False)
    text = "x" * 100
    n, repeat = args.records, args.repeat
    others = {
        "StringConverter from_connect_data": _rate(lambda v: string.from_connect_data("t", None, v), [text] * n,
                                                   repeat),
        "StringConverter to_connect_data": _rate(lambda d: string.to_connect_data("t", d), [text.encode()] * n, repeat),
        "SimpleHeaderConverter string header": _rate(lambda d: header.to_connect_header("t", "h", d),
                                                      [b"some-trace-id"] * n, repeat),
        "SimpleHeaderConverter int header": _rate(lambda d: header.to_connect_header("t", "h", d), [b"1234"] * n,
                                                  repeat),
    }
    for label, rate in others.items():
        print(f"{label:<38} {rate:>24,.0f}")
    conv = JsonConverter()
    conv.configure({"schemas.enable": "true"}, is_key=False)
    texts = [f"{i:08d}" + "x" * 92 for i in range(n)]
    cases: tuple[tuple[str, list[Any], Any], ...] = (("struct", structs, SCHEMA), ("string", texts, STRING_SCHEMA))
    for label, items, schema in cases:
        write = _rate_lists(lambda vs, s=schema: conv.from_connect_values("t", s, vs), items, repeat)
        data = conv.from_connect_values("t", schema, items)
        read = _rate_lists(lambda ds: conv.to_connect_values("t", ds), data, repeat)
        print(f"{'from_connect_values ' + label + ', lists':<38} {write:>24,.0f}")
        print(f"{'to_connect_values ' + label + ', lists':<38} {read:>24,.0f}")
    try:  # the file sink's wire-form path (put_encoded): string envelopes to the file's bytes, no values
        from headwater.connectors.file.encoded import LineWire
    except ImportError:  # a tree without it (an A/B against an older converter)
        return
    wire = LineWire.of(conv)
    assert wire is not None
    data = conv.from_connect_values("t", STRING_SCHEMA, texts)
    assert wire.lines(data) == ("\n".join(texts) + "\n").encode()
    lines = _rate_lists(wire.lines, data, repeat)
    print(f"{'file sink lines from envelopes, lists':<38} {lines:>24,.0f}")
    # the file source: a chunk of lines read (1 MiB, as READ_CHUNK) to the records' values, through the
    # str lines and from_connect_values in batch.size lists (the batch path) or LineWire.values (the lane)
    chunk_lines = (1 << 20) // 101
    chunks = ["".join(t + "\n" for t in texts[i:i + chunk_lines]).encode() for i in range(0, n, chunk_lines)]

    def through_str(chunk: bytes) -> None:
        split = chunk.decode("ascii").split("\n")
        split.pop()
        for at in range(0, len(split), 2000):
            conv.from_connect_values("t", STRING_SCHEMA, split[at:at + 2000])

    if not hasattr(wire, "values"):
        return
    assert wire.values(chunks[0]) == conv.from_connect_values("t", STRING_SCHEMA, texts[:chunk_lines])
    for label, fn in (("str lines + from_connect_values", through_str), ("LineWire.values", wire.values)):
        rates = []
        for _ in range(repeat):
            start = time.perf_counter()
            for chunk in chunks:
                fn(chunk)
            rates.append(n / (time.perf_counter() - start))
        print(f"{'file source, ' + label:<38} {statistics.median(rates):>24,.0f}")


if __name__ == "__main__":
    main()
