"""PostgresSinkConnector: topics into PostgreSQL tables, exactly once.

It reads Debezium change events directly (``op`` c/r/u write the ``after`` row, d and tombstones
delete by key) and also plain rows (after ``ExtractNewRecordState``). Each ``put`` is one
transaction: per table, the batch's last change of each key wins; rows go through COPY into a
temporary table, then ``INSERT ... ON CONFLICT`` (upsert), ``INSERT`` or ``UPDATE``; deletes follow.
A column holding the source's ``unavailable.value.placeholder`` (an unchanged TOAST value) is left out
of the row's INSERT/UPDATE, so the table keeps its value, as Debezium's JDBC sink does.
The Kafka offsets the put covers are written in the same transaction to
``__headwater_sink_offsets`` in the target database, and a task that is given a partition seeks to
what that table says, so a crash never writes a row twice (even with ``insert.mode=insert``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from decimal import Decimal
from operator import itemgetter
from typing import Any, ClassVar, Final, Literal
from urllib.parse import parse_qsl, unquote

import psycopg
from psycopg import generators, pq, sql
from pydantic import Field, SecretStr, model_validator

from headwater.connect.api import (
    ConnectException,
    EncodedSinkBatch,
    SinkConnector,
    SinkConnectorConfig,
    SinkRecord,
    SinkTask,
    TopicPartition,
)
from headwater.connect.api.data import Schema, SchemaType, Struct
from headwater.connect.api.logical import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME
from headwater.connect.api.secrets import hide_url_secrets
from headwater.connectors.envelope import UNAVAILABLE, PlaceholderSetting, Unavailable
from headwater.connectors.envelope import get as _get_field
from headwater.connectors.envelope import is_envelope as _is_envelope

from .libpq import KeyNames, explain_failure, passthrough, tls_params
from .sink_envelope import DECLINED, LightJson

__all__ = ["PostgresSinkConfig", "PostgresSinkConnector", "PostgresSinkTask"]

log = logging.getLogger(__name__)

OFFSETS_TABLE = "__headwater_sink_offsets"
_JDBC_URL = re.compile(r"^jdbc:postgresql://(?P<host>[^:/?]+)(?::(?P<port>\d+))?/(?P<db>[^?]+)(?:\?(?P<query>.*))?$")
_URL = KeyNames(url_key="connection.url")
#: pgjdbc's URL parameters that libpq names otherwise (the TLS ones, user and password share the name)
_PGJDBC_NAMES = {"ApplicationName": "application_name", "connectTimeout": "connect_timeout"}
_URL_OWN = ("user", "password", "ssl", "sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword",
            "currentSchema", *_PGJDBC_NAMES)


def _jdbc_query(query: str) -> dict[str, str]:
    """A JDBC URL's query as libpq parameters: pgjdbc's names mapped, libpq's own accepted, anything else an
    error naming it (before, it reached libpq, which refused it at connect time)."""
    out: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == "ssl":  # pgjdbc: ssl (or ssl=true) without an sslmode is verify-full; ssl=false is nothing
            if value.lower() not in ("", "true", "false"):
                raise _URL.error("ssl", f"is {value!r}, not true or false")
            out["ssl"] = "" if value.lower() == "false" else "true"
            continue
        if name == "currentSchema":  # pgjdbc's search_path, which libpq sets through options
            out["options"] = f"{out.get('options', '')} -c search_path={value}".strip()
            continue
        param = _PGJDBC_NAMES.get(name, name)
        if param not in _URL_OWN:
            passthrough(param, _URL, _URL_OWN)
        out[param] = f"{value} {out['options']}" if param == "options" and "options" in out else value
    return out


class PostgresSinkConfig(SinkConnectorConfig):
    connection_url: str = Field("", alias="connection.url",
                                description="jdbc:postgresql://host:port/db, with pgjdbc's query parameters: user, "
                                            "password, sslmode, sslrootcert, sslcert, sslkey, sslpassword, ssl=true "
                                            "(verify-full), ApplicationName, connectTimeout, currentSchema; or "
                                            "libpq's own")
    connection_host: str = Field("", alias="connection.host", description="Host, when connection.url is not set.")
    connection_port: int = Field(5432, alias="connection.port", ge=1, le=65535)
    connection_dbname: str = Field("", alias="connection.dbname")
    connection_user: str = Field("", alias="connection.user", description="User (also connection.username).")
    connection_username: str = Field("", alias="connection.username")
    connection_password: SecretStr = Field(SecretStr(""), alias="connection.password")
    insert_mode: Literal["insert", "upsert", "update"] = Field("upsert", alias="insert.mode")
    primary_key_mode: Literal["none", "kafka", "record_key", "record_value"] = Field("record_key",
                                                                                   alias="primary.key.mode")
    primary_key_fields: str = Field("", alias="primary.key.fields",
                                    description="Key columns (record_value: required; record_key: a subset).")
    delete_enabled: bool = Field(True, alias="delete.enabled",
                                 description="Tombstones and Debezium deletes delete the row.")
    schema_evolution: Literal["none", "basic"] = Field("basic", alias="schema.evolution",
                                                       description="basic: create missing tables and add missing "
                                                                   "columns.")
    auto_create: bool | None = Field(None, alias="auto.create", description="Confluent's name for creating tables.")
    auto_evolve: bool | None = Field(None, alias="auto.evolve", description="Confluent's name for adding columns.")
    table_name_format: str = Field("${topic}", alias="table.name.format",
                                   description="${topic}, ${source.schema}, ${source.table} are replaced.")
    batch_size: int = Field(3000, alias="batch.size", ge=1)
    unavailable_value_placeholder: PlaceholderSetting = Field(
        UNAVAILABLE, alias="unavailable.value.placeholder", min_length=1,
        description="The source's placeholder for values it did not have (Debezium's unchanged TOAST values): "
                    "a column holding it is left out of the write, so the table keeps its value.")

    @model_validator(mode="after")
    def _target(self) -> PostgresSinkConfig:
        if not self.connection_url and not (self.connection_host and self.connection_dbname):
            raise ValueError("set connection.url (jdbc:postgresql://host:port/db) or connection.host and "
                             "connection.dbname")
        if self.connection_url and not _JDBC_URL.match(self.connection_url):
            raise ValueError(f"connection.url: {hide_url_secrets(self.connection_url)!r} is not "
                             f"jdbc:postgresql://host:port/database")
        if self.primary_key_mode == "record_value" and not self.primary_key_fields:
            raise ValueError("primary.key.mode=record_value needs primary.key.fields")
        self.params()  # the URL's parameters and TLS files are checked here, at validation
        return self

    def params(self) -> dict[str, Any]:
        """Connection parameters for psycopg: the URL's (pgjdbc's names mapped to libpq's) or connection.host's,
        with connection.user / .username / .password over the URL's."""
        query: dict[str, str] = {}
        if self.connection_url:
            m = _JDBC_URL.match(self.connection_url)
            assert m is not None
            out: dict[str, Any] = {"host": m["host"], "port": int(m["port"] or 5432), "dbname": unquote(m["db"])}
            query = _jdbc_query(m["query"] or "")
        else:
            out = {"host": self.connection_host, "port": self.connection_port, "dbname": self.connection_dbname}
        tls = {p: query.pop(p, "") for p in ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")}
        if query.pop("ssl", "") and not tls["sslmode"]:
            tls["sslmode"] = "verify-full"  # pgjdbc's meaning of ssl=true without an sslmode
        user = self.connection_user or self.connection_username or query.pop("user", "")
        password = self.connection_password.get_secret_value() or query.pop("password", "")
        query = {k: v for k, v in query.items() if k not in ("user", "password")}  # the connection.* keys won
        out.update(query)
        out.update(tls_params(tls["sslmode"] or "prefer", tls["sslrootcert"], tls["sslcert"], tls["sslkey"],
                              tls["sslpassword"], _URL))
        if user:
            out["user"] = user
        if password:
            out["password"] = password
        return out

    def creates(self) -> bool:
        return self.auto_create if self.auto_create is not None else self.schema_evolution == "basic"

    def evolves(self) -> bool:
        return self.auto_evolve if self.auto_evolve is not None else self.schema_evolution == "basic"


class PostgresSinkConnector(SinkConnector):
    config_class: ClassVar[type[SinkConnectorConfig]] = PostgresSinkConfig
    aliases: ClassVar[tuple[str, ...]] = ("io.debezium.connector.jdbc.JdbcSinkConnector",
                                          "io.confluent.connect.jdbc.JdbcSinkConnector", "JdbcSinkConnector")

    def start(self, config: PostgresSinkConfig) -> None:
        self.config = config

    def task_class(self) -> type[SinkTask]:
        return PostgresSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.config.originals() for _ in range(max_tasks)]


