"""Reading a lake the Spark sink is writing."""

from __future__ import annotations

# What a reader meets when it listed the table, or a bucket, while the upsert sink swapped it: a file gone,
# or for a moment no Parquet file at all (Spark then cannot infer the schema). The reader reads again.
SWAPPED = ("FILE_NOT_EXIST", "FileNotFoundException", "PATH_NOT_FOUND", "FAILED_READ_FILE", "UNABLE_TO_INFER_SCHEMA")


def mid_swap(exc: BaseException) -> bool:
    """Whether Spark's error ``exc`` is a read that met a swap under way."""
    return any(word in str(exc) for word in SWAPPED)
