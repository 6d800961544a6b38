"""Spark lake: ``SparkParquetSink`` writes topics into Parquet through PySpark, exactly once, as rows
as they arrive, a changelog, or (``cdc.mode=upsert``) a current-state table merged from CDC events."""

from headwater.connect.api import hookimpl

from .session import shared_session, stop_shared_session
from .sink import SparkParquetSink, SparkParquetSinkTask

SparkParquetSinkConnector = SparkParquetSink  # the name Connect users expect, as a Python path too

__all__ = ["SparkParquetSink", "SparkParquetSinkConnector", "SparkParquetSinkTask", "shared_session"]


@hookimpl
def headwater_connectors() -> list[type]:
    return [SparkParquetSink]


@hookimpl
def headwater_worker_stopped() -> None:
    stop_shared_session()
