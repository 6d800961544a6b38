"""Upsert buckets rewritten, and append files written, with pyarrow, for a lake in a local folder.

A merge of a few thousand changed keys into a bucket of a few thousand rows is milliseconds of Arrow
work, and seconds as Spark jobs (a read, an anti join and a partitioned write, each scheduled, planned
and run through the JVM). When ``lake.path`` is a local folder the sink therefore rewrites each touched
bucket itself: the bucket's files read, the rows of changed keys dropped, the new rows added, one file
written into the flush's staging folder. What the lake's commit protocol sees is the same as Spark's
write: staged bucket folders, swapped in by the commit. The files are what Spark writes for the same
Arrow types (``storable``: times of day as integers; timestamps without a zone read back as
``timestamp_ntz``), so a reader cannot tell which wrote a bucket.
"""

from __future__ import annotations

import os
import uuid
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from .rows import storable

__all__ = ["local_folder", "rewrite_bucket", "storable_schema", "write_file"]


def local_folder(uri: str) -> str | None:
    """The local path of a ``file:`` URI (None for any other file system)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return unquote(parsed.path)


def storable_schema(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f.with_type(storable(f.type)) for f in schema])


def _files(folder: str) -> list[str]:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(folder, n) for n in names
                  if n.endswith(".parquet") and not n.startswith((".", "_")))


def _conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in its order: cast, and nulls for a column it lacks."""
    columns = [table.column(f.name).cast(f.type) if f.name in table.column_names
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def rewrite_bucket(bucket: str, staged: str, schema: pa.Schema, keys: list[str], changed: pa.Table,
                   fresh: pa.Table, codec: str) -> int:
    """Write the new contents of the bucket folder ``bucket`` into the folder ``staged``: its rows whose keys
    are not in ``changed``, then ``fresh``. ``schema`` is the storable schema of the table (without the
    bucket column), which ``changed`` (key columns) and ``fresh`` already have. Returns the rows written
    (no file when none)."""
    parts = []
    for path in _files(bucket):
        old = _conformed(pq.read_table(path), schema)
        if old.num_rows:
            parts.append(old)
    if parts:
        old = pa.concat_tables(parts)
        probe = old.select(keys).append_column("_i", pa.array(range(old.num_rows), pa.int64()))
        kept = probe.join(changed, keys=keys, join_type="left anti").column("_i")
        parts = [old.take(kept)] if len(kept) < old.num_rows else [old]
    if fresh.num_rows:
        parts.append(fresh)
    rows = sum(p.num_rows for p in parts)
    if rows:
        write_file(staged, pa.concat_tables(parts), codec)
    else:
        os.makedirs(staged, exist_ok=True)
    return rows


def write_file(folder: str, table: pa.Table, codec: str) -> str:
    """``table`` as one Parquet file in ``folder`` (made if missing), with the types Spark writes; its name."""
    os.makedirs(folder, exist_ok=True)
    target = storable_schema(table.schema)
    if target != table.schema:
        table = table.cast(target)
    name = f"part-00000-{uuid.uuid4()}.c000{'' if codec == 'none' else '.' + codec}.parquet"
    pq.write_table(table, os.path.join(folder, name), compression=codec)
    return name
