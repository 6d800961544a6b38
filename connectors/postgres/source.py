"""PostgresConnector: Debezium-compatible change data capture through pgoutput.

The task takes a consistent snapshot (the slot is created exporting its snapshot; every captured
table is read inside it with a server-side cursor), then streams the slot from the snapshot's
consistent point, so nothing is missed and nothing read twice. The LSN confirmed to the server
moves only past transactions whose every event's offset the worker has stored (``commit``), and,
when nothing is pending, to the WAL end that keepalives report (an idle captured table does not
pin WAL). After a restart the task resumes from the stored offset; events at or before it that
the slot sends again are skipped.

Exactly once (KIP-618): with the worker writing records and offsets in one Kafka transaction, that resume is
exact: every event (and, with provide.transaction.metadata, every BEGIN / END record, whose counts live in the
offsets as Debezium's transaction_* keys) is sent once. A snapshot cannot resume where a killed task left it
(its exported snapshot dies with the replication connection): it starts over, so it is exact only as one Kafka
transaction, which ``transaction.boundary=connector`` gives (and it commits each Postgres transaction whole).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from typing import Any, ClassVar

import psycopg
from psycopg import sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader

from headwater.connect.api import (
    ConnectException,
    ConnectorTransactionBoundaries,
    Converter,
    DataException,
    EncodedBatch,
    ExactlyOnceSupport,
    MetricSample,
    SourceConnector,
    SourceConnectorConfig,
    SourceRecord,
    SourceTask,
)
from headwater.connect.api.data import Schema, SchemaBuilder, SchemaType, Struct, array_schema

from .catalog import Catalog
from .config import PostgresSourceConfig
from .encoded import EncodedTable, Encoders, StreamedTx, encodes
from .events import TRANSACTION_SCHEMA, ChangeSource, TableEvents, TableSchema
from .pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    Truncate,
    Update,
    decode,
    lsn_text,
    parse_lsn,
)
from .replication import Keepalive, ReplicationStream, WalData, parse_copy_data

__all__ = ["PostgresConnector", "PostgresSourceTask"]

log = logging.getLogger(__name__)

Table = TableEvents  # a table's events as Connect records (TableSchema), or as the converters' bytes

# a 'w' CopyData from its second byte: the change's lsn, (WAL end, send time,) message kind, relation oid, tuple kind
_STREAMED = struct.Struct(">Q16xBIB")
LAG_CHECK_SECONDS = 10.0
SLOT_RELEASE_SECONDS = 5.0  # how long a start waits for a killed worker's replication connection to go
# the offset keys of Debezium's TransactionContext (provide.transaction.metadata): the transaction's id, and per
# table the number of its events so far, so a resumed task goes on counting (and sends no second BEGIN)
TX_OFFSET_ID = "transaction_id"
TX_OFFSET_COUNT = "transaction_data_collection_order_"
PROGRESS_SECONDS = 5.0  # how often a running snapshot logs its progress
TX_KEY = (SchemaBuilder.struct().name("io.debezium.connector.common.TransactionMetadataKey")
          .field("id", Schema(SchemaType.STRING)).build())
TX_COLLECTION = (SchemaBuilder.struct().name("io.debezium.connector.common.TransactionMetadataDataCollection")
                 .field("data_collection", Schema(SchemaType.STRING))
                 .field("event_count", Schema(SchemaType.INT64)).build())
TX_VALUE = (SchemaBuilder.struct().name("io.debezium.connector.common.TransactionMetadataValue")
            .field("status", Schema(SchemaType.STRING)).field("id", Schema(SchemaType.STRING))
            .field("event_count", Schema(SchemaType.INT64, True))
            .field("data_collections", array_schema(TX_COLLECTION, optional=True))
            .field("ts_ms", Schema(SchemaType.INT64)).build())
HEARTBEAT_KEY = (SchemaBuilder.struct().name("io.debezium.connector.common.ServerNameKey")
                 .field("serverName", Schema(SchemaType.STRING)).build())
HEARTBEAT_VALUE = (SchemaBuilder.struct().name("io.debezium.connector.common.Heartbeat")
                   .field("ts_ms", Schema(SchemaType.INT64)).build())


class PostgresConnector(SourceConnector):
    config_class: ClassVar[type[SourceConnectorConfig]] = PostgresSourceConfig
    aliases: ClassVar[tuple[str, ...]] = ("io.debezium.connector.postgresql.PostgresConnector",)

    def start(self, config: PostgresSourceConfig) -> None:
        self.config = config

    def task_class(self) -> type[SourceTask]:
        return PostgresSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [self.config.originals()]  # one slot, one reader: a single task, as Debezium

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        """Debezium's exactly-once mode. Streaming resumes exactly at the stored offset whatever the transaction
        boundary; a snapshot starts over after a kill, so its rows are sent once only when the whole snapshot
        is one transaction (transaction.boundary=connector); snapshot.mode=always reads every table again on
        each start by design."""
        mode = _snapshot_mode(config)
        if mode == "always":
            return ExactlyOnceSupport.UNSUPPORTED
        if mode == "no_data" or _boundary(config) == "connector":
            return ExactlyOnceSupport.SUPPORTED
        return ExactlyOnceSupport.UNSUPPORTED

    def can_define_transaction_boundaries(self, config: dict[str, str]) -> ConnectorTransactionBoundaries:
        """The task ends a transaction after each Postgres transaction (a consumer sees it whole) and after the
        snapshot's last row (a snapshot is all or nothing)."""
        return ConnectorTransactionBoundaries.SUPPORTED


def _snapshot_mode(config: dict[str, str]) -> str:
    mode = str(config.get("snapshot.mode", "initial")).strip()
    return "no_data" if mode == "never" else mode


