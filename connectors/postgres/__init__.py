"""PostgreSQL change data capture: PostgresConnector, a Debezium-compatible source on pgoutput, and
PostgresSinkConnector, which writes Debezium events (or plain rows) into tables exactly once."""

from headwater.connect.api import hookimpl

from .sink import PostgresSinkConnector, PostgresSinkTask
from .source import PostgresConnector, PostgresSourceTask
from .transforms import ExtractNewRecordState

__all__ = ["ExtractNewRecordState", "PostgresConnector", "PostgresSinkConnector", "PostgresSinkTask",
           "PostgresSourceTask"]


@hookimpl
def headwater_connectors() -> list[type]:
    return [PostgresConnector, PostgresSinkConnector]


@hookimpl
def headwater_transforms() -> list[type]:
    return [ExtractNewRecordState]
