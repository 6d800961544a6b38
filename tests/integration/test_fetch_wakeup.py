"""A long-polling Fetch woken by an append, over the real broker and raw frames: the parked fetch is completed
from the Produce's own step, and its answer still leaves in request order on its connection."""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceResponse
from support import rawkafka
from support.rawkafka import Conn, fetch_req, produce_req

from headwater.kafka.records import Record, build_batch, decode_batch_records, iter_batches

pytestmark = pytest.mark.timeout(60)

MAX_WAIT_MS = 20_000  # far past the test's bound on the answer: only the append can wake the fetch in time


def _batch(value: bytes) -> bytes:
    return build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=value)])


def _values(records: bytes) -> list[bytes | None]:
    return [r.value for pos, _ in iter_batches(records) for r in decode_batch_records(records, pos)[1]]


def _answer(conn: Conn, resp_cls: Any, version: int) -> tuple[int, Any]:
    body = conn.recv_frame()
    (cid,) = struct.unpack_from(">i", body)
    return cid, resp_cls.decode(body, version=version, header=True)


def test_a_fetch_parked_on_a_connection_is_answered_before_the_produce_that_woke_it(broker: Any) -> None:
    topic = f"wakeup-{uuid.uuid4().hex[:8]}"
    rawkafka.create_topic(broker.port, topic)
    with Conn(broker.port) as conn:
        fetch_cid = conn.send(fetch_req(topic, offset=0, max_wait_ms=MAX_WAIT_MS, min_bytes=1))
        assert conn.nothing_within(0.3)  # parked: nothing to read yet
        sent = time.monotonic()
        produce_cid = conn.send(produce_req(topic, _batch(b"wake")))
        cid, fetched = _answer(conn, FetchResponse, 11)
        assert cid == fetch_cid  # the earlier request's answer first, though the produce woke it
        [partition] = fetched.responses[0].partitions
        assert partition.error_code == 0 and _values(partition.records) == [b"wake"]
        cid, produced = _answer(conn, ProduceResponse, 8)
        assert cid == produce_cid and produced.responses[0].partition_responses[0].base_offset == 0
        assert time.monotonic() - sent < 10, "the fetch was answered by its timeout, not the append"


def test_a_fetch_parked_on_another_connection_is_answered_by_a_produce(broker: Any) -> None:
    topic = f"wakeup-{uuid.uuid4().hex[:8]}"
    rawkafka.create_topic(broker.port, topic)
    with Conn(broker.port) as consumer:
        fetch_cid = consumer.send(fetch_req(topic, offset=0, max_wait_ms=MAX_WAIT_MS, min_bytes=1))
        assert consumer.nothing_within(0.3)
        sent = time.monotonic()
        assert rawkafka.produce(broker.port, topic, _batch(b"other")).error_code == 0
        cid, fetched = _answer(consumer, FetchResponse, 11)
        assert cid == fetch_cid and _values(fetched.responses[0].partitions[0].records) == [b"other"]
        assert time.monotonic() - sent < 10, "the fetch was answered by its timeout, not the append"
        # The connection carries on: the next long poll parks again and its timeout still answers it, empty.
        again = consumer.send(fetch_req(topic, offset=1, max_wait_ms=200, min_bytes=1))
        cid, empty = _answer(consumer, FetchResponse, 11)
        assert cid == again and empty.responses[0].partitions[0].records in (b"", None)
