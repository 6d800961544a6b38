"""KIP-467 record-level errors in Produce, as users of real clients see them: a batch with null-key
records sent to a compacted topic, or with CreateTime timestamps outside the topic's
``message.timestamp.before/after.max.ms``, is rejected whole, nothing of it is appended, and the
response names each bad record (``record_errors``) with Kafka's messages."""

from __future__ import annotations

import re
import time
from functools import partial

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError, InvalidTimestampError, KafkaError
from support import rawkafka
from support.hwclients import TIMEOUT, create_topic, unique

from headwater.kafka.compression import GZIP, NONE, ZSTD
from headwater.kafka.records import Record, build_batch

INVALID_RECORD, INVALID_TIMESTAMP, MESSAGE_TOO_LARGE = 87, 32, 10
# librdkafka's "an invalid record in the same batch caused the failure of this message too"
LIBRDKAFKA_INVALID_DIFFERENT_RECORD = -138

produce = partial(rawkafka.produce, client_id="record-errors")
end_offset = partial(rawkafka.end_offset, client_id="record-errors")


def _now() -> int:
    return int(time.time() * 1000)


def _null_key_message(topic: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {topic}-0"


@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD], ids=["none", "gzip", "zstd"])
def test_null_keys_on_compacted_topic_listed_per_record(broker, codec: int) -> None:
    topic = unique("nokey")
    create_topic("confluent", broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    now = _now()
    keys = [b"a", None, b"b", None, None, b"c"]
    batch = build_batch([Record(i, now, k, b"v%d" % i) for i, k in enumerate(keys)], codec=codec)
    bad = [1, 3, 4]
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{_null_key_message(topic)}')" for i in bad)
    for version in (8, 11):  # v9+ is flexible
        p = produce(broker.port, topic, batch, acks=-1, version=version)
        assert p.error_code == INVALID_RECORD
        assert [(e.batch_index, e.batch_index_error_message) for e in p.record_errors] == [
            (i, _null_key_message(topic)) for i in bad]
        assert p.error_message == ("One or more records have been rejected due to 3 record errors in total, and "
                                   f"only showing the first three errors at most: [{shown}]")
        assert (p.base_offset, p.log_start_offset) == (-1, 0)
    assert end_offset(broker.port, topic) == 0  # nothing of the batch was appended
    # A keyed batch goes in; below v8 the same refusal carries only the code.
    keyed = build_batch([Record(0, now, b"k", b"v")], codec=codec)
    assert produce(broker.port, topic, keyed, version=8).error_code == 0
    assert produce(broker.port, topic, batch, version=7).error_code == INVALID_RECORD
    assert end_offset(broker.port, topic) == 1


def test_confluent_kafka_reports_each_message(broker) -> None:
    """librdkafka fails the records the broker named with INVALID_RECORD and the rest of the batch with
    its own "invalid record in the same batch" error; none is stored."""
    topic = unique("nokeycf")
    create_topic("confluent", broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    prod = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100, "acks": "all",
                     "message.timeout.ms": int(TIMEOUT * 1000)})
    reports: dict[bytes, int] = {}
    for i, key in enumerate([b"a", None, b"b", None]):
        prod.produce(topic, key=key, value=b"%d" % i, partition=0,
                     on_delivery=lambda err, msg: reports.__setitem__(msg.value() or b"", err.code() if err else 0))
    assert prod.flush(TIMEOUT) == 0
    assert reports == {b"0": LIBRDKAFKA_INVALID_DIFFERENT_RECORD, b"1": INVALID_RECORD,
                       b"2": LIBRDKAFKA_INVALID_DIFFERENT_RECORD, b"3": INVALID_RECORD}
    assert end_offset(broker.port, topic) == 0


def test_kafka_python_reports_each_record(broker) -> None:
    """kafka-python raises InvalidRecordError with the broker's message for the records named, and a
    generic error for the others of the batch."""
    topic = unique("nokeykp")
    create_topic("kafka-python", broker.bootstrap, topic, 1, {"cleanup.policy": "compact"})
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=100, acks="all", retries=0,
                         request_timeout_ms=15000)
    try:
        futures = [prod.send(topic, key=k, value=b"x", partition=0) for k in (b"a", None, b"b")]
        prod.flush(timeout=TIMEOUT)
    finally:
        prod.close(timeout=10)
    errors = [f.exception for f in futures]
    assert isinstance(errors[1], InvalidRecordError)
    assert _null_key_message(topic) in str(errors[1])
    assert all(isinstance(e, KafkaError) and not isinstance(e, InvalidRecordError) for e in (errors[0], errors[2]))
    assert end_offset(broker.port, topic) == 0


