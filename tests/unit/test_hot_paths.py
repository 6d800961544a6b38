"""The hand-written Produce/Fetch codecs (broker/protocol/hot_paths.py) against kafka-python's generated ones:
the same fields decoded from the same request bytes, the same answer bytes from the same handler dicts, for
every version they take; anything irregular is left to the general decoder."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.producer import ProduceRequest

from headwater.broker.protocol.codec import build_response, decode_request, encode_response, parse_request_header
from headwater.broker.protocol.hot_paths import decode_fast, encode_fast

_TP = ProduceRequest.TopicProduceData
_FT = FetchRequest.FetchTopic
_FORGOTTEN = FetchRequest.ForgottenTopic


def _frame(req: Any, correlation_id: int = 7, client_id: str | None = "client-é") -> memoryview:
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return memoryview(bytes(req.encode(header=True)))


def _both(frame: memoryview) -> tuple[Any, Any]:
    header = parse_request_header(frame)
    fast = decode_fast(header.api_key, header.api_version, frame, header.body_offset)
    assert fast is not None
    return fast, decode_request(header, frame)


def _produce(version: int, transactional_id: str | None) -> Any:
    return ProduceRequest[version](transactional_id=transactional_id, acks=-1, timeout_ms=30_000, topic_data=[
        _TP(name="tópico", partition_data=[_TP.PartitionProduceData(index=0, records=b"\x00" * 61 + bytes(range(200))),
                                           _TP.PartitionProduceData(index=3, records=None)]),
        _TP(name="other", partition_data=[]),
    ])


@pytest.mark.parametrize("version", range(3, 12))
@pytest.mark.parametrize("transactional_id", [None, "txn-1"])
def test_produce_request_decodes_as_the_general_decoder(version: int, transactional_id: str | None) -> None:
    fast, general = _both(_frame(_produce(version, transactional_id)))
    assert (fast.transactional_id, fast.acks, fast.timeout_ms) == \
        (general.transactional_id, general.acks, general.timeout_ms)
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in fast.topic_data] == \
        [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
         for t in general.topic_data]


def _fetch(version: int) -> Any:
    fields: dict[str, Any] = dict(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=52428800, isolation_level=1,
                                  session_id=0, session_epoch=-1, rack_id="rack-1", topics=[
                                      _FT(topic="a", partitions=[
                                          _FT.FetchPartition(partition=0, current_leader_epoch=5, fetch_offset=12345,
                                                             log_start_offset=7, partition_max_bytes=1048576),
                                          _FT.FetchPartition(partition=2, current_leader_epoch=-1, fetch_offset=0,
                                                             log_start_offset=-1, partition_max_bytes=10)]),
                                      _FT(topic="bé", partitions=[])])
    if version >= 7:
        fields["forgotten_topics_data"] = [_FORGOTTEN(topic="gone", partitions=[1, 4])]
    return FetchRequest[version](**fields)


@pytest.mark.parametrize("version", range(4, 12))
def test_fetch_request_decodes_as_the_general_decoder(version: int) -> None:
    fast, general = _both(_frame(_fetch(version)))
    for name in ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level"):
        assert getattr(fast, name) == getattr(general, name), name
    if version >= 7:
        assert (fast.session_id, fast.session_epoch) == (general.session_id, general.session_epoch)
        assert [(t.topic, list(t.partitions)) for t in fast.forgotten_topics_data] == \
            [(t.topic, list(t.partitions)) for t in general.forgotten_topics_data]
    if version >= 11:
        assert fast.rack_id == general.rack_id
    part_fields = ["partition", "fetch_offset", "partition_max_bytes"]
    part_fields += (["log_start_offset"] if version >= 5 else []) + (["current_leader_epoch"] if version >= 9 else [])
    assert [(t.topic, [[getattr(p, f) for f in part_fields] for p in t.partitions]) for t in fast.topics] == \
        [(t.topic, [[getattr(p, f) for f in part_fields] for p in t.partitions]) for t in general.topics]


def _not_taken(frame: bytes) -> None:
    view = memoryview(frame)
    header = parse_request_header(view)
    assert decode_fast(header.api_key, header.api_version, view, header.body_offset) is None


def test_irregular_requests_are_left_to_the_general_decoder() -> None:
    frame = bytes(_frame(_produce(10, None), client_id=None))
    header = parse_request_header(memoryview(frame))
    _not_taken(frame[:-3])  # truncated
    body = header.body_offset
    # acks, timeout, then the compact topic array: 0 is a null array (the schema has none)
    _not_taken(frame[: body + 7] + b"\x00" + frame[body + 8:])
    _not_taken(frame[:-1] + b"\x01\x00\x00")  # a top-level tagged field
    v8 = bytes(_frame(_produce(8, None), client_id=None))
    body8 = parse_request_header(memoryview(v8)).body_offset
    _not_taken(v8[: body8 + 8] + b"\xff\xff\xff\xff" + v8[body8 + 12:])  # null topic array
    name_at = body8 + 12 + 2
    _not_taken(v8[:name_at] + b"\xff\xfe" + v8[name_at + 2:])  # topic name not UTF-8
    old = bytes(_frame(ProduceRequest[3](transactional_id=None, acks=1, timeout_ms=1, topic_data=[])))
    assert decode_fast(0, 2, memoryview(old), 10) is None  # a version not taken here
    assert decode_fast(3, 9, memoryview(old), 10) is None  # an API not taken here


def _general(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return bytes(encode_response(build_response(api_key, version, body), 4242))


_PRODUCE_BODIES: list[dict[str, Any]] = [
    {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 123456789, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0},
    {"responses": [
        {"name": "tópico", "partition_responses": [
            {"index": 1, "error_code": 87, "base_offset": -1, "log_append_time_ms": 1700000000000,
             "log_start_offset": -1, "record_errors": [{"batch_index": 0, "batch_index_error_message": "bad"},
                                                       {"batch_index": 3, "batch_index_error_message": None}],
             "error_message": "One or more records have been rejected"},
            {"index": 2, "error_code": 29, "base_offset": -1, "error_message": None}]},  # the handler's short entry
        {"name": "__consumer_offsets", "partition_responses": [
            {"index": 0, "error_code": 17, "base_offset": -1,
             "error_message": "Cannot append to internal topic __consumer_offsets"}]},
        {"name": "empty", "partition_responses": []}], "throttle_time_ms": 250},
    {"responses": [], "throttle_time_ms": 0},
]


def _fetch_partition(index: int, records: bytes, aborted: list[dict[str, int]] | None,
                     error: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": 99, "last_stable_offset": 98,
            "log_start_offset": 3, "aborted_transactions": aborted, "preferred_read_replica": -1, "records": records}


_FETCH_BODIES: list[dict[str, Any]] = [
    {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "t", "partitions": [_fetch_partition(0, bytes(range(256)) * 3, None)]}]},
    {"throttle_time_ms": 17, "error_code": 0, "session_id": 0, "responses": [
        {"topic": "bé", "partitions": [
            _fetch_partition(0, b"", None),
            _fetch_partition(1, b"x" * 70, [{"producer_id": 7, "first_offset": 40}, {"producer_id": 9,
                                                                                     "first_offset": 41}]),
            _fetch_partition(2, b"", [], error=1),
            {"partition_index": 5, "error_code": 3, "high_watermark": -1, "last_stable_offset": -1,
             "log_start_offset": -1, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}]},
        {"topic": "none", "partitions": []}]},
    {"throttle_time_ms": 0, "error_code": 70, "session_id": 0, "responses": []},  # FETCH_SESSION_ID_NOT_FOUND
]


def _metadata_partition(index: int, error: int = 0) -> dict[str, Any]:
    return {"error_code": error, "partition_index": index, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
            "isr_nodes": [1, 2], "offline_replicas": [] if error == 0 else [2]}


_METADATA_BODIES: list[dict[str, Any]] = [
    {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "localhost", "port": 9092, "rack": None}],
     "cluster_id": "headwater-cluster", "controller_id": 1, "authorized_operations": None, "topics": [
         {"error_code": 0, "name": "t", "topic_id": None, "is_internal": False, "authorized_operations": None,
          "partitions": [_metadata_partition(i) for i in range(3)]},
         {"error_code": 0, "name": "__consumer_offsets", "is_internal": True, "authorized_operations": {3, 8},
          "partitions": [_metadata_partition(0, error=5)]},
         {"error_code": 3, "name": "gône", "is_internal": False, "partitions": [], "authorized_operations": None}]},
    {"throttle_time_ms": 9, "brokers": [{"node_id": 7, "host": "h", "port": 1, "rack": "r1"}], "cluster_id": None,
     "controller_id": 7, "topics": [], "authorized_operations": {2, 3, 4}},
]


_ANSWERS = ([(0, v, b) for v in range(3, 12) for b in _PRODUCE_BODIES]  # Produce v3-v11
            + [(1, v, b) for v in range(4, 12) for b in _FETCH_BODIES]  # Fetch v4-v11
            + [(3, v, b) for v in range(9) for b in _METADATA_BODIES])  # Metadata v0-v8


@pytest.mark.parametrize(("api", "version", "body"), _ANSWERS)
def test_answer_bytes_equal_the_general_encoder(api: int, version: int, body: dict[str, Any]) -> None:
    fast = encode_fast(api, version, 4242, body)
    assert fast is not None
    assert bytes(fast) == _general(api, version, body)


def test_other_apis_and_versions_are_left_to_the_general_encoder() -> None:
    assert encode_fast(0, 2, 1, _PRODUCE_BODIES[0]) is None
    assert encode_fast(1, 3, 1, _FETCH_BODIES[0]) is None
    assert encode_fast(1, 12, 1, _FETCH_BODIES[0]) is None
    assert encode_fast(3, 9, 1, _METADATA_BODIES[0]) is None
    assert encode_fast(18, 1, 1, {}) is None
