"""What the database says of its tables and types, read on a regular connection and cached:
captured tables, their columns (type, modifier, NOT NULL, key) and pg_type entries."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from headwater.connectors.envelope import Placeholder

from .config import PostgresSourceConfig
from .events import TableColumn, TableSchema
from .types import ColumnType, PgType, column_type

__all__ = ["Catalog"]

log = logging.getLogger(__name__)

_TABLES = """
SELECT n.nspname, c.relname, c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg_toast%%' ORDER BY 1, 2
"""
_COLUMNS = """
SELECT a.attname, a.atttypid, a.atttypmod, a.attnotnull,
       coalesce(a.attnum = ANY (i.indkey), false) AS is_key
FROM pg_attribute a
LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum
"""
_TYPE = """
SELECT t.oid, t.typname, t.typtype, CASE WHEN t.typcategory = 'A' THEN t.typelem ELSE 0 END,
       coalesce(array(SELECT e.enumlabel FROM pg_enum e WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder),
                '{}')
FROM pg_type t WHERE t.oid = %s
"""


class Catalog:
    def __init__(self, conn: psycopg.Connection[Any], config: PostgresSourceConfig) -> None:
        self.conn = conn
        self.config = config
        self.filter = config.filter()
        self.types: dict[int, PgType | None] = {}
        self.key_overrides = config.key_columns()
        self.warned: set[tuple[str, str]] = set()
        self.placeholder = Placeholder(config.unavailable_value_placeholder)

    def tables(self) -> list[tuple[str, str, int]]:
        """Captured tables: (schema, table, oid)."""
        rows = self.conn.execute(_TABLES).fetchall()
        return [(s, t, oid) for s, t, oid in rows if self.filter.table(s, t)]

    def pg_type(self, oid: int) -> PgType | None:
        if oid not in self.types:
            row = self.conn.execute(_TYPE, (oid,)).fetchone()
            self.types[oid] = None if row is None else PgType(row[0], row[1], row[2], row[3], tuple(row[4]))
        return self.types[oid]

    def column_type(self, oid: int, modifier: int, optional: bool = True) -> ColumnType:
        c = self.config
        return column_type(oid, modifier, c.decimal_handling_mode, c.time_precision_mode, self.pg_type(oid),
                           lambda element: self.column_type(element, -1), optional)

    def table_schema(self, schema: str, table: str, oid: int,
                     relation_columns: list[tuple[str, int, int, bool]] | None = None) -> TableSchema:
        """The table's event schemas. ``relation_columns`` (name, type oid, modifier, key) are a
        pgoutput Relation's: they win over the catalog, which may already be newer than the change."""
        rows = self.conn.execute(_COLUMNS, (oid,)).fetchall()
        not_null = {name: nn for name, _t, _m, nn, _k in rows}
        primary = {name for name, _t, _m, _nn, k in rows if k}
        if relation_columns is None:
            relation_columns = [(name, t, m, key) for name, t, m, _nn, key in rows]
        keys = self._key_override(schema, table)
        columns = []
        for position, (name, type_oid, modifier, _marked) in enumerate(relation_columns):
            if not self.filter.column(schema, table, name):
                continue
            # The key is the primary key (a Relation marks the replica identity, all columns when FULL).
            is_key = name in (keys if keys is not None else primary)
            required = not_null.get(name, False) or is_key
            columns.append(TableColumn(name, self.column_type(type_oid, modifier, not required), is_key, required,
                                       position, type_oid, self.placeholder))
        if not any(c.key for c in columns) and (schema, table) not in self.warned:
            self.warned.add((schema, table))
            log.warning("table %s.%s has no primary key (nor message.key.columns): its events have a null key, "
                        "and its updates and deletes carry no old values unless REPLICA IDENTITY FULL", schema, table)
        return TableSchema(self.config.topic_prefix, self.config.database_dbname, schema, table, columns)

    def _key_override(self, schema: str, table: str) -> set[str] | None:
        import re

        for pattern, columns in self.key_overrides.items():
            if re.fullmatch(pattern, f"{schema}.{table}"):
                return set(columns)
        return None