def test_timestamps_out_of_bounds(broker) -> None:
    topic = unique("tsbounds")
    hour = 3_600_000
    create_topic("confluent", broker.bootstrap, topic, 1, {"message.timestamp.before.max.ms": str(hour),
                                                           "message.timestamp.after.max.ms": str(hour)})
    now = _now()
    stamps = [now, now - 2 * hour, now + 2 * hour, now - 60_000, -1]
    batch = build_batch([Record(i, ts, b"k", b"v") for i, ts in enumerate(stamps)])
    p = produce(broker.port, topic, batch, version=8)
    assert p.error_code == INVALID_TIMESTAMP
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [e.batch_index for e in p.record_errors] == [1, 2]
    for e, i in zip(p.record_errors, (1, 2), strict=True):
        m = re.fullmatch(rf"Timestamp {stamps[i]} of message with offset {i} is out of range\. "
                         r"The timestamp should be within \[(\d+), (\d+)\]", e.batch_index_error_message)
        assert m is not None, e.batch_index_error_message
        low, high = int(m.group(1)), int(m.group(2))
        assert high - low == 2 * hour and abs(low + hour - now) < 60_000
    assert end_offset(broker.port, topic) == 0
    ok = build_batch([Record(i, ts, b"k", b"v") for i, ts in enumerate([now, now - 60_000, -1])])
    assert produce(broker.port, topic, ok, version=8).error_code == 0
    assert end_offset(broker.port, topic) == 3

    # confluent-kafka fails the whole batch with INVALID_TIMESTAMP.
    prod = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100})
    codes: list[int] = []
    for ts in (_now(), _now() - 2 * hour):
        prod.produce(topic, key=b"k", value=b"v", partition=0, timestamp=ts,
                     on_delivery=lambda err, msg: codes.append(err.code() if err else 0))
    assert prod.flush(TIMEOUT) == 0
    assert codes == [INVALID_TIMESTAMP, INVALID_TIMESTAMP]
    # kafka-python raises InvalidTimestampError.
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, retries=0, request_timeout_ms=15000)
    try:
        fut = kp.send(topic, key=b"k", value=b"v", partition=0, timestamp_ms=_now() + 2 * hour)
        kp.flush(timeout=TIMEOUT)
    finally:
        kp.close(timeout=10)
    assert isinstance(fut.exception, InvalidTimestampError)
    assert end_offset(broker.port, topic) == 3


def test_difference_max_ms_and_log_append_time(broker) -> None:
    """The deprecated difference.max.ms bounds both sides while before/after are unset (Kafka 3.x);
    LogAppendTime topics ignore the bounds; a producer may not send LogAppendTime itself."""
    hour = 3_600_000
    diff, stamped = unique("tsdiff"), unique("tsappend")
    create_topic("confluent", broker.bootstrap, diff, 1, {"message.timestamp.difference.max.ms": str(hour)})
    create_topic("confluent", broker.bootstrap, stamped, 1, {"message.timestamp.type": "LogAppendTime",
                                                             "message.timestamp.before.max.ms": str(hour)})
    old = build_batch([Record(0, _now() - 2 * hour, b"k", b"v")])
    p = produce(broker.port, diff, old, version=8)
    assert (p.error_code, [e.batch_index for e in p.record_errors]) == (INVALID_TIMESTAMP, [0])
    assert produce(broker.port, stamped, old, version=8).error_code == 0
    producer_set = build_batch([Record(0, _now(), b"k", b"v")], attributes=0x08)  # LogAppendTime bit
    p = produce(broker.port, stamped, producer_set, version=8)
    assert p.error_code == INVALID_TIMESTAMP
    assert p.record_errors[0].batch_index_error_message.endswith(
        "key=1 bytes, value=1 bytes). Producer should not set timestamp type to LogAppendTime.")
    assert end_offset(broker.port, stamped) == 1


def test_message_too_large_as_kafka_answers(broker) -> None:
    topic = unique("toolarge")
    create_topic("confluent", broker.bootstrap, topic, 1, {"max.message.bytes": "1000"})
    big = build_batch([Record(0, _now(), b"k", b"x" * 2000)])
    p = produce(broker.port, topic, big, version=8)
    assert (p.error_code, p.error_message, p.log_start_offset, list(p.record_errors)) == (
        MESSAGE_TOO_LARGE, None, -1, [])
    assert end_offset(broker.port, topic) == 0