# -- Connect values -> PostgreSQL ------------------------------------------------------------------------


def _pg_type(schema: Schema) -> str:
    name = schema.name or ""
    if name == DECIMAL_NAME or name == "io.debezium.data.VariableScaleDecimal":
        return "numeric"
    if name in (DATE_NAME, "io.debezium.time.Date"):
        return "date"
    if name in (TIMESTAMP_NAME, "io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp",
                "io.debezium.time.NanoTimestamp"):
        return "timestamp"
    if name == "io.debezium.time.ZonedTimestamp":
        return "timestamptz"
    if name in (TIME_NAME, "io.debezium.time.Time", "io.debezium.time.MicroTime", "io.debezium.time.NanoTime"):
        return "time"
    if name == "io.debezium.time.ZonedTime":
        return "timetz"
    if name == "io.debezium.time.MicroDuration":
        return "interval"
    if name == "io.debezium.data.Json":
        return "jsonb"
    if name == "io.debezium.data.Uuid":
        return "uuid"
    if schema.type == SchemaType.ARRAY and schema.value_schema is not None:
        return _pg_type(schema.value_schema) + "[]"
    return {SchemaType.INT8: "smallint", SchemaType.INT16: "smallint", SchemaType.INT32: "integer",
            SchemaType.INT64: "bigint", SchemaType.FLOAT32: "real", SchemaType.FLOAT64: "double precision",
            SchemaType.BOOLEAN: "boolean", SchemaType.BYTES: "bytea"}.get(schema.type, "text")


