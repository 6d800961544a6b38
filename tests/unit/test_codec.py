import struct

import pytest
from kafka.protocol.metadata import ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from headwater.broker.protocol.codec import (
    MalformedRequest,
    build_response,
    decode_request,
    encode_unsupported_api_versions,
    parse_request_header,
)


def _frame(req, correlation_id: int = 7, client_id: str = "t") -> memoryview:
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return memoryview(bytes(req.encode(header=True)))


def test_header_and_body_non_flexible() -> None:
    frame = _frame(MetadataRequest[4](topics=None, allow_auto_topic_creation=False))
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 4, 7, "t")
    req = decode_request(header, frame)
    assert req.topics is None and req.allow_auto_topic_creation is False


def test_header_flexible_skips_tagged_fields() -> None:
    req = MetadataRequest[9](topics=[MetadataRequest.MetadataRequestTopic(name="abc")])
    frame = _frame(req)
    header = parse_request_header(frame)
    assert header.api_version == 9
    assert [t.name for t in decode_request(header, frame).topics] == ["abc"]


def test_short_and_truncated_frames_are_malformed() -> None:
    with pytest.raises(MalformedRequest):
        parse_request_header(memoryview(b"\x00\x03\x00"))
    frame = bytes(_frame(ProduceRequest[8](acks=1, timeout_ms=1, topic_data=[])))
    header = parse_request_header(memoryview(frame[:-2]))
    with pytest.raises(MalformedRequest):
        decode_request(header, memoryview(frame[:-2]))


def test_unsupported_api_versions_answer_is_v0_layout() -> None:
    answer = encode_unsupported_api_versions(99, (0, 4))
    size, corr, err, n, key, lo, hi = struct.unpack(">iihihhh", answer)
    assert (size, corr, err, n, key, lo, hi) == (len(answer) - 4, 99, 35, 1, 18, 0, 4)
    decoded = ApiVersionsResponse.decode(answer[8:], version=0)
    assert decoded.error_code == 35


def test_build_response_nested_dicts() -> None:
    resp = build_response(0, 8, {"responses": [{"name": "t", "partition_responses": [{"index": 2, "error_code": 0,
                                                                                        "base_offset": 10}]}]})
    assert resp.responses[0].partition_responses[0].base_offset == 10
    assert bytes(resp.encode())
