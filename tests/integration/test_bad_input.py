"""Bad input over raw TCP: the broker answers with the right error or closes that one connection.

Every test talks to the session broker through plain sockets, crafting frames with
kafka-python's generated request classes (or by hand where the frame must be broken).
After each test the autouse ``still_serving`` fixture checks that the broker process is
alive, that a connection opened before the test still answers, that a new connection
can produce and fetch, and that the records stored before the test are unchanged.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from support import rawkafka
from support.rawkafka import fetch_req, framed, list_offsets_req, metadata_req, produce_req

from headwater.broker.protocol.codec import request_class
from headwater.kafka.records import Record, build_batch
from headwater.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(60)

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
INVALID_RECORD = 87

DATA = "bad-input-data"  # written once by the fixture; every bad produce targets it
SMALL = "bad-input-small"  # max.message.bytes=1000
ACKS0 = "bad-input-acks0"
PIPELINE = "bad-input-pipeline"
HEALTH = "bad-input-health"  # the after-test round trip writes here
SENTINEL = "bad-input-sentinel"  # never written after setup

# What the broker serves (the registry), as ApiVersions must report it.
EXPECTED_APIS = {0: (0, 11), 1: (0, 11), 2: (0, 5), 3: (0, 8), 18: (0, 4), 19: (0, 4), 20: (0, 3)}
API_VERSIONS_RANGE = (0, 4)
MAX_REQUEST = 104857600  # socket.request.max.bytes default


# -- raw protocol (rawkafka), with this module's client id ----------------------------------

CLIENT_ID = "bad-input"
Conn = partial(rawkafka.Conn, client_id=CLIENT_ID)
frame = partial(rawkafka.frame, client_id=CLIENT_ID)
raw_header = partial(rawkafka.raw_header, client_id=CLIENT_ID.encode())
produce = partial(rawkafka.produce, client_id=CLIENT_ID)
end_offset = partial(rawkafka.end_offset, client_id=CLIENT_ID)
create_topic = partial(rawkafka.create_topic, client_id=CLIENT_ID)


def fetch_values(port: int, topic: str, partition: int = 0) -> list[tuple[int, bytes | None]]:
    """Every (offset, value) stored in the partition."""
    return [(o, v) for o, _, v in rawkafka.fetch_records(port, topic, partition, client_id=CLIENT_ID)]


def _in_versions(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    lo, _, hi = spec.partition("-")
    if lo.endswith("+"):
        return version >= int(lo[:-1])
    return int(lo) <= version <= int(hi or lo)


def minimal_request(cls: Any, version: int) -> Any:
    """A request of schema defaults, with empty (not null) non-nullable arrays and strings."""
    req = cls[version]()
    for f in cls.json["fields"]:
        name = re.sub(r"(?<!^)(?=[A-Z])", "_", f["name"]).lower()
        if not _in_versions(f.get("versions"), version) or _in_versions(f.get("nullableVersions"), version):
            continue
        if getattr(req, name, None) is None:
            if f["type"].startswith("[]"):
                setattr(req, name, [])
            elif f["type"] == "string":
                setattr(req, name, "")
    if cls.API_KEY == 0:
        req.acks = 1  # the default (0) asks for no answer
    return req


def batch(*values: bytes, key: bytes | None = None) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(offset=i, timestamp=now, key=key, value=v) for i, v in enumerate(values)])


def legacy_message(magic: int, value: bytes) -> bytes:
    """A one-message v0/v1 message set (the pre-0.11 format)."""
    import zlib

    body = struct.pack(">bb", magic, 0)
    if magic == 1:
        body += struct.pack(">q", int(time.time() * 1000))
    body += struct.pack(">i", -1) + struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def wait_for_log(broker: Any, pattern: str, since: int, timeout: float = 30.0) -> str:
    """Wait for a broker log line matching ``pattern`` written after offset ``since``; return the line."""

    def line() -> str | None:
        text = broker.log_text()[since:]
        m = re.search(pattern, text)
        return text[text.rfind("\n", 0, m.start()) + 1 : text.find("\n", m.end())] if m else None

    return wait_until(line, f"a broker log line matching {pattern!r}", timeout,
                      seen=lambda: f"new log text:\n{broker.log_text()[since:][-3000:]}")


# -- fixtures -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def topics(broker: Any) -> dict[str, list[tuple[int, bytes | None]]]:
    port = broker.port
    for name in (DATA, ACKS0, PIPELINE, HEALTH, SENTINEL):
        create_topic(port, name)
    create_topic(port, SMALL, configs={"max.message.bytes": "1000"})
    for name in (DATA, SENTINEL):
        if end_offset(port, name) == 0:
            p = produce(port, name, batch(b"first", b"second", b"third"))
            assert p.error_code == 0, p
    return {name: fetch_values(port, name) for name in (DATA, SENTINEL)}


@pytest.fixture(autouse=True)
def still_serving(broker: Any, topics: dict[str, list[tuple[int, bytes | None]]]) -> Iterator[None]:
    """A connection opened before the test still answers after it, and nothing stored changed."""
    bystander = Conn(broker.port)
    assert bystander.call(ApiVersionsRequest[0](), ApiVersionsResponse).error_code == 0
    yield
    assert broker.proc.poll() is None, "broker process died"
    try:
        assert bystander.call(metadata_req([SENTINEL]), MetadataResponse).topics[0].error_code == 0
    finally:
        bystander.close()
    health = produce(broker.port, HEALTH, batch(b"still-alive"))
    assert health.error_code == 0, health
    assert fetch_values(broker.port, HEALTH)[-1] == (health.base_offset, b"still-alive")
    for name, stored in topics.items():
        assert end_offset(broker.port, name) == len(stored)
        assert fetch_values(broker.port, name) == stored


@pytest.fixture
def log_mark(broker: Any) -> int:
    return len(broker.log_text())


# -- framing --------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [-1, -2, -(2**31)])
def test_negative_size_closes_connection(broker: Any, log_mark: int, size: int) -> None:
    with Conn(broker.port) as c:
        c.send_raw(struct.pack(">i", size) + raw_header(18, 0, 1))
        assert c.assert_closed() == b""
    wait_for_log(broker, rf"closing connection from .*request size {size} ", log_mark)


def test_size_above_socket_request_max_bytes_closes_connection(broker: Any, log_mark: int) -> None:
    with Conn(broker.port) as c:
        c.send_raw(struct.pack(">i", MAX_REQUEST + 1))  # just the size prefix
        assert c.assert_closed() == b""
    line = wait_for_log(broker, rf"request size {MAX_REQUEST + 1}\b", log_mark)
    assert "socket.request.max.bytes" in line


def test_size_at_max_is_not_rejected_up_front(broker: Any) -> None:
    """Exactly socket.request.max.bytes is allowed: the broker waits for the body."""
    with Conn(broker.port) as c:
        c.send_raw(struct.pack(">i", 2**31 - 1))
        assert c.assert_closed() == b""
        with Conn(broker.port) as d:
            d.send_raw(struct.pack(">i", MAX_REQUEST) + raw_header(18, 0, 1))
            d.sock.settimeout(0.5)
            with pytest.raises(TimeoutError):
                d.sock.recv(1)  # still open, waiting for the rest of the 100 MiB


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00", b"\x00\x12\x00\x00", b"\x00\x12\x00\x00\x00\x00\x00\x01\x00"],
    ids=["empty", "1-byte", "4-bytes", "9-bytes"],
)
def test_frame_shorter_than_header_closes_connection(broker: Any, log_mark: int, payload: bytes) -> None:
    with Conn(broker.port) as c:
        c.send_raw(framed(payload))
        assert c.assert_closed() == b""
    wait_for_log(broker, rf"closing connection from .*request size {len(payload)} ", log_mark)


@pytest.mark.parametrize("client_len", [5, 1000, 32767, -2, -32768])
def test_bogus_client_id_length_closes_connection(broker: Any, log_mark: int, client_len: int) -> None:
    """ApiVersions v0 whose client-id length runs past the frame (or is negative but not -1)."""
    with Conn(broker.port) as c:
        c.send_raw(framed(struct.pack(">hhih", 18, 0, 1, client_len) + b"ab"))
        assert c.assert_closed() == b""
    wait_for_log(broker, r"closing connection from .*client id", log_mark)


def test_bogus_tagged_fields_in_flexible_header_close_connection(broker: Any, log_mark: int) -> None:
    """ApiVersions v3 (header v2) announcing 5 tagged fields that are not there."""
    with Conn(broker.port) as c:
        c.send_raw(framed(raw_header(18, 3, 1) + b"\x05\x01"))
        assert c.assert_closed() == b""
    wait_for_log(broker, r"closing connection from .*(tagged fields|varint)", log_mark)


def test_null_client_id_is_accepted(broker: Any) -> None:
    with Conn(broker.port) as c:
        c.send_raw(framed(raw_header(18, 0, 42, client_id=None)))
        body = c.recv_frame()
    assert struct.unpack_from(">ih", body) == (42, 0)


# -- unknown APIs and versions --------------------------------------------------------------


@pytest.mark.parametrize("api_key", [999, 32767, -1, 71])
def test_unknown_api_key_closes_connection(broker: Any, log_mark: int, api_key: int) -> None:
    with Conn(broker.port) as c:
        c.send_raw(framed(raw_header(api_key, 0, 1) + b"\x00" * 16))
        assert c.assert_closed() == b""
    line = wait_for_log(broker, rf"closing connection from .*API key {api_key}\b", log_mark)
    assert "bad-input" in line  # names the client


def test_known_but_unserved_api_closes_connection(broker: Any, log_mark: int) -> None:
    """An API the protocol (and the codec) knows but this broker does not advertise."""
    with Conn(broker.port) as c:
        served = {k.api_key for k in c.call(ApiVersionsRequest[0](), ApiVersionsResponse).api_keys}
    # OffsetForLeaderEpoch, AddPartitionsToTxn, DescribeAcls, DescribeLogDirs, ...
    key = next(k for k in (23, 24, 29, 35, 57, 61, 65) if request_class(k) is not None and k not in served)
    with Conn(broker.port) as c:
        c.send(minimal_request(request_class(key), 0))
        assert c.assert_closed() == b""
    wait_for_log(broker, rf"closing connection from .*API key {key}\b", log_mark)


@pytest.mark.parametrize(
    "name, req",
    [
        ("Produce v12", lambda: produce_req(DATA, batch(b"v12"), version=12)),
        (
            "Metadata v13",
            lambda: MetadataRequest[13](
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            ),
        ),
        ("Metadata v9", lambda: metadata_req([DATA], version=9)),
        ("Fetch v12", lambda: fetch_req(DATA, version=12)),
        ("ListOffsets v6", lambda: list_offsets_req(DATA, version=6)),
    ],
    ids=lambda v: v.replace(" ", "-") if isinstance(v, str) else "r",
)
def test_unsupported_version_closes_connection(broker: Any, log_mark: int, name: str, req: Any) -> None:
    with Conn(broker.port) as c:
        c.send(req())
        assert c.assert_closed() == b""
    api, version = name.split(" v")
    wait_for_log(broker, rf"closing connection from .*{api}\w* v{version} is not supported", log_mark)


def _parse_v0_api_versions(body: bytes) -> tuple[int, int, dict[int, tuple[int, int]]]:
    cid, error, n = struct.unpack_from(">ihi", body)
    assert len(body) == 10 + 6 * n, "v0 layout: no throttle field, nothing after the array"
    entries = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", body, 10 + 6 * i)
        entries[key] = (lo, hi)
    return cid, error, entries


@pytest.mark.parametrize("version", [5, 6, 127, 32767, -1])
def test_api_versions_above_max_answered_in_v0_layout(broker: Any, version: int) -> None:
    """As Kafka: error 35, the ApiVersions range, and the connection stays usable."""
    with Conn(broker.port) as c:
        # What a newer client would send: header v2 plus a v4-style body (never parsed).
        c.send_raw(framed(raw_header(18, version, 77, flexible=True) + b"\x08newer-client\x041.0\x00"))
        cid, error, entries = _parse_v0_api_versions(c.recv_frame())
        assert (cid, error) == (77, UNSUPPORTED_VERSION)
        assert entries[18] == API_VERSIONS_RANGE
        # kafka-python's own decoder reads it as v0 too
        c.send_raw(framed(raw_header(18, version, 78, flexible=True)))
        body = c.recv_frame()
        assert struct.unpack_from(">i", body)[0] == 78
        assert ApiVersionsResponse.decode(body[4:], version=0).error_code == UNSUPPORTED_VERSION
        # the client retries lower on the same connection
        resp = c.call(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1"), ApiVersionsResponse
        )
        assert resp.error_code == 0


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_supported_versions(broker: Any, version: int) -> None:
    kwargs = {"client_software_name": "bad-input", "client_software_version": "1.0"} if version >= 3 else {}
    with Conn(broker.port) as c:
        cid = c.send(ApiVersionsRequest[version](**kwargs), cid=1000 + version)
        body = c.recv_frame()
    # The ApiVersions response header is never flexible: the body starts right after the
    # correlation id, with error_code 0.
    assert struct.unpack_from(">ih", body) == (cid, 0)
    resp = ApiVersionsResponse.decode(body, version=version, header=True)
    assert resp.header.correlation_id == cid and resp.error_code == 0
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key, rng in EXPECTED_APIS.items():
        assert served.get(key) == rng, (key, served.get(key))
    # clients expect min version 0 everywhere; ControlledShutdown (7) is a broker's own request, whose v0 (a header
    # without client id) no broker here sends
    assert all(lo == 0 for key, (lo, _) in served.items() if key != 7), served
    assert served[7] == (1, 3)
    assert 71 not in served and 68 not in served  # never advertise what is not implemented
    if version >= 1:
        assert resp.throttle_time_ms == 0
    # Nothing left over and nothing missing: re-encoding gives the same bytes.
    resp.with_header(correlation_id=cid)
    assert bytes(resp.encode(header=True)) == body


def test_every_advertised_api_is_served(broker: Any) -> None:
    """A minimal request at each advertised version gets an answer, not a closed connection."""
    with Conn(broker.port) as c:
        served = c.call(ApiVersionsRequest[0](), ApiVersionsResponse).api_keys
    failures = []
    for k in served:
        cls = request_class(k.api_key)
        assert cls is not None, f"no request class for api_key={k.api_key}"
        for version in range(k.min_version, k.max_version + 1):
            req = minimal_request(cls, version)
            with Conn(broker.port) as c:
                c.send_raw(frame(req, 5))
                try:
                    body = c.recv_frame()
                except AssertionError:
                    failures.append(f"{cls.name} v{version}: connection closed")
                    continue
                except TimeoutError:
                    failures.append(f"{cls.name} v{version}: no answer")
                    continue
            if struct.unpack_from(">i", body)[0] != 5:
                failures.append(f"{cls.name} v{version}: wrong correlation id")
    assert not failures, failures


# -- produce errors -------------------------------------------------------------------------


def test_bad_crc_is_corrupt_message(broker: Any, log_mark: int) -> None:
    before = end_offset(broker.port, DATA)
    damaged = bytearray(batch(b"payload-1", b"payload-2"))
    damaged[-1] ^= 0x01  # last byte of the last record
    p = produce(broker.port, DATA, bytes(damaged))
    assert (p.error_code, p.base_offset) == (CORRUPT_MESSAGE, -1)
    wrong_crc = bytearray(batch(b"payload"))
    wrong_crc[17:21] = b"\xde\xad\xbe\xef"
    assert produce(broker.port, DATA, bytes(wrong_crc)).error_code == CORRUPT_MESSAGE
    assert end_offset(broker.port, DATA) == before
    wait_for_log(broker, r"rejected produce to bad-input-data-0 .*CRC", log_mark)


@pytest.mark.parametrize("cut", [1, 5, 30, 60, 100])
def test_truncated_batch_is_corrupt_message(broker: Any, cut: int) -> None:
    before = end_offset(broker.port, DATA)
    whole = batch(b"x" * 80, b"y" * 80)
    p = produce(broker.port, DATA, whole[: len(whole) - cut])
    assert (p.error_code, p.base_offset) == (CORRUPT_MESSAGE, -1)
    assert end_offset(broker.port, DATA) == before


def test_batch_length_longer_than_bytes_sent_is_corrupt_message(broker: Any) -> None:
    b = bytearray(batch(b"abc"))
    struct.pack_into(">i", b, 8, struct.unpack_from(">i", b, 8)[0] + 100)
    assert produce(broker.port, DATA, bytes(b)).error_code == CORRUPT_MESSAGE
    tiny = bytearray(batch(b"abc"))
    struct.pack_into(">i", tiny, 8, 3)  # shorter than the batch header itself
    assert produce(broker.port, DATA, bytes(tiny)).error_code == CORRUPT_MESSAGE


def test_batch_length_shorter_than_bytes_sent_is_corrupt_message(broker: Any) -> None:
    """batchLength 10 short: the 10 bytes left over are no batch, so this is damage (as in Kafka,
    where the leftover is too short to iterate and the CRC over the shortened batch fails)."""
    b = bytearray(batch(b"abc" * 20))
    struct.pack_into(">i", b, 8, struct.unpack_from(">i", b, 8)[0] - 10)
    p = produce(broker.port, DATA, bytes(b))
    assert (p.error_code, p.base_offset) == (CORRUPT_MESSAGE, -1)


def test_two_batches_in_one_partition_is_invalid_record(broker: Any) -> None:
    before = end_offset(broker.port, DATA)
    p = produce(broker.port, DATA, batch(b"one") + batch(b"two", b"three"))
    assert (p.error_code, p.base_offset) == (INVALID_RECORD, -1)
    assert end_offset(broker.port, DATA) == before


def test_record_count_mismatch_is_invalid_record(broker: Any) -> None:
    """A well-formed, CRC-correct batch whose recordCount disagrees with lastOffsetDelta."""
    from crc32c import crc32c

    b = bytearray(batch(b"a", b"b"))
    struct.pack_into(">i", b, 57, 5)  # recordCount
    struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
    assert produce(broker.port, DATA, bytes(b)).error_code == INVALID_RECORD


def test_batch_over_topic_max_message_bytes_is_message_too_large(broker: Any) -> None:
    before = end_offset(broker.port, SMALL)
    fits = batch(b"s" * 800)
    assert len(fits) <= 1000
    ok = produce(broker.port, SMALL, fits)
    assert (ok.error_code, ok.base_offset) == (0, before)
    too_big = batch(b"L" * 1000)
    assert len(too_big) > 1000
    p = produce(broker.port, SMALL, too_big)
    assert (p.error_code, p.base_offset) == (MESSAGE_TOO_LARGE, -1)
    assert end_offset(broker.port, SMALL) == before + 1


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_format_is_rejected(broker: Any, magic: int) -> None:
    before = end_offset(broker.port, DATA)
    for value in (b"v" * 60, b"short"):  # one longer and one shorter than a v2 batch header
        p = produce(broker.port, DATA, legacy_message(magic, value))
        assert p.error_code in (UNSUPPORTED_FOR_MESSAGE_FORMAT, CORRUPT_MESSAGE), p
        assert p.base_offset == -1
    assert end_offset(broker.port, DATA) == before


def test_unknown_magic_is_corrupt_message(broker: Any) -> None:
    b = bytearray(batch(b"abc"))
    b[16] = 3
    assert produce(broker.port, DATA, bytes(b)).error_code == CORRUPT_MESSAGE


def test_unknown_topic_or_partition(broker: Any) -> None:
    name = "bad-input-no-such-topic"
    p = produce(broker.port, name, batch(b"nobody"))
    assert (p.error_code, p.base_offset) == (UNKNOWN_TOPIC_OR_PARTITION, -1)
    # Produce does not auto-create topics.
    with Conn(broker.port) as c:
        md = c.call(metadata_req([name], auto_create=False), MetadataResponse)
    assert md.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    for partition in (1, 7, -1, 2**31 - 1):
        assert (
            produce(broker.port, DATA, batch(b"x"), partition=partition).error_code
            == UNKNOWN_TOPIC_OR_PARTITION
        )


@pytest.mark.parametrize("acks", [5, 2, -2, 32767, -32768])
def test_invalid_required_acks(broker: Any, acks: int) -> None:
    before = end_offset(broker.port, DATA)
    p = produce(broker.port, DATA, batch(b"acks"), acks=acks)
    assert (p.error_code, p.base_offset) == (INVALID_REQUIRED_ACKS, -1)
    assert end_offset(broker.port, DATA) == before


def test_acks_zero_gets_no_response(broker: Any) -> None:
    before = end_offset(broker.port, ACKS0)
    with Conn(broker.port) as c:
        c.send(produce_req(ACKS0, batch(b"fire-and-forget"), acks=0), cid=100)
        c.send(produce_req(ACKS0, b"\x00" * 70, acks=0), cid=101)  # even a rejected one gets no answer
        c.send(produce_req("bad-input-no-such-topic", batch(b"x"), acks=0), cid=102)
        cid = c.send(metadata_req([ACKS0]), cid=103)
        got, md = c.recv(MetadataResponse, 8)
        assert got == cid == 103
        assert md.topics[0].name == ACKS0
        c.sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            c.sock.recv(1)  # and nothing else follows
    assert end_offset(broker.port, ACKS0) == before + 1
    assert fetch_values(broker.port, ACKS0)[-1] == (before, b"fire-and-forget")


def test_null_and_empty_records(broker: Any) -> None:
    before = end_offset(broker.port, DATA)
    for records in (None, b""):
        p = produce(broker.port, DATA, records)
        assert p.base_offset == -1
        assert p.error_code in (0, CORRUPT_MESSAGE, INVALID_RECORD)
    assert end_offset(broker.port, DATA) == before


# -- pipelining and cut-short bodies --------------------------------------------------------


def test_pipelined_requests_answered_in_order(broker: Any) -> None:
    """20 requests in one write, mixed APIs (one slow long-poll fetch first), answered in order."""
    start = end_offset(broker.port, PIPELINE)
    quiet_end = end_offset(broker.port, SENTINEL)  # nothing is appended there: the fetch waits 300 ms
    reqs: list[tuple[Any, Any]] = [
        (fetch_req(SENTINEL, quiet_end, max_wait_ms=300, min_bytes=1), FetchResponse)
    ]
    for i in range(19):
        kind = i % 5
        if kind == 0:
            reqs.append((produce_req(PIPELINE, batch(b"p%d" % i)), ProduceResponse))
        elif kind == 1:
            reqs.append(
                (
                    ApiVersionsRequest[3](client_software_name="pipe", client_software_version="1"),
                    ApiVersionsResponse,
                )
            )
        elif kind == 2:
            reqs.append((metadata_req([PIPELINE]), MetadataResponse))
        elif kind == 3:
            reqs.append((list_offsets_req(PIPELINE), ListOffsetsResponse))
        else:
            reqs.append((fetch_req(PIPELINE, start), FetchResponse))
    cids = [7919 * (i + 1) % 100003 for i in range(len(reqs))]  # distinct, not sequential
    with Conn(broker.port, timeout=10) as c:
        sent_at = time.monotonic()
        c.send_raw(b"".join(frame(req, cid) for (req, _), cid in zip(reqs, cids, strict=True)))
        answers = [c.recv(resp_cls, req.API_VERSION) for req, resp_cls in reqs]
        assert time.monotonic() - sent_at >= 0.25  # the long poll held back everything behind it
    assert [cid for cid, _ in answers] == cids
    assert answers[0][1].responses[0].partitions[0].error_code == 0
    produced = [
        a.responses[0].partition_responses[0]
        for (_, a), (_, cls) in zip(answers, reqs, strict=True)
        if cls is ProduceResponse
    ]
    assert [p.error_code for p in produced] == [0] * 4
    assert [p.base_offset for p in produced] == list(range(start, start + 4))
    # The ListOffsets answers see the appends made by the produces before them.
    offsets = [
        a.topics[0].partitions[0].offset
        for (_, a), (_, cls) in zip(answers, reqs, strict=True)
        if cls is ListOffsetsResponse
    ]
    assert offsets == [start + 1, start + 2, start + 3, start + 4]


def test_more_pipelined_requests_than_in_flight_limit(broker: Any) -> None:
    """300 requests in one write (beyond the broker's per-connection in-flight cap), all answered in order."""
    reqs = [metadata_req([SENTINEL]) if i % 3 else ApiVersionsRequest[0]() for i in range(300)]
    with Conn(broker.port, timeout=20) as c:
        c.send_raw(b"".join(frame(req, 10_000 + i) for i, req in enumerate(reqs)))
        cids = [struct.unpack_from(">i", c.recv_frame())[0] for _ in reqs]
    assert cids == [10_000 + i for i in range(300)]


def test_request_trickling_in_byte_by_byte(broker: Any) -> None:
    payload = frame(metadata_req([SENTINEL]), 31)
    with Conn(broker.port) as c:
        for i in range(len(payload)):
            c.send_raw(payload[i : i + 1])
            time.sleep(0.002)
        cid, md = c.recv(MetadataResponse, 8)
    assert cid == 31 and md.topics[0].name == SENTINEL


def test_fetch_out_of_range_and_unknown_partition(broker: Any) -> None:
    end = end_offset(broker.port, SENTINEL)
    with Conn(broker.port) as c:
        for offset in (-1, end + 1, 2**62):
            p = c.call(fetch_req(SENTINEL, offset), FetchResponse).responses[0].partitions[0]
            assert (p.error_code, bytes(p.records or b"")) == (1, b""), offset  # OFFSET_OUT_OF_RANGE
        for partition in (1, -1):
            p = (
                c.call(fetch_req(SENTINEL, 0, partition=partition), FetchResponse)
                .responses[0]
                .partitions[0]
            )
            assert p.error_code == UNKNOWN_TOPIC_OR_PARTITION
        p = c.call(fetch_req("bad-input-no-such-topic", 0), FetchResponse).responses[0].partitions[0]
        assert p.error_code == UNKNOWN_TOPIC_OR_PARTITION


def test_body_shorter_than_size_then_eof_closes_connection(broker: Any) -> None:
    whole = frame(produce_req(DATA, batch(b"cut")), 1)
    with Conn(broker.port) as c:
        c.send_raw(whole[: len(whole) // 2])
        c.sock.shutdown(socket.SHUT_WR)
        assert c.assert_closed() == b""


@pytest.mark.parametrize("cut", ["fixed-fields", "topic-name", "records"])
def test_body_cut_short_closes_connection(broker: Any, log_mark: int, cut: str) -> None:
    """The size prefix matches the bytes sent, but the Produce v8 body inside is cut short.

    Kafka fails to parse such a request (a string or bytes field longer than what is left)
    and closes the connection; it must not be decoded with a shortened field.
    """
    before = end_offset(broker.port, DATA)
    whole = frame(produce_req(DATA, batch(b"cut" * 10)), 1)
    body_at = 4 + 10 + len(b"bad-input")  # size prefix, fixed header, client id
    keep = {
        "fixed-fields": body_at + 2 + 2 + 3,  # transactional id, acks, part of timeout
        "topic-name": body_at + 2 + 2 + 4 + 4 + 2 + 5,  # 5 bytes of "bad-input-data"
        "records": len(whole) - 10,
    }[cut]
    with Conn(broker.port) as c:
        c.send_raw(framed(whole[4:keep]))
        received = c.assert_closed()
    assert received == b"", f"answered instead of closing: {received[:80]!r}"
    wait_for_log(broker, r"closing connection from .*Produce\w* v8 body does not decode", log_mark)
    assert end_offset(broker.port, DATA) == before


def test_records_length_past_end_of_frame_closes_connection(broker: Any) -> None:
    """A whole, valid batch, but the records length prefix claims 100 bytes more than the frame has.

    The request is malformed (Kafka's parser fails on it and closes the connection); it must
    not be decoded with the records cut to what is there, and nothing may be stored. (Its own
    topic, so that a broker storing the batch does not upset the other tests.)
    """
    topic = "bad-input-records-length"
    create_topic(broker.port, topic)
    before = end_offset(broker.port, topic)
    b = batch(b"claims-more-than-sent")
    whole = bytearray(frame(produce_req(topic, b), 1))
    struct.pack_into(">i", whole, len(whole) - len(b) - 4, len(b) + 100)
    with Conn(broker.port) as c:
        c.send_raw(bytes(whole))
        closed, received = c.wait_closed()
    assert end_offset(broker.port, topic) == before, "a batch from a malformed request was stored"
    assert closed and received == b"", f"answered instead of closing: {received[:80]!r}"


@pytest.mark.parametrize(
    "name, req",
    [
        ("Produce v8", lambda: ProduceRequest[8](acks=1, timeout_ms=1000, topic_data=None)),
        ("Fetch v11", lambda: FetchRequest[11](replica_id=-1, max_wait_ms=0, min_bytes=0, topics=None)),
        ("ListOffsets v5", lambda: ListOffsetsRequest[5](replica_id=-1, isolation_level=0, topics=None)),
        ("CreateTopics v4", lambda: CreateTopicsRequest[4](timeout_ms=1000, validate_only=True, topics=None)),
    ],
    ids=lambda v: v.replace(" ", "-") if isinstance(v, str) else "r",
)
def test_null_for_non_nullable_array_is_a_malformed_request(
    broker: Any, log_mark: int, name: str, req: Any
) -> None:
    """A top-level array sent as null (length -1) where the schema does not allow null.

    Kafka's parser rejects such a request; here it must be treated as malformed too (the
    connection closed with a log line), not reach the handler and crash it with a traceback.
    """
    with Conn(broker.port) as c:
        c.send(req(), cid=61)
        closed, received = c.wait_closed()
    time.sleep(0.2)  # let the log line land
    crash = re.search(r"request from \S+ failed; closing the connection", broker.log_text()[log_mark:])
    assert not crash, f"{name} with a null array crashed its handler (see the broker log)"
    assert closed and received == b"", f"answered instead of closing: {received[:80]!r}"


def test_answers_before_a_bad_frame_are_still_sent(broker: Any) -> None:
    """Requests already read are answered; then the connection is closed at the bad frame."""
    with Conn(broker.port) as c:
        good = frame(metadata_req([SENTINEL]), 11) + frame(ApiVersionsRequest[0](), 12)
        c.send_raw(good + framed(raw_header(999, 0, 13)) + frame(ApiVersionsRequest[0](), 14))
        cid, md = c.recv(MetadataResponse, 8)
        assert cid == 11 and md.topics[0].name == SENTINEL
        cid, av = c.recv(ApiVersionsResponse, 0)
        assert cid == 12 and av.error_code == 0
        assert c.assert_closed() == b""  # nothing for 13, nor for 14 after it


def test_many_bad_connections_at_once(broker: Any) -> None:
    """50 connections each sending garbage at the same time; then normal service."""
    conns = [Conn(broker.port) for _ in range(50)]
    try:
        for i, c in enumerate(conns):
            c.send_raw(framed(struct.pack(">hhi", 999, 0, i)) if i % 2 else struct.pack(">i", -5))
        for c in conns:
            c.assert_closed()
    finally:
        for c in conns:
            c.close()


# -- a real client afterwards ---------------------------------------------------------------


def test_confluent_kafka_still_produces_and_consumes(broker: Any) -> None:
    pytest.importorskip("confluent_kafka")
    from support.hwclients import Rec, consume_confluent, produce_confluent

    topic = "bad-input-confluent"
    create_topic(broker.port, topic)
    recs = [Rec(0, None, b"msg-%d" % i) for i in range(100)]
    produce_confluent(broker.bootstrap, topic, recs, acks="1", extra={"linger.ms": 5}, timeout=15)
    got = consume_confluent(broker.bootstrap, topic, 1, len(recs), timeout=20)
    assert [g.value for g in got] == [b"msg-%d" % i for i in range(100)]
