"""The Postgres source connector's configuration: Debezium's keys, validated with errors that
name the key."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from headwater.connect.api import SourceConnectorConfig
from headwater.connectors.envelope import UNAVAILABLE, PlaceholderSetting

from .libpq import KeyNames, SslMode, explain_failure, passthrough, tls_params

__all__ = ["PostgresSourceConfig", "TableFilter"]

#: ``database.*`` keys of our own besides the typed fields: Debezium's legacy logical name, ignored
_IGNORED_DATABASE_KEYS = {"database.server.name"}
_DATABASE = KeyNames(prefix="database.")
_SNAPSHOT_MODES = ("initial", "initial_only", "no_data", "never", "always", "when_needed")


def _regexes(text: str, key: str) -> list[re.Pattern[str]]:
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            out.append(re.compile(part))
        except re.error as exc:
            raise ValueError(f"{key}: {part!r} is not a regular expression ({exc})") from None
    return out


class PostgresSourceConfig(SourceConnectorConfig):
    database_hostname: str = Field(alias="database.hostname", min_length=1, description="Host of the database.")
    database_port: int = Field(5432, alias="database.port", ge=1, le=65535, description="Port of the database.")
    database_user: str = Field(alias="database.user", min_length=1,
                               description="User with the REPLICATION attribute (and SELECT on captured tables).")
    database_password: SecretStr = Field(SecretStr(""), alias="database.password", description="The user's password.")
    database_dbname: str = Field(alias="database.dbname", min_length=1, description="The database to capture.")
    database_sslmode: SslMode = Field(
        "prefer", alias="database.sslmode",
        description="disable, allow, prefer (TLS when the server offers it, unverified), require (TLS; the "
                    "certificate is checked when database.sslrootcert is set), verify-ca (the certificate is signed "
                    "by database.sslrootcert's CA), verify-full (and names database.hostname).")
    database_sslrootcert: str = Field("", alias="database.sslrootcert",
                                      description="PEM file of the CA(s) that sign the server's certificate; system: "
                                                  "the system's trusted CAs.")
    database_sslcert: str = Field("", alias="database.sslcert",
                                  description="PEM file of the client certificate (certificate authentication).")
    database_sslkey: str = Field("", alias="database.sslkey",
                                 description="PEM file of the client certificate's private key (readable by the "
                                             "worker only: mode 0600).")
    database_sslpassword: SecretStr = Field(SecretStr(""), alias="database.sslpassword",
                                            description="Password of an encrypted database.sslkey.")
    database_tcp_keep_alive: bool = Field(True, alias="database.tcpKeepAlive",
                                          description="TCP keepalives on the connections (libpq's keepalives).")
    topic_prefix: str = Field(alias="topic.prefix", pattern=r"^[A-Za-z0-9._-]+$",
                              description="Prefix of every topic name (<prefix>.<schema>.<table>) and the "
                                          "connector's logical name.")
    plugin_name: Literal["pgoutput"] = Field("pgoutput", alias="plugin.name",
                                             description="The logical decoding plugin: pgoutput (built into "
                                                         "PostgreSQL 10+) is the one supported.")
    slot_name: str = Field("debezium", alias="slot.name", pattern=r"^[a-z0-9_]{1,63}$",
                           description="Replication slot (lower-case letters, digits and _).")
    slot_drop_on_stop: bool = Field(False, alias="slot.drop.on.stop",
                                    description="Drop the slot when the connector stops (changes made meanwhile "
                                                "are then lost).")
    publication_name: str = Field("dbz_publication", alias="publication.name", min_length=1,
                                  description="Publication the slot reads through.")
    publication_autocreate_mode: Literal["all_tables", "filtered", "disabled", "no_tables"] = Field(
        "all_tables", alias="publication.autocreate.mode",
        description="all_tables: FOR ALL TABLES (needs superuser); filtered: the tables of the include/exclude "
                    "lists; disabled: the publication must exist; no_tables: create it empty.")
    schema_include_list: str = Field("", alias="schema.include.list", description="Schemas to capture (regexes).")
    schema_exclude_list: str = Field("", alias="schema.exclude.list", description="Schemas not to capture.")
    table_include_list: str = Field("", alias="table.include.list",
                                    description="Tables to capture, as regexes matching <schema>.<table>.")
    table_exclude_list: str = Field("", alias="table.exclude.list", description="Tables not to capture.")
    column_include_list: str = Field("", alias="column.include.list",
                                     description="Columns to capture, as regexes matching <schema>.<table>.<column>.")
    column_exclude_list: str = Field("", alias="column.exclude.list", description="Columns not to capture.")
    snapshot_mode: str = Field("initial", alias="snapshot.mode",
                               description="initial, initial_only, no_data (or never), always, when_needed.")
    snapshot_fetch_size: int = Field(10240, alias="snapshot.fetch.size", ge=1,
                                     description="Rows fetched at a time while snapshotting.")
    heartbeat_interval_ms: int = Field(0, alias="heartbeat.interval.ms", ge=0,
                                       description="Emit a heartbeat record this often (0: never).")
    heartbeat_action_query: str = Field("", alias="heartbeat.action.query",
                                        description="SQL run on each heartbeat (e.g. an update of a table in the "
                                                    "publication, so an idle database still advances the slot).")
    tombstones_on_delete: bool = Field(True, alias="tombstones.on.delete",
                                       description="Follow each delete with a tombstone.")
    decimal_handling_mode: Literal["precise", "double", "string"] = Field(
        "precise", alias="decimal.handling.mode", description="How NUMERIC values are represented.")
    time_precision_mode: Literal["adaptive", "adaptive_time_microseconds", "connect"] = Field(
        "adaptive", alias="time.precision.mode", description="How temporal values are represented.")
    provide_transaction_metadata: bool = Field(False, alias="provide.transaction.metadata",
                                               description="Add transaction blocks and a <prefix>.transaction topic.")
    skipped_operations: str = Field("t", alias="skipped.operations",
                                    description="Operations not emitted: any of c, u, d, t; none for none.")
    message_key_columns: str = Field("", alias="message.key.columns",
                                     description="<schema>.<table>:<col>,<col>;... key columns of tables "
                                                 "(instead of their primary key).")
    unavailable_value_placeholder: PlaceholderSetting = Field(
        UNAVAILABLE, alias="unavailable.value.placeholder", min_length=1,
        description="What an unchanged TOAST value (not resent by the server) is sent as, in the column's shape: "
                    "the text, its bytes (bytea), a list of either (arrays), the bytes as integers (integer "
                    "arrays). hex: followed by hex digits gives the bytes.")
    max_batch_size: int = Field(2048, alias="max.batch.size", ge=1, description="Records per poll at most.")
    poll_interval_ms: int = Field(500, alias="poll.interval.ms", ge=1,
                                  description="How long a poll waits for changes when there are none.")
    slot_max_retained_wal_bytes: int = Field(1 << 30, alias="slot.max.retained.wal.bytes", ge=0,
                                             description="Warn when the slot holds back more WAL than this.")

    @field_validator("snapshot_mode")
    @classmethod
    def _snapshot_mode(cls, value: str) -> str:
        if value not in _SNAPSHOT_MODES:
            raise ValueError(f"must be one of {', '.join(_SNAPSHOT_MODES)}")
        return "no_data" if value == "never" else value

    @field_validator("skipped_operations")
    @classmethod
    def _skipped(cls, value: str) -> str:
        ops = {p.strip() for p in value.split(",") if p.strip()}
        if ops == {"none"}:
            return ""
        bad = ops - {"c", "u", "d", "t"}
        if bad:
            raise ValueError(f"unknown operations {', '.join(sorted(bad))}: use c, u, d, t or none")
        return ",".join(sorted(ops))

    @model_validator(mode="after")
    def _lists(self) -> PostgresSourceConfig:
        for key in ("schema.include.list", "schema.exclude.list", "table.include.list", "table.exclude.list",
                    "column.include.list", "column.exclude.list"):
            _regexes(getattr(self, key.replace(".", "_")), key)
        if self.table_include_list and self.table_exclude_list:
            raise ValueError("table.include.list and table.exclude.list cannot both be set")
        if self.schema_include_list and self.schema_exclude_list:
            raise ValueError("schema.include.list and schema.exclude.list cannot both be set")
        if self.column_include_list and self.column_exclude_list:
            raise ValueError("column.include.list and column.exclude.list cannot both be set")
        self.key_columns()  # parse errors surface at validation
        return self

    @model_validator(mode="after")
    def _connection(self) -> PostgresSourceConfig:
        """Other ``database.*`` keys go to libpq only when they are libpq's (a typo is named here, not by libpq);
        the TLS files are checked."""
        own = [name.removeprefix("database.") for name in self._database_keys()]
        for key in sorted(self.model_extra or {}):
            if key.startswith("database.") and key not in _IGNORED_DATABASE_KEYS:
                if key == "database.sslfactory":
                    raise ValueError("database.sslfactory: a Java SSLSocketFactory has no meaning here: "
                                     "NonValidatingFactory is database.sslmode=require without database.sslrootcert")
                passthrough(key.removeprefix("database."), _DATABASE, own)
        self._tls()
        return self

    @classmethod
    def _database_keys(cls) -> list[str]:
        return [f.alias for f in cls.model_fields.values() if f.alias and f.alias.startswith("database.")]

    # -- derived -------------------------------------------------------------------------------------

    def _tls(self) -> dict[str, str]:
        return tls_params(self.database_sslmode, self.database_sslrootcert, self.database_sslcert,
                          self.database_sslkey, self.database_sslpassword.get_secret_value(), _DATABASE)

    def libpq_params(self) -> dict[str, Any]:
        """Connection parameters for psycopg, the same for every connection the task opens (queries, snapshot,
        replication): the typed keys, then the other ``database.*`` keys, which validation let through as
        libpq's own."""
        params: dict[str, Any] = {"host": self.database_hostname, "port": self.database_port,
                                  "user": self.database_user, "dbname": self.database_dbname,
                                  "application_name": f"headwater-{self.topic_prefix}",
                                  "keepalives": "1" if self.database_tcp_keep_alive else "0", **self._tls()}
        if self.database_password.get_secret_value():
            params["password"] = self.database_password.get_secret_value()
        for key, value in (self.model_extra or {}).items():
            if key.startswith("database.") and key not in _IGNORED_DATABASE_KEYS:
                params[key[len("database."):]] = value
        return params

    def connect_failure(self, message: str) -> str:
        """libpq's message of a failed connection, with the key to change when TLS is the cause."""
        return explain_failure(message, _DATABASE)

    def filter(self) -> TableFilter:
        return TableFilter(self)

    def skipped(self) -> set[str]:
        return set(filter(None, self.skipped_operations.split(",")))

    def key_columns(self) -> dict[str, list[str]]:
        """``message.key.columns`` as {"schema.table" regex source: [columns]}."""
        out: dict[str, list[str]] = {}
        for entry in (e.strip() for e in self.message_key_columns.split(";")):
            if not entry:
                continue
            table, sep, cols = entry.rpartition(":")
            columns = [c.strip() for c in cols.split(",") if c.strip()]
            if not sep or not table or not columns:
                raise ValueError(f"message.key.columns: {entry!r} is not <schema>.<table>:<column>[,<column>...]")
            out[table] = columns
        return out


