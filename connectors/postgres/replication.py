"""A logical replication connection on psycopg 3's libpq layer (psycopg has no replication API):
create the slot (exporting its snapshot), stream pgoutput in COPY BOTH mode without blocking the
event loop, and tell the server which LSN is safe (standby status updates)."""

from __future__ import annotations

import asyncio
import struct
import time
from typing import Any, NamedTuple

import psycopg
from psycopg import pq

from .pgoutput import lsn_text

__all__ = ["Keepalive", "ReplicationStream", "WalData", "parse_copy_data"]

_PG_EPOCH_US = 946_684_800_000_000
_XLOG = struct.Struct(">QQq")
_KEEPALIVE = struct.Struct(">QqB")
_STATUS = struct.Struct(">cQQQqB")


class WalData(NamedTuple):  # a tuple: the hot path makes one per message
    start: int  # the LSN of this message
    end: int  # the server's WAL end when it was sent
    payload: bytes  # one pgoutput message


class Keepalive(NamedTuple):  # a tuple: the hot path makes one per message
    wal_end: int
    reply: bool


def parse_copy_data(data: Any) -> WalData | Keepalive | None:
    """One CopyData message of the stream; None for a kind this reader does not use."""
    kind = data[0]
    if kind == 0x77:  # 'w'
        start, end, _sent = _XLOG.unpack_from(data, 1)
        return WalData(start, end, bytes(data[25:]))
    if kind == 0x6B:  # 'k'
        end, _sent, reply = _KEEPALIVE.unpack_from(data, 1)
        return Keepalive(end, bool(reply))
    return None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class ReplicationStream:
    def __init__(self, params: dict[str, Any], slot: str, publication: str) -> None:
        self.params, self.slot, self.publication = params, slot, publication
        self.conn: psycopg.Connection[Any] | None = None
        self.streaming = False
        self.interrupted = False
        self._waiter: asyncio.Future[None] | None = None

    @property
    def pgconn(self) -> pq.abc.PGconn:
        assert self.conn is not None
        return self.conn.pgconn

    def connect(self) -> None:
        self.conn = psycopg.connect(**self.params, replication="database", autocommit=True)

    def _command(self, sql: str) -> pq.abc.PGresult:
        res = self.pgconn.exec_(sql.encode())
        if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK, pq.ExecStatus.COPY_BOTH):
            message = (res.error_message or self.pgconn.error_message).decode(errors="replace").strip()
            raise psycopg.OperationalError(f"{sql.split(' (')[0]}: {message}")
        return res

    def create_slot(self, export_snapshot: bool) -> tuple[int, str | None]:
        """Create the slot; returns its consistent point and, when asked, the name of the snapshot
        that sees the database exactly as of that point (valid until this connection's next command)."""
        mode = "EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"
        res = self._command(f"CREATE_REPLICATION_SLOT {_quote(self.slot)} LOGICAL pgoutput {mode}")
        lsn_value = res.get_value(0, 1)
        snapshot = res.get_value(0, 2)
        from .pgoutput import parse_lsn

        assert lsn_value is not None
        return parse_lsn(lsn_value.decode()), snapshot.decode() if snapshot else None

    def start(self, lsn: int) -> None:
        publication = self.publication.replace("'", "''")
        self._command(f"START_REPLICATION SLOT {_quote(self.slot)} LOGICAL {lsn_text(lsn)} "
                      f"(proto_version '1', publication_names '{publication}')")
        self.streaming = True

    def read_buffered(self) -> WalData | Keepalive | None:
        """The next message libpq already holds, or None when the next one must be waited for (a
        plain call: most messages of a busy stream are in the buffer, and need no coroutine)."""
        while True:
            data = self.next_buffered()
            if data is None:
                return None
            msg = parse_copy_data(data)
            if msg is not None:
                return msg

    def next_buffered(self) -> Any:
        """The next CopyData libpq already holds, as it is (a memoryview: 'w' + its header + one pgoutput
        message, or a 'k' keepalive; ``parse_copy_data`` reads it), or None when it must be waited for."""
        size, data = self.pgconn.get_copy_data(1)
        if size > 0:
            return data
        if size == -1:
            res = self.pgconn.get_result()
            message = (res.error_message if res is not None else b"").decode(errors="replace").strip()
            raise psycopg.OperationalError(f"the replication stream ended: {message or 'server closed it'}")
        if size == -2:
            raise psycopg.OperationalError(self.pgconn.error_message.decode(errors="replace").strip())
        return None

    async def read(self, timeout: float) -> WalData | Keepalive | None:
        """The next message, or None after ``timeout`` s without one."""
        pgconn = self.pgconn
        deadline = time.monotonic() + timeout
        while True:
            msg = self.read_buffered()
            if msg is not None:
                return msg
            left = deadline - time.monotonic()
            if left <= 0 or self.interrupted:
                return None
            await self._readable(pgconn.socket, left)
            if self.interrupted:
                return None
            pgconn.consume_input()

    def interrupt(self) -> None:
        """Make a waiting ``read`` return None now (the task is stopping)."""
        self.interrupted = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _readable(self, fd: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        ready = self._waiter = loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        loop.add_reader(fd, wake)
        try:
            await asyncio.wait_for(ready, timeout)
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(fd)
            self._waiter = None

    def confirm(self, flushed: int, reply: bool = False) -> None:
        """A standby status update: everything up to ``flushed`` is safe, the slot may move past it."""
        now = time.time_ns() // 1000 - _PG_EPOCH_US
        pgconn = self.pgconn
        pgconn.put_copy_data(_STATUS.pack(b"r", flushed, flushed, flushed, now, 1 if reply else 0))
        pgconn.flush()

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None
                self.streaming = False