_EPOCH = dt.datetime(1970, 1, 1)


def _to_pg(schema: Schema | None) -> Callable[[Any], Any]:
    """How a Connect value of ``schema`` becomes what psycopg writes into the column."""
    name = (schema.name or "") if schema is not None else ""
    if name == "io.debezium.time.Date":
        return lambda v: dt.date(1970, 1, 1) + dt.timedelta(days=v)
    if name == "io.debezium.time.Timestamp":
        return lambda v: _EPOCH + dt.timedelta(milliseconds=v)
    if name == "io.debezium.time.MicroTimestamp":
        return lambda v: _EPOCH + dt.timedelta(microseconds=v)
    if name == "io.debezium.time.Time":
        return lambda v: (_EPOCH + dt.timedelta(milliseconds=v)).time()
    if name == "io.debezium.time.MicroTime":
        return lambda v: (_EPOCH + dt.timedelta(microseconds=v)).time() if v < 86_400_000_000 else "24:00:00"
    if name == "io.debezium.time.MicroDuration":
        return lambda v: dt.timedelta(microseconds=v)
    if name == "io.debezium.data.VariableScaleDecimal":
        def variable(v: Any) -> Decimal:
            from headwater.connect.api.logical import decimal_from_bytes

            if isinstance(v, Struct):
                v = v.values
            value = v["value"]
            if isinstance(value, str):
                import base64

                value = base64.b64decode(value)
            return decimal_from_bytes(value, int(v["scale"]))

        return variable
    if schema is not None and schema.type == SchemaType.ARRAY and schema.value_schema is not None:
        element = _to_pg(schema.value_schema)
        return lambda v: [None if x is None else element(x) for x in v]
    if schema is not None and schema.type == SchemaType.STRUCT:
        import json

        return lambda v: json.dumps(v.to_dict() if isinstance(v, Struct) else v, default=str)
    return _as_is


def _as_is(value: Any) -> Any:
    return value


def _fields(value: Any) -> tuple[dict[str, Any], Schema | None]:
    if isinstance(value, Struct):
        return dict(value.values), value.schema
    if isinstance(value, dict):
        return dict(value), None
    raise ConnectException(f"cannot write a value of type {type(value).__name__} as a row: a struct or a map "
                           f"is needed (use JsonConverter with schemas, or ExtractNewRecordState)")


def _get(value: Any, name: str) -> Any:
    """A field of a map or a Struct (None when absent); a map, the usual case, without a call."""
    return value.get(name) if type(value) is dict else _get_field(value, name)


def _key_row(record: SinkRecord) -> dict[str, Any]:
    """The record key's fields ({} for a key that is not a struct or map)."""
    key = record.key
    return _fields(key)[0] if isinstance(key, Struct | dict) else {}


#: One row-level change: (key, row, schema, missing): a row to write (``row``) or a key to delete (``row`` None);
#: ``missing`` names the row's columns whose value the source did not have (unchanged TOAST values), left as they
#: are. A plain tuple, not an object: made and read without a Python-level call (a put makes thousands).
_Change = tuple[tuple[Any, ...], dict[str, Any] | None, Schema | None, tuple[str, ...]]
_KEY: Final = 0
_ROW: Final = 1
_SCHEMA: Final = 2
_MISSING: Final = 3


_ROW_OPS = frozenset(("c", "r", "u"))  # the ops whose ``after`` row is written
_UNREAD: Final = object()  # put_encoded: a value not converted (yet)


class _NotConverted(ConnectException):
    """put_encoded: a key or value its converter refused (the cause; never leaves put_encoded)."""


def _convert(converter: Callable[[str, Any], Any], topic: str, data: Any) -> Any:
    try:
        return converter(topic, data).value
    except Exception as exc:
        raise _NotConverted from exc


def _lane_row(value: Any) -> tuple[dict[str, Any] | None, Schema | None, tuple[Any, ...] | None]:
    """A converted value's row for put_encoded's lane: (row, its schema, (source.schema, .table, .db) or None)
    of an insert, read or update envelope (a map or a Struct) whose ``after`` is a row; (None, None, None) for
    anything else (the record path's steps take it)."""
    fields: dict[str, Any]
    if type(value) is dict and "op" in value and "source" in value and "after" in value:
        fields = value
    elif type(value) is Struct and _is_envelope(value):
        fields = value.values
    else:
        return None, None, None
    op = fields.get("op")
    if type(op) is not str or op not in _ROW_OPS:  # (an op that is not a string: the record path's steps)
        return None, None, None
    after = fields.get("after")
    if type(after) is dict:
        row, schema = after, None
    elif type(after) is Struct:
        row, schema = after.values, after.schema
    else:
        return None, None, None
    source = fields.get("source")
    source = source.values if type(source) is Struct else source
    where = (source.get("schema"), source.get("table"), source.get("db")) if type(source) is dict else None
    return row, schema, where