class TableFilter:
    """Which tables and columns are captured, matched as Debezium matches them (whole names)."""

    def __init__(self, config: PostgresSourceConfig) -> None:
        self.schema_in = _regexes(config.schema_include_list, "schema.include.list")
        self.schema_out = _regexes(config.schema_exclude_list, "schema.exclude.list")
        self.table_in = _regexes(config.table_include_list, "table.include.list")
        self.table_out = _regexes(config.table_exclude_list, "table.exclude.list")
        self.column_in = _regexes(config.column_include_list, "column.include.list")
        self.column_out = _regexes(config.column_exclude_list, "column.exclude.list")

    def table(self, schema: str, table: str) -> bool:
        if schema in ("pg_catalog", "information_schema") or schema.startswith("pg_"):
            return False
        if self.schema_in and not any(r.fullmatch(schema) for r in self.schema_in):
            return False
        if any(r.fullmatch(schema) for r in self.schema_out):
            return False
        name = f"{schema}.{table}"
        if self.table_in and not any(r.fullmatch(name) for r in self.table_in):
            return False
        return not any(r.fullmatch(name) for r in self.table_out)

    def column(self, schema: str, table: str, column: str) -> bool:
        name = f"{schema}.{table}.{column}"
        if self.column_in:
            return any(r.fullmatch(name) for r in self.column_in)
        return not any(r.fullmatch(name) for r in self.column_out)