def _boundary(config: dict[str, str]) -> str:
    return str(config.get("transaction.boundary", "poll")).strip().lower()


def _connect_error(config: PostgresSourceConfig, exc: Exception) -> ConnectException:
    return ConnectException(
        f"Cannot connect to PostgreSQL at {config.database_hostname}:{config.database_port} database "
        f"{config.database_dbname} as {config.database_user}: {config.connect_failure(str(exc).strip())}")


class PostgresSourceTask(SourceTask):
    stopping = polling = released = False

    async def start(self, config: dict[str, str]) -> None:
        self.config = c = PostgresSourceConfig.model_validate(config)
        self.partition = {"server": c.topic_prefix}
        self.skipped = c.skipped()
        self.stored = self.context.offset_storage_reader.offset(self.partition) or {}
        reporter = getattr(self.context, "errant_record_reporter", None)
        self.report_errant = reporter() if reporter is not None else None  # errors.tolerance, by the runtime
        # transaction.boundary=connector under exactly-once: the task says where transactions end
        transactions = getattr(self.context, "transaction_context", None)
        self.transactions = transactions() if callable(transactions) else transactions
        try:
            self.conn = psycopg.connect(**c.libpq_params(), autocommit=True)
        except psycopg.Error as exc:
            raise _connect_error(c, exc) from exc
        try:
            self._check_server()
        except BaseException:
            self.conn.close()
            raise
        self.catalog = Catalog(self.conn, c)
        self.encoders: Encoders | None = None  # set when the worker lets the task write JSON itself
        self.tables: dict[int, Table] = {}  # relation oid -> schema
        self.stream = ReplicationStream(c.libpq_params(), c.slot_name, c.publication_name)
        self.snapshot_tables: list[tuple[str, str, int]] = []
        self.snapshot_conn: psycopg.Connection[Any] | None = None
        self.snapshot_cursor: Any = None
        self.snapshot_table: Table | None = None
        self.held: tuple[Table, list[Any], bool, bool] | None = None  # a row, first and last in its table
        self.first_snapshot_record = True
        self.tx: Begin | None = None
        self.tx_counts: dict[str, int] = {}  # provide.transaction.metadata: the transaction's events per table
        # (commit lsn, last event lsn, end lsn) of each transaction with events, in commit order
        self.tx_last: deque[tuple[int, int, int]] = deque()
        self.streamed_tx: StreamedTx | None = None  # the transaction's text, when its changes take the fast path
        # the last fast-path change whose offset is not made yet, and its transaction (see _settle)
        self.streamed_last: tuple[int, Begin] | None = None
        self.confirmed = 0
        self.emitted: dict[str, Any] | None = None  # the offset of the last record handed over
        self.streaming_done = False
        self.next_heartbeat = self.next_lag_check = 0.0
        self.retained_wal = 0
        self.retained_wal_checked: float | None = None  # epoch seconds of the last reading
        self.snapshot_progress: dict[str, int] = {}
        self.events = 0  # change events streamed by this task (not the snapshot's)
        self.behind_ms = -1  # Debezium's MilliSecondsBehindSource: commit to processing, of the last change
        try:
            await self._released_slot()
            self._ensure_publication()
            await self._begin()
        except BaseException:
            self.released = True
            self.stream.close()
            self.conn.close()
            raise

    # -- setup ---------------------------------------------------------------------------------------

    def _check_server(self) -> None:
        level = self.conn.execute("SHOW wal_level").fetchone()
        if level is None or level[0] != "logical":
            raise ConnectException(f"PostgreSQL's wal_level is {level[0] if level else '?'}, not logical: set "
                                   f"wal_level = logical in postgresql.conf and restart the server")
        row = self.conn.execute("SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user"
                                ).fetchone()
        if not row or not row[0]:
            raise ConnectException(f"User {self.config.database_user} lacks the REPLICATION attribute: "
                                   f"ALTER ROLE {self.config.database_user} REPLICATION")

    def _ensure_publication(self) -> None:
        c = self.config
        exists = self.conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s",
                                   (c.publication_name,)).fetchone()
        mode = c.publication_autocreate_mode
        if exists:
            if mode == "filtered":
                self.conn.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(
                    sql.Identifier(c.publication_name), self._table_list()))
            return
        if mode == "disabled":
            raise ConnectException(f"Publication {c.publication_name} does not exist and "
                                   f"publication.autocreate.mode=disabled: create it (CREATE PUBLICATION ...)")
        name = sql.Identifier(c.publication_name)
        if mode == "all_tables":
            statement = sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(name)
        elif mode == "filtered":
            statement = sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(name, self._table_list())
        else:
            statement = sql.SQL("CREATE PUBLICATION {}").format(name)
        try:
            self.conn.execute(statement)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConnectException(f"Cannot create publication {c.publication_name}: {exc}. FOR ALL TABLES needs "
                                   f"a superuser: use publication.autocreate.mode=filtered, or create the "
                                   f"publication as a superuser") from exc
        log.info("created publication %s (%s)", c.publication_name, mode)

    def _table_list(self) -> sql.Composable:
        tables = self.catalog.tables() if hasattr(self, "catalog") else Catalog(self.conn, self.config).tables()
        if not tables:
            raise ConnectException("No table matches schema/table include and exclude lists: nothing to capture")
        return sql.SQL(", ").join(sql.Identifier(s, t) for s, t, _ in tables)

    def _slot(self) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT confirmed_flush_lsn::text, active, database FROM pg_replication_slots "
                                "WHERE slot_name = %s", (self.config.slot_name,)).fetchone()
        if row is None:
            return None
        if row[2] != self.config.database_dbname:
            raise ConnectException(f"Replication slot {self.config.slot_name} belongs to database {row[2]}: choose "
                                   f"another slot.name")
        return {"confirmed": row[0], "active": row[1]}

    async def _released_slot(self) -> None:
        """Wait until no connection streams the slot: the replication connection of a worker killed a moment
        ago lingers until the server sees its socket close; another connector's does not go away."""
        deadline = time.monotonic() + SLOT_RELEASE_SECONDS
        while (slot := self._slot()) is not None and slot["active"]:
            if time.monotonic() >= deadline:
                raise ConnectException(f"Replication slot {self.config.slot_name} is in use by another connection "
                                       f"(another connector?): give each connector its own slot.name")
            await asyncio.sleep(0.2)

    async def _begin(self) -> None:
        """Decide between snapshot and streaming, from the stored offset and snapshot.mode."""
        c, stored = self.config, self.stored
        snapshot_done = bool(stored) and (not stored.get("snapshot") or stored.get("last_snapshot_record"))
        want = c.snapshot_mode in ("always",) or (
            c.snapshot_mode in ("initial", "initial_only", "when_needed") and not snapshot_done)
        try:
            await asyncio.to_thread(self.stream.connect)
        except psycopg.Error as exc:
            raise _connect_error(c, exc) from exc
        slot = self._slot()
        if want:
            if slot is not None and self.transactions is None:
                # An earlier task streamed this slot, and at least once it may have sent changes whose offsets
                # were never stored (or snapshot rows since deleted): a new slot would lose the deletes made
                # until it exists. So the slot stays; the snapshot reads the tables as they are now, and the
                # stream then replays everything since the slot's confirmed position (sent again, a sink
                # converges on the end state).
                confirmed = slot["confirmed"]
                self.snapshot_lsn = parse_lsn(confirmed) if confirmed else 0
                log.info("slot %s exists: snapshot without it, then streaming from its confirmed position %s",
                         c.slot_name, confirmed)
                self._open_snapshot(None)
                return
            if slot is not None:
                # Drawn boundaries: nothing of an earlier attempt's unstored work was committed, and a snapshot
                # that is one transaction needs its own slot's exported snapshot: restart it whole
                self.conn.execute("SELECT pg_drop_replication_slot(%s)", (c.slot_name,))
            lsn, name = await asyncio.to_thread(self.stream.create_slot, True)
            log.info("created slot %s at %s; snapshot %s", c.slot_name, lsn, name)
            self.snapshot_lsn = lsn
            self._open_snapshot(name)
            return
        if slot is None:
            lsn, _ = await asyncio.to_thread(self.stream.create_slot, False)
            log.info("created slot %s at %s (no snapshot: snapshot.mode=%s)", c.slot_name, lsn, c.snapshot_mode)
        self._start_streaming()

    def _open_snapshot(self, name: str | None) -> None:
        conn = psycopg.connect(**self.config.libpq_params())
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        if name is not None:  # the slot's exported snapshot: the tables exactly at its consistent point
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(name)))
        self.snapshot_conn = conn
        self.snapshot_tables = self.catalog.tables()
        # Debezium's snapshot records: source.ts_ms is the snapshot transaction's CURRENT_TIMESTAMP, txId its id
        # (txid_current(), as Debezium's currentTransactionId; none on a standby)
        row = conn.execute("SELECT (extract(epoch FROM now()) * 1000000)::bigint, "
                           "CASE WHEN pg_is_in_recovery() THEN NULL ELSE txid_current() END").fetchone()
        assert row is not None
        self.snapshot_ts, self.snapshot_tx = int(row[0]), row[1]
        estimate = conn.execute("SELECT coalesce(sum(greatest(reltuples, 0)), 0)::bigint FROM pg_class WHERE oid = "
                                "ANY(%s)", ([oid for _, _, oid in self.snapshot_tables],)).fetchone()
        self.rows_scanned: dict[str, int] = {}  # per table, as Debezium's RowsScanned
        self.snapshot_progress = {"tables": len(self.snapshot_tables), "done": 0, "rows": 0,
                                  "estimated": int(estimate[0]) if estimate else 0}
        self.next_progress_log = time.monotonic() + PROGRESS_SECONDS
        log.info("snapshot of %d tables: %s", len(self.snapshot_tables),
                 ", ".join(f"{s}.{t}" for s, t, _ in self.snapshot_tables))

    def _start_streaming(self) -> None:
        start = int(self.stored.get("lsn_commit") or 0) if not self.stored.get("snapshot") else 0
        self.stream.start(start)
        log.info("streaming slot %s from %s", self.config.slot_name, start)

    # -- polling -------------------------------------------------------------------------------------

    def encode_with(self, key_converter: Converter, value_converter: Converter) -> bool:
        """JsonConverter on both sides and no transaction blocks to fill in: events are written as the
        converters' bytes directly (encoded.py), several times faster than through Connect values."""
        if self.config.provide_transaction_metadata or not encodes(key_converter, value_converter):
            return False
        self.encoders = Encoders(key_converter, value_converter)  # type: ignore[arg-type]
        self.tables = {oid: self._table(t) for oid, t in self.tables.items()}
        return True

    def _table(self, table: TableEvents) -> Table:
        if self.encoders is None or not isinstance(table, TableSchema):
            return table
        return EncodedTable(table, self.encoders)

    async def poll_encoded(self) -> EncodedBatch | None:
        records = await self._poll()
        if not records:
            return None
        emitted = self.emitted
        return EncodedBatch(records, self.partition if emitted else {}, dict(emitted) if emitted else {})

    async def poll(self) -> list[SourceRecord] | None:
        return await self._poll()

    async def _poll(self) -> list[Any] | None:
        """Records (SourceRecords, or encoded tuples once ``encode_with`` said yes), or None when idle."""
        if self.stopping:
            return None
        self.polling = True
        try:
            if self.snapshot_conn is not None:
                records = await self._poll_snapshot()
                if records and self.snapshot_conn is None:
                    self._end_transaction()  # the snapshot's last row: the snapshot is one transaction
                return records
            if self.streaming_done:
                await asyncio.sleep(self.config.poll_interval_ms / 1000)
                return None
            records = await self._poll_stream()
            if records and self.tx is None:
                self._end_transaction()  # the poll ends between Postgres transactions
            return records
        finally:
            self.polling = False
            if self.stopping:
                self._release()

    def _end_transaction(self) -> None:
        """With transaction.boundary=connector, commit after this poll's records: each Postgres transaction is
        one Kafka transaction's or within one (never split), and a snapshot is all or nothing."""
        if self.transactions is not None:
            self.transactions.commit_transaction()

    async def _poll_snapshot(self) -> list[Any] | None:
        limit = self.config.max_batch_size
        out: list[Any] = []
        while len(out) < limit:
            if self.snapshot_cursor is None:
                if not self.snapshot_tables:
                    break
                schema, table, oid = self.snapshot_tables.pop(0)
                self.snapshot_table = self._table(self.catalog.table_schema(schema, table, oid))
                columns = sql.SQL(", ").join(sql.Identifier(col.name) for col in _all_columns(self.snapshot_table))
                assert self.snapshot_conn is not None
                self.snapshot_cursor = self.snapshot_conn.cursor(name=f"hw_snapshot_{oid}")
                for col in self.snapshot_table.columns:  # values as the type's output function writes them,
                    self.snapshot_cursor.adapters.register_loader(col.type_oid, _OutputText)  # as pgoutput does
                self.snapshot_cursor.itersize = self.config.snapshot_fetch_size
                query = sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(schema, table))
                await asyncio.to_thread(self.snapshot_cursor.execute, query)
            rows = await asyncio.to_thread(self.snapshot_cursor.fetchmany, min(self.config.snapshot_fetch_size,
                                                                               limit - len(out)))
            if not rows:
                self.snapshot_cursor.close()
                self.snapshot_cursor = None
                self.snapshot_progress["done"] += 1
                if self.held is not None and self.held[0] is self.snapshot_table:
                    self.held = (*self.held[:3], True)  # the table is done: its held row was its last
                continue
            current = self.snapshot_table
            assert current is not None
            self.snapshot_progress["rows"] += len(rows)
            scanned = f"{current.schema}.{current.table}"
            self.rows_scanned[scanned] = self.rows_scanned.get(scanned, 0) + len(rows)
            if time.monotonic() >= self.next_lag_check:  # a long snapshot holds the slot back too
                self.next_lag_check = time.monotonic() + LAG_CHECK_SECONDS
                self._check_retained_wal()
            if time.monotonic() >= self.next_progress_log:
                self.next_progress_log = time.monotonic() + PROGRESS_SECONDS
                p = self.snapshot_progress
                log.info("snapshot of %s: %d of %d tables done, %d rows so far of about %d (now %s.%s)",
                         self.config.topic_prefix, p["done"], p["tables"], p["rows"], p["estimated"],
                         current.schema, current.table)
            width = max((col.position for col in current.columns), default=-1) + 1
            for row in rows:
                first_in_table = self.held is None or self.held[0] is not current
                if self.held is not None:
                    self._emit_snapshot_record(out, *self.held, last=False)
                full: list[Any] = [None] * width
                for col, value in zip(_all_columns(current), row, strict=True):
                    full[col.position] = value
                self.held = (current, full, first_in_table, False)
        if self.snapshot_cursor is None and not self.snapshot_tables:
            if self.held is not None:
                self._emit_snapshot_record(out, *self.held, last=True)
                self.held = None
            self._finish_snapshot()
        return out or None

    def _emit_snapshot_record(self, out: list[Any], table: Table, row: list[Any], first_in_table: bool,
                              last_in_table: bool, last: bool) -> None:
        """One ``r`` record, its source block as Debezium's: the snapshot marker (first, first_in_data_collection,
        true, last_in_data_collection, last), the slot's consistent point as lsn, the snapshot transaction's
        id and time, and sequence ``[null,"<lsn>"]`` (no commit before it)."""
        if last:
            marker = "last"
        elif self.first_snapshot_record:
            marker = "first"
        else:
            marker = ("last_in_data_collection" if last_in_table else
                      "first_in_data_collection" if first_in_table else "true")
        self.first_snapshot_record = False
        src = ChangeSource(self.snapshot_ts, marker, self.snapshot_tx, self.snapshot_lsn, None,
                           f'[null,"{self.snapshot_lsn}"]')
        offset = {"lsn": self.snapshot_lsn, "txId": self.snapshot_tx, "ts_usec": self.snapshot_ts, "snapshot": True,
                  "last_snapshot_record": last}
        self.emitted = offset
        try:
            after = table.row(row)
        except DataException as exc:
            self._unconvertible(exc, {"op": "read", "lsn": lsn_text(self.snapshot_lsn)})
            return
        out.append(table.event("r", None, after, src, self.partition, offset))

    def _finish_snapshot(self) -> None:
        assert self.snapshot_conn is not None
        self.snapshot_conn.execute("COMMIT")
        self.snapshot_conn.close()
        self.snapshot_conn = None
        log.info("snapshot done: %d tables, %d rows", self.snapshot_progress["done"], self.snapshot_progress["rows"])
        if self.config.snapshot_mode == "initial_only":
            self.streaming_done = True
            return
        self.stored = {}
        self.stream.start(self.snapshot_lsn)

    async def _poll_stream(self) -> list[Any] | None:
        out: list[Any] = []
        limit = self.config.max_batch_size
        wait = self.config.poll_interval_ms / 1000
        now = time.monotonic()
        if now >= self.next_lag_check:
            self.next_lag_check = now + LAG_CHECK_SECONDS
            self._check_retained_wal()
        interval = self.config.heartbeat_interval_ms / 1000
        if interval and now >= self.next_heartbeat:
            self.next_heartbeat = now + interval
            heartbeat = self._heartbeat()
            out.append(self.encoders.record(heartbeat) if self.encoders is not None else heartbeat)
        next_buffered = self.stream.next_buffered
        streamed = self._streamed if self.encoders is not None else None
        # connector-drawn boundaries: a poll that reaches max.batch.size inside a transaction reads on to its
        # commit (up to 4 times the size), so most polls end between transactions and can commit
        within = limit * 4 if self.transactions is not None else limit
        while len(out) < limit or (self.tx is not None and len(out) < within):
            data = next_buffered()
            if data is not None:
                if streamed is not None and streamed(data, out):
                    continue  # an insert or update written straight from the message's bytes
                msg = parse_copy_data(data)
                if msg is None:
                    continue
            else:
                # A transaction comes whole, right after its commit: a poll inside one waits for the rest, so
                # polls end between transactions (fewer and whole transactions when the worker commits per poll)
                msg = await self.stream.read(wait if not out or self.tx is not None else 0)
                if msg is None:
                    break
            self._settle()
            if isinstance(msg, Keepalive):
                self._idle_confirm(msg.wal_end, bool(out))
                if msg.reply:
                    self.stream.confirm(self.confirmed)
                continue
            self._on_message(msg, out)
        self._settle()
        return out or None

    def _streamed(self, data: Any, out: list[Any]) -> bool:
        """An insert, or an update without its old row, of a captured table in a transaction that is not
        replayed: its record written from the CopyData's bytes (no message objects, no text decoded). False
        for anything else, which the general path (``_on_message``) takes; a value that does not convert
        also goes there, to be refused or reported as before."""
        if data[0] != 0x77 or len(data) < 26:
            return False
        kind = data[25]
        if kind == 0x42 or kind == 0x43:  # 'B'egin, 'C'ommit: decoded in place (no copy, no WalData)
            self._on_decoded(decode(data[25:]), 0, out)  # (a commit settles the offset only when it reads it)
            return True
        tx = self.streamed_tx
        if tx is None or len(data) < 32:
            return False
        lsn, kind, oid, tuple_kind = _STREAMED.unpack_from(data, 1)
        if tuple_kind != 0x4E or not (kind == 0x49 or kind == 0x55):  # 'N': a new row only; 'I'nsert, 'U'pdate
            return False
        op = "c" if kind == 0x49 else "u"
        table = self.tables.get(oid)
        if type(table) is not EncodedTable or op in self.skipped:
            return False
        try:
            after, key, _ = table.streamed_row(data, 31)
        except (DataException, struct.error, IndexError):
            return False  # the general path refuses it, naming what is wrong
        out.append(table.streamed(op, None, after, key, lsn, tx))
        self.tx_events += 1
        self.tx_last_lsn = lsn
        self.streamed_last = (lsn, self.tx)  # type: ignore[assignment]  # (streamed_tx: within a transaction)
        self.events += 1
        return True

    def _settle(self) -> None:
        """The offset of the last fast-path change, made once for a run of them (before anything reads it)."""
        last = self.streamed_last
        if last is not None:
            lsn, tx = last
            self.emitted = {"lsn_proc": lsn, "lsn_commit": tx.final_lsn, "lsn": lsn, "txId": tx.xid,
                            "ts_usec": tx.commit_ts_us}
            self.behind_ms = max(0, time.time_ns() // 1_000_000 - tx.commit_ts_us // 1000)
            self.streamed_last = None

    def _heartbeat(self) -> SourceRecord:
        """Debezium's heartbeat: ``__debezium-heartbeat.<prefix>``, key {serverName}, value {ts_ms}, with the
        current offset. ``heartbeat.action.query`` runs first (writing to a table in the publication
        makes an idle database produce changes, so the slot moves on every server)."""
        c = self.config
        if c.heartbeat_action_query:
            try:
                self.conn.execute(c.heartbeat_action_query)
            except psycopg.Error as exc:
                log.warning("heartbeat.action.query failed: %s", exc)
        key = Struct(HEARTBEAT_KEY, {"serverName": c.topic_prefix})
        value = Struct(HEARTBEAT_VALUE, {"ts_ms": time.time_ns() // 1_000_000})
        return SourceRecord(f"__debezium-heartbeat.{c.topic_prefix}", value, key, None, HEARTBEAT_KEY,
                            HEARTBEAT_VALUE, None, [], self.partition if self.emitted else {},
                            dict(self.emitted) if self.emitted else {})

    def _check_retained_wal(self) -> None:
        """How much WAL the slot holds back; a warning past slot.max.retained.wal.bytes."""
        try:
            row = self.conn.execute("SELECT pg_current_wal_lsn() - confirmed_flush_lsn FROM pg_replication_slots "
                                    "WHERE slot_name = %s", (self.config.slot_name,)).fetchone()
        except psycopg.Error as exc:
            log.warning("cannot read the retained WAL of slot %s: %s", self.config.slot_name, exc)
            return
        self.retained_wal = int(row[0]) if row and row[0] is not None else 0
        self.retained_wal_checked = time.time()
        limit = self.config.slot_max_retained_wal_bytes
        if limit and self.retained_wal > limit:
            log.warning("replication slot %s retains %d MiB of WAL (over slot.max.retained.wal.bytes = %d MiB): "
                        "the worker is behind or stopped confirming; the server's disk fills until it catches "
                        "up", self.config.slot_name, self.retained_wal >> 20, limit >> 20)

    def _on_message(self, wal: WalData, out: list[Any]) -> None:
        self._on_decoded(decode(wal.payload), wal.start, out)

    def _on_decoded(self, msg: Any, lsn: int, out: list[Any]) -> None:
        """One pgoutput message; ``lsn``: where it is in the WAL (its WalData's start)."""
        kind = type(msg)
        if kind is Insert or kind is Update or kind is Delete:  # most messages: straight to the change
            self._on_change(msg, lsn, out)
            return
        if isinstance(msg, Begin):
            self.tx, self.tx_events = msg, 0
            self.tx_last_lsn = 0
            if self.config.provide_transaction_metadata:
                self.tx_counts = self._resumed_counts(msg)
            # the fast path (_streamed) takes the changes of a transaction none of which can be a replay
            stored = self.stored
            fresh = not stored or stored.get("snapshot") or msg.final_lsn > int(stored.get("lsn_commit") or 0)
            self.streamed_tx = StreamedTx(msg) if self.encoders is not None and fresh else None
            return
        if isinstance(msg, Commit):
            if self.tx is not None and self.tx_counts and not (self.stored and self._replayed(msg.end_lsn)):
                self._transaction_end(msg, out)  # (tx_counts: provide.transaction.metadata, events of ours)
            if self.tx is not None and self.tx_events:
                self.tx_last.append((msg.commit_lsn, self.tx_last_lsn, msg.end_lsn))
            else:
                self._settle()
                if self._all_stored():
                    self._confirm(msg.end_lsn)  # nothing of ours in it, nothing pending: the slot may move on
            self.tx = self.streamed_tx = None
            return
        if isinstance(msg, Relation):
            if self.catalog.filter.table(msg.namespace, msg.name):
                self.tables[msg.oid] = self._table(self.catalog.table_schema(
                    msg.namespace, msg.name, msg.oid, [(col.name, col.type_oid, col.type_modifier, col.key)
                                                       for col in msg.columns]))
            else:
                self.tables.pop(msg.oid, None)
            return
        if isinstance(msg, Truncate):
            self._on_change(msg, lsn, out)

    def _on_change(self, msg: Insert | Update | Delete | Truncate, lsn: int, out: list[Any]) -> None:
        tx = self.tx
        if tx is None or (self.stored and self._replayed(lsn)):
            return
        final = tx.final_lsn
        src = ChangeSource(tx.commit_ts_us, "false", tx.xid, lsn, final, f'["{final}","{lsn}"]')
        offset = {"lsn_proc": lsn, "lsn_commit": final, "lsn": lsn, "txId": tx.xid, "ts_usec": tx.commit_ts_us}
        try:
            records = self._events(msg, src, offset)
        except DataException as exc:
            self._unconvertible(exc, {"op": type(msg).__name__.lower(), "lsn": lsn_text(lsn), "txId": tx.xid})
            return  # left out: the transaction's commit (or a later event's offset) moves the slot past it
        if records:
            if self.config.provide_transaction_metadata:
                if not self.tx_counts:  # the transaction's first event (a resumed task has the stored counts)
                    out.append(self._transaction_record("BEGIN", offset))
                self._transaction_blocks(records)
                offset.update(self._transaction_offset())  # the records share this offset: stored with them
            out.extend(records)
            self.tx_events += 1
            self.tx_last_lsn = lsn
            self.emitted = offset
            self.events += len(records)
            self.behind_ms = max(0, time.time_ns() // 1_000_000 - tx.commit_ts_us // 1000)

    def _unconvertible(self, exc: DataException, where: dict[str, Any]) -> None:
        """A change (or snapshot row) that cannot be converted: errors.tolerance decides, through the
        runtime's reporter. With ``all`` it is logged and left out, and the slot moves on past it; with
        ``none`` the task fails naming the table, the column and the problem (a restart would meet the
        same WAL record again)."""
        error = DataException(f"{exc} (change at {', '.join(f'{k} {v}' for k, v in where.items())})")
        if self.report_errant is None:
            raise error from exc
        error.__cause__ = exc
        self.report_errant(where, error)
        log.warning("left out a change that cannot be converted (errors.tolerance=all): %s", error)

    # -- transaction metadata (provide.transaction.metadata) --------------------------------------------

    def _transaction_id(self) -> str:
        assert self.tx is not None
        return f"{self.tx.xid}:{self.tx.final_lsn}"

    def _transaction_offset(self) -> dict[str, Any]:
        """The transaction's place in an offset, as Debezium's TransactionContext stores it."""
        return {TX_OFFSET_ID: self._transaction_id(), **{TX_OFFSET_COUNT + c: n for c, n in self.tx_counts.items()}}

    def _resumed_counts(self, begin: Begin) -> dict[str, int]:
        """The events per table the stored offset says were sent of this transaction (the slot resends it
        after a restart), so the resumed task sends no second BEGIN and its END counts every event."""
        stored = self.stored
        if (not stored or stored.get("snapshot") or int(stored.get("lsn_commit") or 0) != begin.final_lsn
                or stored.get(TX_OFFSET_ID) != f"{begin.xid}:{begin.final_lsn}"):
            return {}
        return {k[len(TX_OFFSET_COUNT):]: int(v) for k, v in stored.items() if k.startswith(TX_OFFSET_COUNT)}

    def _transaction_end(self, commit: Commit, out: list[Any]) -> None:
        """The END record, its offset past every event of the transaction (lsn_proc: the commit's end), so a
        restart sends it once: again if only the events were stored, not at all if it was."""
        tx = self.tx
        assert tx is not None
        offset = {"lsn_proc": commit.end_lsn, "lsn_commit": tx.final_lsn, "lsn": commit.end_lsn, "txId": tx.xid,
                  "ts_usec": tx.commit_ts_us, **self._transaction_offset()}
        out.append(self._transaction_record("END", offset))
        self.emitted = offset
        self.tx_events += 1
        self.tx_last_lsn = commit.end_lsn

    def _transaction_blocks(self, records: list[SourceRecord]) -> None:
        """Each change event's ``transaction`` block: {id, total_order, data_collection_order}."""
        for record in records:
            value = record.value
            if not isinstance(value, Struct) or "transaction" not in value.values:
                continue  # a tombstone
            source = value.values["source"].values
            collection = f"{source['schema']}.{source['table']}"
            self.tx_counts[collection] = self.tx_counts.get(collection, 0) + 1
            value.values["transaction"] = Struct(TRANSACTION_SCHEMA, {
                "id": self._transaction_id(), "total_order": sum(self.tx_counts.values()),
                "data_collection_order": self.tx_counts[collection]})

    def _transaction_record(self, status: str, offset: dict[str, Any]) -> SourceRecord:
        """Debezium's BEGIN / END record on ``<prefix>.transaction``."""
        assert self.tx is not None
        end = status == "END"
        counts = self.tx_counts if end else {}
        value = Struct(TX_VALUE, {
            "status": status, "id": self._transaction_id(),
            "event_count": sum(counts.values()) if end else None,
            "data_collections": [Struct(TX_COLLECTION, {"data_collection": c, "event_count": n})
                                 for c, n in counts.items()] if end else None,
            "ts_ms": self.tx.commit_ts_us // 1000})
        key = Struct(TX_KEY, {"id": self._transaction_id()})
        return SourceRecord(f"{self.config.topic_prefix}.transaction", value, key, None, TX_KEY, TX_VALUE,
                            self.tx.commit_ts_us // 1000, [], self.partition, dict(offset))

    def _events(self, msg: Insert | Update | Delete | Truncate, src: ChangeSource,
                offset: dict[str, Any]) -> list[Any]:
        if isinstance(msg, Insert):
            table = self.tables.get(msg.relation_oid)
            if table is None or "c" in self.skipped:
                return []
            return [table.event("c", None, table.row(msg.new), src, self.partition, offset)]
        if isinstance(msg, Truncate):
            if "t" in self.skipped:
                return []
            return [t.event("t", None, None, src, self.partition, offset)
                    for oid in msg.relation_oids if (t := self.tables.get(oid)) is not None]
        table = self.tables.get(msg.relation_oid)
        if table is None:
            return []
        if isinstance(msg, Delete):
            if "d" in self.skipped:
                return []
            gone = table.row(msg.old)
            out = [table.event("d", gone, None, src, self.partition, offset)]
            if self.config.tombstones_on_delete:
                out.append(table.tombstone(gone, self.partition, offset, src.ts_us // 1000))
            return out
        if "u" in self.skipped:
            return []
        new = msg.new
        if msg.old is not None and not msg.old_is_key and UNCHANGED_TOAST in new:
            new = _from_old(msg.old, new)
        after = table.row(new)
        if msg.old is not None and _key_changed(table, msg.old, msg.new):
            # A key change, whatever the replica identity (the old key, or the whole old row under FULL):
            # delete, tombstone, create, as Debezium emits it, so consumers by key drop the old key.
            gone = table.row(msg.old)
            out = [table.event("d", gone, None, src, self.partition, offset)]
            if self.config.tombstones_on_delete:
                out.append(table.tombstone(gone, self.partition, offset, src.ts_us // 1000))
            out.append(table.event("c", None, after, src, self.partition, offset))
            return out
        before: Struct | None = table.row(msg.old) if msg.old is not None and not msg.old_is_key else None
        return [table.event("u", before, after, src, self.partition, offset)]

    def _replayed(self, lsn: int) -> bool:
        """An event the stored offset already covers (the slot resends from its confirmed LSN)."""
        stored = self.stored
        if not stored or stored.get("snapshot") or self.tx is None:
            return False
        commit = int(stored.get("lsn_commit") or 0)
        if self.tx.final_lsn != commit:
            return self.tx.final_lsn < commit
        return lsn <= int(stored.get("lsn_proc") or stored.get("lsn") or 0)

    # -- what operators see --------------------------------------------------------------------------

    def metrics(self) -> dict[str, Any]:
        """The snapshot's progress and the slot's lag, named after Debezium's snapshot and streaming
        metrics (served at GET /connectors/{name}/tasks/{id}/metrics)."""
        if "events" not in vars(self):  # asked while start() is still connecting
            return {"phase": "starting"}
        p = self.snapshot_progress
        running = self.snapshot_conn is not None
        table = self.snapshot_table if running else None
        phase = "snapshot" if running else ("done" if self.streaming_done else "streaming")
        out: dict[str, Any] = {"phase": phase, "slot.name": self.config.slot_name}
        if p:
            out["snapshot"] = {
                "running": running, "completed": not running and p["done"] == p["tables"],
                "tables.total": p["tables"], "tables.done": p["done"],
                "tables.remaining": p["tables"] - p["done"], "rows.scanned": p["rows"],
                "rows.estimated": p["estimated"],
                "table": f"{table.schema}.{table.table}" if table is not None else None}
        out["streaming"] = {
            "events": self.events, "confirmed.lsn": lsn_text(self.confirmed) if self.confirmed else None,
            "retained.wal.bytes": self.retained_wal if self.retained_wal_checked is not None else None,
            "retained.wal.checked.ms": (int(self.retained_wal_checked * 1000)
                                        if self.retained_wal_checked is not None else None),
            "slot.max.retained.wal.bytes": self.config.slot_max_retained_wal_bytes}
        return out

    def exported_metrics(self) -> list[MetricSample]:
        """Debezium's snapshot and streaming metrics under the names its JMX-exporter rules give them
        (``debezium.postgres:type=connector-metrics,context=snapshot|streaming,server=<topic.prefix>`` ->
        ``debezium_metrics_<Attribute>{plugin,name,context}``), and the slot's retained WAL."""
        if "events" not in vars(self):
            return []
        snapshot = {"plugin": "postgres", "name": self.config.topic_prefix, "context": "snapshot"}
        streaming = {**snapshot, "context": "streaming"}
        out: list[MetricSample] = []
        p = self.snapshot_progress
        if p:
            running = self.snapshot_conn is not None
            out += [MetricSample("debezium_metrics_TotalTableCount", p["tables"], snapshot),
                    MetricSample("debezium_metrics_RemainingTableCount", p["tables"] - p["done"], snapshot),
                    MetricSample("debezium_metrics_SnapshotRunning", int(running), snapshot),
                    MetricSample("debezium_metrics_SnapshotCompleted", int(not running and p["done"] == p["tables"]),
                                 snapshot)]
            out += [MetricSample("debezium_metrics_RowsScanned", rows, {**snapshot, "table": table})
                    for table, rows in sorted(self.rows_scanned.items())]
        out += [MetricSample("debezium_metrics_TotalNumberOfEventsSeen", self.events, streaming),
                MetricSample("debezium_metrics_MilliSecondsBehindSource", self.behind_ms, streaming),
                MetricSample("debezium_metrics_Connected", int(bool(self.stream.streaming)), streaming)]
        if self.retained_wal_checked is not None:
            out.append(MetricSample("headwater_postgres_slot_retained_wal_bytes", self.retained_wal,
                                    {"slot": self.config.slot_name},
                                    "WAL the replication slot holds back on the server (pg_replication_slots)"))
        return out

    # -- confirming LSNs -------------------------------------------------------------------------------

    def _all_stored(self) -> bool:
        current = self.context.offset_storage_reader.offset(self.partition)
        return self.emitted is None or current == self.emitted

    def _idle_confirm(self, wal_end: int, have_unreturned: bool) -> None:
        if self.tx is None and not have_unreturned and self._all_stored():
            self._confirm(wal_end)

    def _confirm(self, lsn: int) -> None:
        if lsn > self.confirmed:
            self.confirmed = lsn
            self.stream.confirm(lsn)

    async def commit(self) -> None:
        """The worker stored offsets: confirm every transaction they fully cover. A coroutine, so it runs
        on the event loop like the reads (one libpq connection must not be used from two threads)."""
        stored = self.context.offset_storage_reader.offset(self.partition)
        if not stored or stored.get("snapshot") or not self.stream.streaming:
            return
        commit = int(stored.get("lsn_commit") or 0)
        proc = int(stored.get("lsn_proc") or 0)
        safe = 0
        pending = self.tx_last  # in commit order: the covered ones come first
        while pending:
            commit_lsn, last_event, end = pending[0]
            if commit_lsn < commit or (commit_lsn == commit and proc >= last_event):
                safe = max(safe, end)
                pending.popleft()
            else:
                break
        if safe:
            self._confirm(safe)

    def stop(self) -> None:
        """Called while a poll may be waiting: that poll returns at once and releases the connections."""
        self.stopping = True
        self.stream.interrupt()
        if not self.polling:
            self._release()

    def _drop_slot(self) -> None:
        """slot.drop.on.stop: drop the slot, once the server has let go of our replication connection."""
        busy: bool | str = False
        for _ in range(30):
            busy = _drop_slot_once(self.conn, self.config.slot_name)
            if busy is True:
                log.info("dropped slot %s (slot.drop.on.stop)", self.config.slot_name)
            if not isinstance(busy, str):
                return
            time.sleep(0.1)  # on stop only, and at most 3 s
        log.warning("could not drop slot %s: %s", self.config.slot_name, busy)

    def _release(self) -> None:
        if self.released:
            return
        self.released = True
        if self.snapshot_conn is not None:
            try:
                self.snapshot_conn.close()
            except psycopg.Error:
                pass
        self.stream.close()
        if self.config.slot_drop_on_stop:
            self._drop_slot()
        self.conn.close()


def _drop_slot_once(conn: psycopg.Connection[Any], slot: str) -> bool | str:
    """True: dropped; False: it cannot be (logged); text: still in use, try again."""
    try:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    except psycopg.errors.ObjectInUse as exc:
        return str(exc)  # the server has not seen our replication connection go yet
    except psycopg.Error as exc:
        log.warning("could not drop slot %s: %s", slot, exc)
        return False
    return True


class _OutputText(Loader):
    """A column's text form, untouched (a ``::text`` cast is not always the output function: it trims
    char(n) and adds the netmask to inet)."""

    def load(self, data: Buffer) -> str:
        return bytes(data).decode("utf-8")


def _all_columns(table: Table) -> list[Any]:
    return sorted(table.columns, key=lambda c: c.position)


def _from_old(old: tuple[Any, ...], new: tuple[Any, ...]) -> tuple[Any, ...]:
    """An update's new row with its unchanged TOAST values taken from the whole old row (REPLICA IDENTITY
    FULL: the server sends the old row's values in full), as Debezium does; the placeholder only where the
    old row lacks them too."""
    return tuple(old[i] if now is UNCHANGED_TOAST and i < len(old) and type(old[i]) is str else now
                 for i, now in enumerate(new))


def _key_changed(table: Table, old: tuple[Any, ...], new: tuple[Any, ...]) -> bool:
    """Whether an update's old tuple (the old replica identity, or the whole old row) has another key than
    the new row. False when the old tuple does not carry every key column (a replica identity index other
    than the key, or message.key.columns outside it): then nothing says the key changed."""
    changed = False
    for column in table.columns:
        if not column.key:
            continue
        position = column.position
        was = old[position] if position < len(old) else None
        if was is None or was is UNCHANGED_TOAST:
            return False
        now = new[position] if position < len(new) else None
        changed = changed or (now is not UNCHANGED_TOAST and now != was)
    return changed
