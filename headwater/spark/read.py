"""Reading one offset range of one partition, in a Spark Python worker, as Arrow record batches.

Each call opens its own connections and closes them at the end: Spark may run the call in any
worker process, and a reader object keeps nothing between calls. The next fetch is sent before
the current answer is decoded, so the broker reads while this process decodes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pyarrow as pa
from kafka.protocol.consumer import FetchRequest

from headwater.kafka.errors import ErrorCode
from headwater.kafka.records import iter_batches

from .client import RETRIABLE, Connection, KafkaClient, KafkaReadError, error_name
from .decode import Columns, decode_fetched
from .options import SourceOptions
from .planning import OffsetRange

__all__ = ["DataLoss", "read_range"]

_MAX_FETCH = 256 << 20  # the largest single batch a fetch is grown to hold
_MIN_FETCH = 64 << 10
_EMPTY_RETRIES = 20  # fetches that may come back empty before the range is declared unreadable


class DataLoss(KafkaReadError):
    """Records of the range are gone (deleted by retention, or the partition was truncated or recreated)."""


def read_range(opts: SourceOptions, part: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``part`` (offsets in [start, end)) as Arrow batches in the source's schema."""
    if part.end <= part.start:
        return
    client = KafkaClient(opts.bootstrap, opts.client_id, opts.timeout_s, opts.retries, opts.retry_backoff_s,
                         dict(opts.security))
    try:
        yield from _Reader(client, opts, part).batches()
    finally:
        client.close()


class _Reader:
    def __init__(self, client: KafkaClient, opts: SourceOptions, part: OffsetRange) -> None:
        self.client = client
        self.opts = opts
        self.part = part
        self.tp = (part.topic, part.partition)
        # Fetch sizes follow what is left of the range (a small micro-batch of a long backlog should not
        # make the broker read 8 MiB): bytes per offset are learnt from each answer, 1 KiB until then.
        self.bytes_per_offset = 1024.0
        self.min_bytes = _MIN_FETCH  # doubled when a batch does not fit (brokers that cut at the limit)
        self.conn: Connection | None = None
        self.version = 0
        self.in_flight: int | None = None  # the offset the sent, unanswered fetch asked for

    def _send(self, offset: int) -> None:
        conn = self.conn
        if conn is None:
            conn = self.conn = self.client.node(self.client.leader(self.tp, refresh=True))
            self.version = conn.versions[FetchRequest.API_KEY]
        size = int((self.part.end - offset) * self.bytes_per_offset * 1.25) + (16 << 10)
        size = max(self.min_bytes, min(self.opts.fetch_max_bytes, size))
        request = self.client.fetch_request(conn, self.tp, offset, size, self.opts.read_committed)
        conn.send(request)
        self.in_flight = offset

    def _reset(self) -> None:
        """Forget the connection (and any answer still coming on it): after an error or a leader change."""
        if self.conn is not None:
            self.client.drop(self.conn)
        self.conn = None
        self.in_flight = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        part, opts = self.part, self.opts
        offset = part.start
        failures = 0
        empty = 0
        while offset < part.end:
            try:
                if self.in_flight != offset:
                    if self.in_flight is not None:
                        self._reset()  # an answer for another offset is on its way: drop it with the connection
                    self._send(offset)
                assert self.conn is not None
                answer = self.client.fetch_answer(self.conn, self.version)
            except KafkaReadError:
                self._reset()
                failures += 1
                if failures > opts.retries:
                    raise
                time.sleep(opts.retry_backoff_s * failures)
                continue
            self.in_flight = None
            if answer.error:
                failures += 1
                if failures > opts.retries + 1:
                    raise KafkaReadError(f"{self._where()}: fetch at offset {offset} failed: "
                                         f"{error_name(answer.error)}", answer.error)
                offset = self._on_error(answer.error, offset)
                continue
            failures = 0
            data = answer.records
            next_offset = _next_offset(data, offset)
            if next_offset > offset:
                self.bytes_per_offset = len(data) / (next_offset - offset)
            if next_offset < part.end and next_offset > offset:
                try:
                    self._send(next_offset)  # pipelined: the broker reads while we decode
                except KafkaReadError:
                    self._reset()  # sent again on the next turn
            if next_offset == offset:
                offset = self._on_empty(answer, data, offset, empty)
                empty += 1
                continue
            empty = 0
            cols = Columns(opts.include_headers)
            decode_fetched(data, offset, part.end, cols, aborted=answer.aborted if opts.read_committed else None)
            if len(cols):
                yield cols.to_arrow(part.topic, part.partition)
            offset = next_offset

    def _on_error(self, code: int, offset: int) -> int:
        """The offset to fetch next after an error answer (or raise)."""
        self._reset()
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            earliest = self.client.list_offsets([self.tp], -2)[self.tp]
            if offset < earliest:
                return self._lost(offset, earliest, "were deleted (retention or DeleteRecords)")
            raise DataLoss(f"{self._where()}: offset {offset} is past the end of the partition; was it truncated "
                           f"or recreated?")
        if code in RETRIABLE or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
            time.sleep(self.opts.retry_backoff_s)
            return offset
        raise KafkaReadError(f"{self._where()}: fetch at offset {offset} failed: {error_name(code)}", code)

    def _on_empty(self, answer, data: bytes, offset: int, empty: int) -> int:
        """No complete batch came back: a batch larger than the fetch size, or records that are gone."""
        if data:  # a partial batch (an old broker that cuts at the byte limit): ask for more bytes
            if self.min_bytes >= _MAX_FETCH:
                raise KafkaReadError(f"{self._where()}: a record batch at offset {offset} is larger than "
                                     f"{_MAX_FETCH} bytes")
            self.min_bytes *= 2
            return offset
        stable = answer.last_stable_offset if self.opts.read_committed else answer.high_watermark
        if stable >= 0 and offset >= stable:
            # The range was planned against an end the partition no longer reaches.
            return self._lost(offset, self.part.end, f"are beyond the partition's end ({stable}); was it "
                                                     f"truncated or recreated?")
        if empty >= _EMPTY_RETRIES:
            raise KafkaReadError(f"{self._where()}: fetches at offset {offset} keep coming back empty "
                                 f"(high watermark {answer.high_watermark})")
        time.sleep(self.opts.retry_backoff_s * (empty + 1))
        return offset

    def _lost(self, offset: int, resume: int, why: str) -> int:
        if self.opts.fail_on_data_loss:
            raise DataLoss(f"{self._where()}: records from offset {offset} to {resume} {why}. Set option "
                           f"'failOnDataLoss' to false to skip them.")
        return resume

    def _where(self) -> str:
        return f"topic-partition {self.part.topic}-{self.part.partition} (range {self.part.start}..{self.part.end})"


def _next_offset(data: bytes, offset: int) -> int:
    """The offset after the last complete batch of a fetch answer (``offset`` when there is none)."""
    last = offset
    for _, header in iter_batches(data):
        last = max(last, header.last_offset + 1)
    return last