class _Taken:
    """A put's changes so far: per table, the last change of each key (in first-seen order), the writes a
    truncate cut off before it, and the truncates with their position among the writes."""

    __slots__ = ("pending", "writes", "truncates")

    def __init__(self) -> None:
        self.pending: dict[tuple[str, str], dict[Any, _Change]] = {}
        self.writes: list[tuple[tuple[str, str], dict[Any, _Change]]] = []
        self.truncates: list[tuple[int, tuple[str, str]]] = []


class _Consumed:
    """A consumed record as ``put`` reads it, for ``put_encoded``: the value converted, the key only when asked
    for (an upsert by the value's key columns never reads it)."""

    __slots__ = ("topic", "kafka_partition", "kafka_offset", "value", "_key", "_convert")

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None, value: Any,
                 convert: Callable[[str, bytes | None], Any]) -> None:
        self.topic, self.kafka_partition, self.kafka_offset, self.value = topic, partition, offset, value
        self._key, self._convert = key, convert

    @property
    def key(self) -> Any:
        return self._convert(self.topic, self._key).value if self._key is not None else None


class PostgresSinkTask(SinkTask):
    def start(self, config: dict[str, str]) -> None:
        self.config = c = PostgresSinkConfig.model_validate(config)
        self.name = config.get("name", "")
        # The last statement of a put's writes, kept to go with its offsets and COMMIT (see _send_commit)
        self.last_merge: sql.Composed | None = None
        self.committing: dict[TopicPartition, int] | None = None  # a put's commit on its way: its offsets
        try:
            self.conn = psycopg.connect(**c.params(), autocommit=False)
        except psycopg.Error as exc:
            params = c.params()
            raise ConnectException(f"Cannot connect to PostgreSQL at {params.get('host')}:{params.get('port')} "
                                   f"database {params.get('dbname')}: "
                                   f"{explain_failure(str(exc).strip(), _URL)}") from exc
        self.conn.execute(f"CREATE TABLE IF NOT EXISTS {OFFSETS_TABLE} (connector text, topic text, "
                          f"partition int, next_offset bigint NOT NULL, PRIMARY KEY (connector, topic, partition))")
        self.conn.commit()
        self.stored: dict[TopicPartition, int] = {}
        self.topic_tables: dict[str, tuple[str, str]] = {}
        self.source_tables: dict[tuple[Any, ...], tuple[str, str]] = {}  # (topic, schema, table, db) -> table
        self.columns: dict[tuple[str, str], dict[str, str]] = {}  # (schema, table) -> column -> type
        self.key_fields = [f.strip() for f in c.primary_key_fields.split(",") if f.strip()]
        self.unavailable = Unavailable(c.unavailable_value_placeholder)
        self.by_source = "${source." in c.table_name_format  # the table is named from each event's source

    def open(self, partitions: list[TopicPartition]) -> None:
        """Seek each partition to the offset stored with the data (not the consumer group's)."""
        self._committed()
        rows = self.conn.execute(f"SELECT topic, partition, next_offset FROM {OFFSETS_TABLE} WHERE connector = %s",
                                 (self.name,)).fetchall()
        self.conn.commit()
        stored = {TopicPartition(t, p): o for t, p, o in rows}
        seek = {tp: stored[tp] for tp in partitions if tp in stored}
        self.stored.update(seek)
        if seek:
            self.context.offset(seek)

    def decode_with(self, key_converter: Any, value_converter: Any) -> bool:
        """Records come as the consumer read them (``put_encoded``): the converters are called here, without a
        SinkRecord per record or the worker's per-record conversion pass."""
        self.key_converter, self.value_converter = key_converter, value_converter
        return True

    def put_encoded(self, batch: EncodedSinkBatch) -> bool:
        """``put`` of one partition's records still in wire form. A value that does not convert hands the batch
        back (before anything is written), so the worker's path applies errors.tolerance to it as before.

        Each value is converted and taken at once (the envelope is not kept, only its row). Inserts, reads and
        updates in a map or Struct envelope whose row has all its values are taken here, without a record
        object or the per-field helpers; anything else (tombstones, deletes, truncates, unchanged TOAST values,
        plain rows, primary.key.mode=kafka) goes through ``_take`` as ``put``'s records do. With a plain
        schemaless JsonConverter, envelopes and keys are read by ``LightJson`` (sink_envelope.py) without building
        the source block; whatever it declines is converted as before."""
        topic, partition = batch.topic, batch.kafka_partition
        floor = self.stored.get(TopicPartition(topic, partition), 0)
        value_of, key_of = self.value_converter.to_connect_data, self.key_converter.to_connect_data
        taken = _Taken()
        pending, topic_tables = taken.pending, self.topic_tables
        mode, key_fields, by_source = self.config.primary_key_mode, self.key_fields, self.by_source
        placeholders = self.unavailable.columns
        only = key_fields[0] if len(key_fields) == 1 else None  # the usual key: one column
        tables: dict[tuple[Any, ...], tuple[str, str]] = {}  # this batch's (schema, table, db) -> table
        light = LightJson.of(self.value_converter) if mode != "kafka" else None
        envelope = light.envelope if light is not None else None
        light_key = LightJson.of(self.key_converter) if mode == "record_key" else None
        last = -1
        try:
            for offset, key, data in zip(batch.offsets, batch.keys, batch.values, strict=True):
                if offset < floor:
                    continue
                last = offset
                value: Any = _UNREAD
                # the fast lane: a c/r/u envelope (map or Struct) whose after row has all its values
                read = envelope(data) if envelope is not None else None
                row: dict[str, Any] | None
                schema: Schema | None
                where: tuple[Any, ...] | None
                if read is not None:  # schemaless JSON, read without the source block's other values
                    row, where = read
                    schema = None
                else:
                    value = _convert(value_of, topic, data)
                    row, schema, where = _lane_row(value) if mode != "kafka" else (None, None, None)
                if row is not None and not placeholders(row):
                    if mode == "record_value":
                        change_key = ((only, row.get(only)),) if only is not None else \
                            tuple([(n, row.get(n)) for n in key_fields])
                    elif mode == "none":
                        change_key = ()
                    else:  # record_key: the key's fields, else the row's
                        key_value = None if key is None else DECLINED if light_key is None else \
                            light_key.value(key)
                        if key_value is DECLINED:
                            key_value = _convert(key_of, topic, key)
                        key_row = key_value if isinstance(key_value, dict) else _fields(key_value)[0] \
                            if isinstance(key_value, Struct) else {}
                        names = key_fields or list(key_row)
                        change_key = tuple([(n, key_row[n] if n in key_row else row.get(n)) for n in names])
                    table = None
                    if by_source:  # as _table: the same source block names the same table
                        if where is not None:
                            table = tables.get(where)
                        if table is not None:
                            topic_tables[topic] = table
                    else:
                        table = topic_tables.get(topic)
                    if table is None:  # the first of its table in the batch: named as _table names it
                        if value is _UNREAD:
                            value = _convert(value_of, topic, data)
                        table = self._table(_Consumed(topic, partition, offset, key, value, key_of),  # type: ignore[arg-type]
                                            True)
                        if where is not None:
                            tables[where] = table
                    changes = pending.get(table)
                    if changes is None:
                        changes = pending[table] = {}
                    changes[change_key if change_key else len(changes)] = (change_key, row, schema, ())
                    continue
                if value is _UNREAD:
                    value = _convert(value_of, topic, data)
                self._take(_Consumed(topic, partition, offset, key, value, key_of), taken)  # type: ignore[arg-type]
        except _NotConverted as exc:  # the worker's path converts the batch again and reports it
            return self._hand_back(topic, partition, exc.__cause__ or exc)
        if last >= 0:
            self._flush(taken, {TopicPartition(topic, partition): last + 1})
        return True

    def _hand_back(self, topic: str, partition: int, exc: BaseException) -> bool:
        log.debug("%s: a record of %s-%d does not convert here (%s): the worker converts the batch", self.name,
                  topic, partition, exc)
        return False

    def put(self, records: list[SinkRecord]) -> None:
        floors: dict[tuple[str, int], int] = {}  # what the offsets table already covers, per partition
        taken = _Taken()
        ends: dict[tuple[str, int], int] = {}
        for r in records:
            where = (r.topic, r.kafka_partition or 0)
            floor = floors.get(where)
            if floor is None:
                floor = floors[where] = self.stored.get(TopicPartition(*where), 0)
            if r.kafka_offset >= floor:
                self._take(r, taken)
                if r.kafka_offset + 1 > ends.get(where, 0):
                    ends[where] = r.kafka_offset + 1
        if ends:
            self._flush(taken, {TopicPartition(*where): end for where, end in ends.items()})

    def _take(self, record: SinkRecord, taken: _Taken) -> None:
        """One record the offsets table does not cover yet, into the put's pending changes."""
        pending = taken.pending
        envelope = _is_envelope(record.value)
        table = self._table(record, envelope)
        if envelope and _get(record.value, "op") == "t":
            if table in pending:  # what came before the truncate is written before it
                taken.writes.append((table, pending.pop(table)))
            taken.truncates.append((len(taken.writes), table))
            return
        change = self._change(record, envelope)
        if change is None:
            return
        changes = pending.setdefault(table, {})
        # The batch's last change of a key wins; rows without a key all append.
        slot = change[_KEY] if change[_KEY] else len(changes)
        earlier = changes.get(slot)
        if change[_MISSING] and earlier is not None and earlier[_ROW] is not None and change[_ROW] is not None:
            # unchanged TOAST values of a row written earlier in the batch: its values
            row, missing = self.unavailable.fill(change[_ROW], change[_MISSING], earlier[_ROW], earlier[_MISSING])
            change = (change[_KEY], row, change[_SCHEMA], missing)
        changes[slot] = change

    def _flush(self, taken: _Taken, next_offsets: dict[TopicPartition, int]) -> None:
        """Write the put's changes with its offsets, in one transaction."""
        writes, truncates = taken.writes, taken.truncates
        writes.extend(taken.pending.items())
        self._committed()  # the previous put's commit (its rows were sent while these were read)
        try:
            cut = 0
            for index, (table, changes) in enumerate(writes):
                while cut < len(truncates) and truncates[cut][0] <= index:
                    self._truncate(truncates[cut][1])
                    cut += 1
                self._write(table, list(changes.values()))
            for _, table in truncates[cut:]:
                self._truncate(table)
            self._send_commit(next_offsets)
        except Exception:
            self.last_merge = None
            self.conn.rollback()
            raise
        self.stored.update(next_offsets)

    def _send_commit(self, next_offsets: dict[TopicPartition, int]) -> None:
        """Send the put's last merge, its offsets and COMMIT as one query, without waiting: the server runs them
        while the task reads the next records. ``_committed`` waits for the answer before the connection is used
        again (the next put, ``pre_commit``, a rebalance, ``stop``). Rows and offsets still commit together, or
        not at all."""
        offsets = sql.SQL(", ").join(sql.SQL("({}, {}, {}, {})").format(
            sql.Literal(self.name), sql.Literal(tp.topic), sql.Literal(tp.partition), sql.Literal(o))
            for tp, o in next_offsets.items())
        parts: list[sql.Composable] = [self.last_merge] if self.last_merge is not None else []
        parts += [sql.SQL(f"INSERT INTO {OFFSETS_TABLE} VALUES {{}} ON CONFLICT (connector, topic, partition) DO "
                          f"UPDATE SET next_offset = excluded.next_offset").format(offsets), sql.SQL("COMMIT")]
        self.last_merge = None
        text = sql.SQL("; ").join(parts).as_bytes(self.conn)
        pgconn = self.conn.pgconn
        pgconn.send_query(text)
        self.committing = next_offsets
        self.conn.wait(generators.send(pgconn))

    def _committed(self) -> None:
        """Wait for the commit ``_send_commit`` sent; a failed one fails the task (its records were handed over:
        a restart resumes from the offsets the database holds, so nothing is lost or written twice)."""
        if self.committing is None:
            return
        offsets, self.committing = self.committing, None
        results = self.conn.wait(generators.fetch_many(self.conn.pgconn))
        failed = [r for r in results if r.status not in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)]
        if failed or self.conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            message = (failed[0].error_message if failed else b"").decode(errors="replace").strip()
            for tp in offsets:
                self.stored.pop(tp, None)  # known again only from the table (open)
            if self.conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                self.conn.rollback()
            raise ConnectException(f"{self.name}: writing a batch of {', '.join(map(str, offsets))} failed at its "
                                   f"commit: {message or 'the transaction did not commit'}")

    def _db(self) -> psycopg.Connection[Any]:
        """The connection, for a statement that must run after the put's last merge so far."""
        if self.last_merge is not None:
            statement, self.last_merge = self.last_merge, None
            self.conn.execute(statement)
        return self.conn

    # -- one record ------------------------------------------------------------------------------------

    def _change(self, record: SinkRecord, envelope: bool) -> _Change | None:
        value = record.value
        before = None
        if value is None:  # a tombstone
            return (self._key(record, _key_row(record), None), None, None, ()) if self.config.delete_enabled \
                else None
        if envelope:
            op = _get(value, "op")
            if op == "d":
                if not self.config.delete_enabled:
                    return None
                before = _get(value, "before")
                key_row = _key_row(record)
                row, _ = _fields(before) if before is not None else (key_row, None)
                return (self._key(record, key_row, row), None, None, ())
            if op == "t" or op == "m":
                return None
            before = _get(value, "before")
            value = _get(value, "after")
            if value is None:
                return None
        row, schema = _fields(value)
        missing = self.unavailable.columns(row)
        if missing:  # from the before image when it has them (REPLICA IDENTITY FULL)
            row, missing = self.unavailable.fill(row, missing, before)
        return self._key(record, None, row), row, schema, missing

    def _key(self, record: SinkRecord, key_row: dict[str, Any] | None, row: dict[str, Any] | None
             ) -> tuple[Any, ...]:
        """The row's key; ``key_row``: the record key's fields, None for 'read them when needed'."""
        mode = self.config.primary_key_mode
        if mode == "record_key" and key_row is None:
            key_row = _key_row(record)
        if mode == "record_key":
            assert key_row is not None
            names = self.key_fields or list(key_row)
            return tuple((n, key_row.get(n) if n in key_row else (row or {}).get(n)) for n in names)
        if mode == "record_value":
            values = row or {}
            return tuple([(n, values.get(n)) for n in self.key_fields])
        if mode == "kafka":
            return (("__connect_topic", record.topic), ("__connect_partition", record.kafka_partition),
                    ("__connect_offset", record.kafka_offset))
        return ()

    def _table(self, record: SinkRecord, envelope: bool) -> tuple[str, str]:
        value = record.value
        by_source = self.by_source
        if by_source and envelope:  # the same source block names the same table: look it up
            source = _get(value, "source")
            seen = (record.topic, _get(source, "schema"), _get(source, "table"), _get(source, "db"))
            known = self.source_tables.get(seen)
            if known is None:
                known = self.source_tables[seen] = self._resolve(record)
            self.topic_tables[record.topic] = known
            return known
        if not by_source:
            known = self.topic_tables.get(record.topic)
            if known is not None:
                return known
        return self._resolve(record)

    def _resolve(self, record: SinkRecord) -> tuple[str, str]:
        name = self.config.table_name_format.replace("${topic}", record.topic)
        if "${source." in name:
            if not _is_envelope(record.value):
                # A tombstone has no source block: the table its topic's events named, else the topic's
                # last two parts (<prefix>.<schema>.<table>).
                known = self.topic_tables.get(record.topic)
                if known is not None:
                    return known
                parts = record.topic.split(".")
                source = {"schema": parts[-2] if len(parts) > 1 else "public", "table": parts[-1], "db": ""}
            else:
                source = _get(record.value, "source")
            for field in ("schema", "table", "db"):
                name = name.replace(f"${{source.{field}}}", str(_get(source, field) or ""))
        schema, _, table = name.rpartition(".") if name.count(".") == 1 else ("public", "", name.replace(".", "_"))
        resolved = (schema or "public", table)
        self.topic_tables[record.topic] = resolved
        return resolved

    # -- writing ---------------------------------------------------------------------------------------

    def _ensure(self, table: tuple[str, str], changes: list[_Change]) -> dict[str, str]:
        """The table's columns (name -> type), creating the table or adding columns as configured."""
        known = self.columns.get(table)
        if known is None:
            rows = self._db().execute(
                "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN pg_class c ON "
                "c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND "
                "c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped", table).fetchall()
            known = self.columns[table] = dict(rows) if rows else {}
        wanted: dict[str, str] = {}
        columns: dict[str, Any] = {}  # every row's columns (dict.update: no Python step per column and row)
        for ch in changes:
            if ch[_ROW] is not None:
                columns.update(ch[_ROW])
        for ch in changes if any(name not in known for name in columns) else ():
            if ch[_ROW] is None:
                continue
            for name in ch[_ROW]:
                if name not in known and name not in wanted:
                    f = ch[_SCHEMA].field(name) if ch[_SCHEMA] is not None else None
                    wanted[name] = _pg_type(f.schema) if f is not None else "text"
        key_names = [n for n, _ in changes[0][_KEY]] if changes and changes[0][_KEY] else []
        ident = sql.Identifier(*table)
        if not known:
            if not self.config.creates():
                raise ConnectException(f"Table {table[0]}.{table[1]} does not exist and schema.evolution=none "
                                       f"(auto.create=false): create it")
            for name in key_names:
                wanted.setdefault(name, "text" if self.config.primary_key_mode == "kafka" and name == "__connect_topic"
                                  else "bigint" if name.startswith("__connect_") else "text")
            cols = [sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t in wanted.items()]
            if key_names:
                cols.append(sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, key_names))))
            self._db().execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(ident, sql.SQL(", ").join(cols)))
            known.update(wanted)
            log.info("created table %s.%s (%s)", *table, ", ".join(wanted))
        elif wanted:
            if not self.config.evolves():
                raise ConnectException(f"Table {table[0]}.{table[1]} lacks columns {', '.join(wanted)} and "
                                       f"schema.evolution=none (auto.evolve=false): add them")
            for name, type_ in wanted.items():
                self._db().execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {}").format(
                    ident, sql.Identifier(name), sql.SQL(type_)))
            known.update(wanted)
            log.info("added columns to %s.%s: %s", *table, ", ".join(wanted))
        return known

    def _truncate(self, table: tuple[str, str]) -> None:
        if self.columns.get(table) or self._exists(table):
            self._db().execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(*table)))

    def _exists(self, table: tuple[str, str]) -> bool:
        return self._db().execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{table[0]}"."{table[1]}"',)
                                 ).fetchone() == (True,)

    def _write(self, table: tuple[str, str], changes: list[_Change]) -> None:
        self._ensure(table, changes)
        ident = sql.Identifier(*table)
        deletes = [ch[_KEY] for ch in changes if ch[_ROW] is None and ch[_KEY]]
        rows = [ch for ch in changes if ch[_ROW] is not None]
        if rows:
            self._write_rows(table, ident, rows)
        if deletes:
            names = [n for n, _ in deletes[0]]
            condition = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(n)) for n in names)
            with self._db().cursor() as cur:
                cur.executemany(sql.SQL("DELETE FROM {} WHERE {}").format(ident, condition),
                                [tuple(v for _, v in key) for key in deletes])

    def _write_rows(self, table: tuple[str, str], ident: sql.Identifier, rows: list[_Change]) -> None:
        """Rows whose values are all there in one statement; rows lacking some (unchanged TOAST values)
        in one statement per set of lacking columns, which leaves those columns out."""
        groups: dict[tuple[str, ...], list[_Change]] = {}
        for ch in rows:
            groups.setdefault(ch[_MISSING], []).append(ch)
        for missing, group in groups.items():
            self._write_group(table, ident, group, missing)

    def _write_group(self, table: tuple[str, str], ident: sql.Identifier, rows: list[_Change],
                     missing: tuple[str, ...]) -> None:
        schema = rows[-1][_SCHEMA]
        seen: dict[str, Any] = {}  # the rows' columns in order of first appearance
        for ch in rows:
            if ch[_ROW]:
                seen.update(ch[_ROW])
        names = [n for n in seen if n not in missing]
        key_names = [n for n, _ in rows[0][_KEY]] if rows[0][_KEY] and self.config.primary_key_mode != "none" else []
        if self.config.primary_key_mode == "kafka":
            names = [n for n in names if n not in key_names] + key_names
        convert = {n: _to_pg(f.schema if schema is not None and (f := schema.field(n)) is not None else None)
                   for n in names}
        mode = self.config.insert_mode if key_names else "insert"
        cols = sql.SQL(", ").join(map(sql.Identifier, names))
        # Plain inserts go straight into the table (a duplicate key fails the put either way); upserts and
        # updates stage the rows in a temporary table and merge them with one statement.
        temp = ident if mode == "insert" else sql.Identifier(f"_hw_stage_{table[1]}"[:60])
        if mode != "insert":  # (one round trip: no parameters, so both statements go as one query)
            self._db().execute(sql.SQL("DROP TABLE IF EXISTS {}; CREATE TEMP TABLE {} (LIKE {} INCLUDING DEFAULTS) "
                                      "ON COMMIT DROP").format(temp, temp, ident))
        columns = [(n, convert[n]) for n in names]
        as_is = all(c is _as_is for _, c in columns)
        kafka = self.config.primary_key_mode == "kafka"
        with self._db().cursor().copy(sql.SQL("COPY {} ({}) FROM STDIN").format(temp, cols)) as copy:
            write = copy.write_row
            if as_is and not kafka and len(names) > 1:  # the usual case: values as they are, in C
                pick = itemgetter(*names)
                for ch in rows:
                    row = ch[_ROW] or {}
                    try:
                        values = pick(row)
                    except KeyError:  # a row without some of the columns: NULL there
                        values = [row.get(n) for n in names]
                    write(values)
            else:
                for ch in rows:
                    row = ch[_ROW] or {}
                    if kafka:
                        row = {**row, **dict(ch[_KEY])}
                    if as_is:
                        write([row.get(n) for n in names])
                    else:
                        write([None if (v := row.get(n)) is None else c(v) for n, c in columns])
        if mode == "insert":
            if missing:
                self._lacking(table, missing, [ch[_KEY] for ch in rows])
            return
        if mode == "update":
            others = [n for n in names if n not in key_names]
            if not others:  # nothing but the key (and columns left as they are): nothing to set
                self._db().execute(sql.SQL("DROP TABLE {}").format(temp))
                return
            statement = sql.SQL("UPDATE {} t SET {} FROM {} s WHERE {}").format(
                ident, sql.SQL(", ").join(sql.SQL("{} = s.{}").format(sql.Identifier(n), sql.Identifier(n))
                                          for n in others),
                temp, sql.SQL(" AND ").join(sql.SQL("t.{} = s.{}").format(sql.Identifier(n), sql.Identifier(n))
                                            for n in key_names))
        else:  # upsert
            others = [n for n in names if n not in key_names]
            action = (sql.SQL("DO UPDATE SET {}").format(sql.SQL(", ").join(
                sql.SQL("{} = excluded.{}").format(sql.Identifier(n), sql.Identifier(n)) for n in others))
                if others else sql.SQL("DO NOTHING"))
            statement = sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT ({}) {}").format(
                ident, cols, cols, temp, sql.SQL(", ").join(map(sql.Identifier, key_names)), action)
            if missing:  # which rows were new: their missing columns stay NULL (xmax is 0 for an insert)
                statement += sql.SQL(" RETURNING {}, xmax = 0").format(
                    sql.SQL(", ").join(map(sql.Identifier, key_names)))
        if not (missing and mode == "upsert"):
            self._db()
            self.last_merge = statement  # run by the next statement, or sent with the commit
            return
        with self._db().cursor() as cur:
            cur.execute(statement)
            if missing and mode == "upsert":
                new = [r[:-1] for r in cur.fetchall() if r[-1]]
                if new:
                    self._lacking(table, missing, new)
        # (the staging table goes at commit: ON COMMIT DROP)

    def _lacking(self, table: tuple[str, str], missing: tuple[str, ...], keys: list[Any]) -> None:
        log.warning("%s: %d rows inserted into %s.%s carry unavailable values (unchanged TOAST) and the table had "
                    "no earlier row for them: columns %s are left NULL (e.g. key %s)", self.name, len(keys), *table,
                    list(missing), keys[0])

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        self._committed()
        return offsets  # every put committed its rows and offsets together

    def close(self, partitions: list[TopicPartition]) -> None:
        self._committed()

    def stop(self) -> None:
        if getattr(self, "conn", None) is not None:
            try:
                self._committed()
            except Exception as exc:  # noqa: BLE001 - stopping: said, and the connection closed anyway
                log.warning("%s: the last batch's commit: %s", self.name, exc)
            finally:
                self.conn.close()
