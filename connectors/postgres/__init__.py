"""PostgreSQL change data capture: PostgresConnector, a Debezium-compatible source on pgoutput.

Not built yet (see CHANGELOG): the Postgres sink, heartbeats, transaction metadata topics and
the slot's retained-WAL report.
"""

from headwater.connect.api import hookimpl

from .source import PostgresConnector, PostgresSourceTask

__all__ = ["PostgresConnector", "PostgresSourceTask"]


@hookimpl
def headwater_connectors() -> list[type]:
    return [PostgresConnector]
