"""Hypothesis throws random frames at a live broker; it must answer or close, never fall over.

Three kinds of input, each on a fresh connection:

- random bytes behind a correct size prefix;
- a well-formed request header for a served API key and version (plus a few versions just
  outside the served range) followed by a random body;
- real Produce, Metadata and Fetch requests with a few bits flipped (and sometimes cut or
  extended), the size prefix kept consistent.

After each fuzz frame a valid ApiVersions request follows on the same connection. The
broker must then either close the connection, or answer in order: an answer to the fuzz
frame (if any) carrying its correlation id and decodable by the client's response class,
then the ApiVersions answer. Only a Fetch may leave both unanswered for a while (a long
poll). After the run the broker process is alive, confluent-kafka still produces and
consumes, and a topic written before the fuzzing still holds exactly its records.
"""

from __future__ import annotations

import collections
import os
import re
import socket
import struct
import time
import warnings
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DeleteRecordsRequest, DescribeConfigsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from support import rawkafka
from support.rawkafka import fetch_req, frame, metadata_req, produce_req, raw_header, read_exactly

from headwater.broker.protocol.codec import request_class, response_class
from headwater.kafka.records import Record, build_batch

pytestmark = pytest.mark.timeout(180)

KEPT = "kept-before-fuzz"  # written before the run; nothing may change it
TARGET = "fuzz-target"  # what the mutated requests name
READ_TIMEOUT = 1.0
PROBE_CID = 0x7FFFFFF0  # correlation id of the ApiVersions request sent after each fuzz frame
FUZZ_CID = 4242
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200"))  # more for a longer hunt


# -- plumbing (rawkafka, with this module's client id) ---------------------------------------

CLIENT_ID = "fuzz"
# The fetches the mutated requests start from and the checks read with: read_committed, 1 MiB.
FETCH = {"isolation_level": 1, "max_bytes": 1 << 20, "partition_max_bytes": 1 << 20}
request = partial(rawkafka.request, client_id=CLIENT_ID, timeout=10)
create_topic = partial(rawkafka.create_topic, client_id=CLIENT_ID, timeout=10)
end_offset = partial(rawkafka.end_offset, client_id=CLIENT_ID, timeout=10)
produce = partial(rawkafka.produce, client_id=CLIENT_ID, timeout=10)


def _stored(port: int, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every (offset, key, value) in partition 0."""
    return rawkafka.fetch_records(port, topic, client_id=CLIENT_ID, timeout=10, **FETCH)


def _header(api_key: int, version: int, cid: int, client_id: bytes | None) -> bytes:
    cls = request_class(api_key)
    flexible = cls is not None and 0 <= version <= cls.max_version and cls.flexible_version_q(version)
    return raw_header(api_key, version, cid, client_id, flexible=bool(flexible))


def _served(port: int) -> dict[int, tuple[int, int]]:
    resp = request(port, ApiVersionsRequest[0](), ApiVersionsResponse)
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


# -- one fuzz example ------------------------------------------------------------------------


class Outcome(collections.Counter):
    pass


def _exchange(port: int, payload: bytes, served: dict[int, tuple[int, int]], outcome: Outcome) -> None:
    """Send one fuzz frame (size prefix added) and a probe; check what comes back."""
    probe = frame(ApiVersionsRequest[0](), PROBE_CID, CLIENT_ID)
    api_key = version = cid = None
    if len(payload) >= 8:
        api_key, version, cid = struct.unpack_from(">hhi", payload)
    with socket.create_connection(("127.0.0.1", port), timeout=READ_TIMEOUT) as sock:
        try:
            sock.sendall(struct.pack(">i", len(payload)) + payload + probe)
        except (BrokenPipeError, ConnectionResetError):
            outcome["closed"] += 1
            return
        answers: list[bytes] = []
        try:
            while not answers or answers[-1][:4] != struct.pack(">i", PROBE_CID):
                head = read_exactly(sock, 4)
                if head is None:
                    outcome["closed"] += 1
                    break
                (size,) = struct.unpack(">i", head)
                assert 4 <= size <= 64 << 20, f"answer size {size}"
                body = read_exactly(sock, size)
                assert body is not None, "connection closed in the middle of an answer"
                answers.append(body)
                assert len(answers) <= 2, "more answers than requests"
        except TimeoutError:
            # Only a long-polling Fetch may hold both answers back.
            assert not answers and api_key == 1 and served[1][0] <= (version or 0) <= served[1][1], (
                f"no answer and no close within {READ_TIMEOUT}s for api_key={api_key} v{version} "
                f"(got {len(answers)} answers)"
            )
            outcome["fetch long poll"] += 1
            return
    if answers and answers[-1][:4] == struct.pack(">i", PROBE_CID):
        outcome["probe answered"] += 1
        assert ApiVersionsResponse.decode(answers.pop()[4:], version=0).error_code == 0
    if answers:
        # An answer to the fuzz frame: its correlation id, and something the client can decode.
        assert answers[0][:4] == struct.pack(">i", cid), (
            f"answer has correlation id {answers[0][:4]!r}, not {cid}"
        )
        outcome["fuzz frame answered"] += 1
        _check_decodes(api_key, version, answers[0], served)


def _check_decodes(
    api_key: int | None, version: int | None, body: bytes, served: dict[int, tuple[int, int]]
) -> None:
    assert api_key is not None and version is not None
    if api_key == 18 and not served[18][0] <= version <= served[18][1]:
        assert ApiVersionsResponse.decode(body[4:], version=0).error_code == 35
        return
    assert api_key in served and served[api_key][0] <= version <= served[api_key][1], (
        f"answered a request for api_key={api_key} v{version}, which is not served"
    )
    cls = response_class(api_key)
    assert cls is not None, f"no response class for api_key={api_key}"
    data = body[4:]
    if cls.flexible_version_q(version) and api_key != 18:
        assert data[:1] == b"\x00", "flexible response header should carry an empty tagged-field list"
        data = data[1:]
    try:
        cls.decode(data, version=version)
    except Exception as exc:  # pragma: no cover - a broker bug
        pytest.fail(f"{cls.name} v{version} answer does not decode: {exc!r}")


def _crashes(log_text: str) -> list[str]:
    """'Error: message (at dir/file.py:line in function)' for each handler traceback in the broker log."""
    out = []
    for record in re.split(r"\n(?=\d{4}-\d\d-\d\d )", log_text):  # one log record per piece
        if "failed; closing the connection" not in record:
            continue
        frames = re.findall(r'File "[^"]*/((?:broker|headwater)/[^"]+)", line (\d+), in (\w+)', record)
        errors = re.findall(r"^(\w+(?:Error|Exception)\b.*)$", record, re.M)
        where = f" (at {frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]})" if frames else ""
        out.append((errors[-1] if errors else "unknown error") + where)
    return out


# -- strategies ------------------------------------------------------------------------------


def _base_requests() -> list[tuple[str, bytes]]:
    """Real requests (size prefix removed) for the mutation strategy."""
    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(offset=i, timestamp=now + i, key=b"k%d" % i, value=b"fuzz-value-%d" % i) for i in range(3)]
    )
    LT = ListOffsetsRequest.ListOffsetsTopic
    DC = DescribeConfigsRequest.DescribeConfigsResource
    DR = DeleteRecordsRequest.DeleteRecordsTopic
    reqs = [
        ("produce v8", produce_req(TARGET, batch)),
        ("produce v3", produce_req(TARGET, batch, version=3)),
        ("metadata v8", metadata_req([TARGET], 8)),
        ("metadata v4", metadata_req([TARGET], 4)),
        ("metadata v0", metadata_req([TARGET], 0)),
        ("fetch v11", fetch_req(TARGET, 0, **FETCH)),
        ("fetch v4", fetch_req(TARGET, 0, version=4, **FETCH)),
        (
            "list offsets v5",
            ListOffsetsRequest[5](
                replica_id=-1,
                isolation_level=1,
                topics=[
                    LT(
                        name=TARGET,
                        partitions=[
                            LT.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-2)
                        ],
                    )
                ],
            ),
        ),
        (
            "describe configs v3",
            DescribeConfigsRequest[3](
                include_synonyms=True,
                include_documentation=True,
                resources=[DC(resource_type=2, resource_name=TARGET, configuration_keys=None)],
            ),
        ),
        (
            "delete records v1",
            DeleteRecordsRequest[1](
                timeout_ms=1000,
                topics=[DR(name=TARGET, partitions=[DR.DeleteRecordsPartition(partition_index=0, offset=0)])],
            ),
        ),
    ]
    return [(name, frame(req, FUZZ_CID, CLIENT_ID)[4:]) for name, req in reqs]


def _default_requests(served: dict[int, tuple[int, int]]) -> list[tuple[str, bytes]]:
    """Every served API and version with its schema defaults (empty arrays and the like)."""
    out = []
    for key, (lo, hi) in sorted(served.items()):
        cls = request_class(key)
        assert cls is not None, f"no request class for api_key={key}"
        for version in range(lo, hi + 1):
            req = cls[version]()
            if key == 0:
                req.acks = 1
            out.append((f"{cls.name} v{version}", frame(req, FUZZ_CID, CLIENT_ID)[4:]))
    return out


@st.composite
def random_frames(draw: st.DrawFn) -> bytes:
    return draw(st.binary(min_size=0, max_size=300))


@st.composite
def random_bodies(draw: st.DrawFn, served: dict[int, tuple[int, int]]) -> bytes:
    api_key = draw(st.sampled_from(sorted(served)))
    lo, hi = served[api_key]
    version = draw(
        st.one_of(st.integers(lo, hi), st.sampled_from([hi + 1, hi + 2, -1]))
        if draw(st.integers(0, 9)) == 0
        else st.integers(lo, hi)
    )
    client_id = draw(st.one_of(st.none(), st.binary(max_size=12)))
    body = draw(st.binary(max_size=200))
    return _header(api_key, version, FUZZ_CID, client_id) + body


@st.composite
def mutated_requests(draw: st.DrawFn, bases: list[tuple[str, bytes]]) -> bytes:
    _, base = draw(st.sampled_from(bases))
    data = bytearray(base)
    for bit in draw(st.lists(st.integers(0, len(data) * 8 - 1), min_size=1, max_size=6)):
        data[bit // 8] ^= 1 << (bit % 8)
    tail = draw(st.integers(0, 9))
    if tail == 0:
        del data[draw(st.integers(0, len(data))) :]  # cut short
    elif tail == 1:
        data += draw(st.binary(min_size=1, max_size=20))  # trailing junk
    return bytes(data)


# -- the test --------------------------------------------------------------------------------


def test_fuzzed_frames_leave_the_broker_serving(broker: Any) -> None:
    pytest.importorskip("confluent_kafka")
    from support.hwclients import Rec, consume_confluent, produce_confluent

    port = broker.port
    create_topic(port, KEPT)
    create_topic(port, TARGET)
    if end_offset(port, KEPT) == 0:
        for b in range(3):
            records = [
                Record(
                    offset=i,
                    timestamp=1_700_000_000_000 + i,
                    key=b"key-%d-%d" % (b, i),
                    value=b"value-%d-%d" % (b, i),
                )
                for i in range(10)
            ]
            assert produce(port, KEPT, build_batch(records)).error_code == 0
    kept = _stored(port, KEPT)
    assert len(kept) == 30
    served = _served(port)
    log_start = len(broker.log_text())
    outcome = Outcome()
    real = _base_requests()
    defaults = _default_requests(served)
    started = time.monotonic()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(
        st.one_of(
            random_frames(),
            random_bodies(served),
            mutated_requests(defaults),
            mutated_requests(real),
            mutated_requests(real),
        )
    )
    def fuzz(payload: bytes) -> None:
        assert broker.proc.poll() is None, "broker process died"
        _exchange(port, payload, served, outcome)

    fuzz()
    elapsed = time.monotonic() - started
    print(f"fuzzing took {elapsed:.1f}s: {dict(outcome)}")

    # The broker is alive and a stock client works.
    assert broker.proc.poll() is None, "broker process died"
    topic = "after-fuzz"
    create_topic(port, topic)
    recs = [Rec(0, b"%d" % i, b"after-fuzz-%d" % i) for i in range(50)]
    produce_confluent(broker.bootstrap, topic, recs, extra={"linger.ms": 5}, timeout=15)
    got = consume_confluent(broker.bootstrap, topic, 1, len(recs), timeout=20)
    assert [g.value for g in got] == [b"after-fuzz-%d" % i for i in range(50)]

    # The topic written before the run holds exactly its records.
    assert end_offset(port, KEPT) == 30
    assert _stored(port, KEPT) == kept

    # Handler crashes close the connection (allowed above) but are broker bugs: surface them.
    crashes = collections.Counter(_crashes(broker.log_text()[log_start:]))
    for message, count in crashes.items():
        warnings.warn(f"broker handler crashed {count}x during fuzzing: {message}", stacklevel=1)
