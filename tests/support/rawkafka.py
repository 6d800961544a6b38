"""Raw Kafka protocol over plain sockets, for the integration tests that craft their own frames.

Requests are kafka-python's generated classes at a chosen version, framed here so that a test
can send them whole, pipelined, cut short or broken. ``Conn`` is one TCP connection; the
one-shot helpers (``request``, ``produce``, ``end_offset``, ``fetch_records``,
``create_topic``) each open a connection of their own. Framing, ``Conn`` and the one-shot
helpers take the client id to send (a test module binds its own with ``functools.partial``).
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

import pytest
from kafka.protocol.admin import (
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
)
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from headwater.kafka.records import decode_batch_records, iter_batches

CLIENT_ID = "rawkafka"
TIMEOUT = 30.0  # socket timeout of a connection, seconds: an answer may be slow on a loaded machine
TOPIC_ALREADY_EXISTS = 36


# -- framing --------------------------------------------------------------------------------


def frame(req: Any, cid: int, client_id: str = CLIENT_ID) -> bytes:
    """``req`` with its request header and size prefix."""
    req.with_header(correlation_id=cid, client_id=client_id)
    return bytes(req.encode(header=True, framed=True))


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def raw_header(
    api_key: int, version: int, cid: int, client_id: bytes | None = CLIENT_ID.encode(), flexible: bool = False
) -> bytes:
    """A request header built by hand (any key, version and client id; ``flexible``: no tagged fields)."""
    head = struct.pack(">hhi", api_key, version, cid)
    head += struct.pack(">h", -1) if client_id is None else struct.pack(">h", len(client_id)) + client_id
    return head + (b"\x00" if flexible else b"")


def read_exactly(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes from ``sock``, or None when the connection closes (or is reset) first."""
    buf = bytearray()
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


# -- one connection -------------------------------------------------------------------------


class Conn:
    """One TCP connection speaking framed requests; correlation ids 1, 2, ... unless given."""

    def __init__(self, port: int, timeout: float = TIMEOUT, client_id: str = CLIENT_ID) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self.client_id = client_id
        self._cid = 0

    def next_cid(self) -> int:
        self._cid += 1
        return self._cid

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # sending
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, req: Any, cid: int | None = None) -> int:
        cid = self.next_cid() if cid is None else cid
        self.send_raw(frame(req, cid, self.client_id))
        return cid

    # receiving
    def recv_frame(self) -> bytes:
        """The next answer without its size prefix (correlation id first)."""
        head = read_exactly(self.sock, 4)
        assert head is not None, "connection closed while an answer was expected"
        (size,) = struct.unpack(">i", head)
        body = read_exactly(self.sock, size)
        assert body is not None, "connection closed in the middle of an answer"
        return body

    def recv(self, resp_cls: Any, version: int) -> tuple[int, Any]:
        """(correlation id, decoded answer) of the next answer."""
        body = self.recv_frame()
        (cid,) = struct.unpack_from(">i", body)
        return cid, resp_cls.decode(body, version=version, header=True)

    def call(self, req: Any, resp_cls: Any) -> Any:
        """Send ``req`` and return its answer (which must be the next one)."""
        cid = self.send(req)
        got, resp = self.recv(resp_cls, req.API_VERSION)
        assert got == cid, "answers out of order"
        return resp

    def produce(
        self, topic: str, records: bytes | None, partition: int = 0, acks: int = 1, version: int = 8
    ) -> Any:
        """Send one produce to one partition; return that partition's answer."""
        resp = self.call(produce_req(topic, records, partition, acks, version), ProduceResponse)
        [t] = resp.responses
        [p] = t.partition_responses
        assert (t.name, p.index) == (topic, partition)
        return p

    def nothing_within(self, seconds: float) -> bool:
        """True when no answer starts arriving within ``seconds``."""
        self.sock.settimeout(seconds)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            return True
        finally:
            self.sock.settimeout(self.timeout)
        assert data, "broker closed the connection"
        return False

    def wait_closed(self, timeout: float = TIMEOUT) -> tuple[bool, bytes]:
        """Read until the broker closes the connection or ``timeout`` passes.

        Returns (closed, whatever was received before).
        """
        self.sock.settimeout(timeout)
        received = bytearray()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return True, bytes(received)
            except TimeoutError:
                break
            if not chunk:
                return True, bytes(received)
            received += chunk
        return False, bytes(received)

    def assert_closed(self, timeout: float = TIMEOUT) -> bytes:
        """Wait for the broker to close the connection; return whatever it sent before."""
        closed, received = self.wait_closed(timeout)
        if not closed:
            pytest.fail(f"connection still open after {timeout}s (received {received[:64]!r})")
        return received


# -- request builders -----------------------------------------------------------------------


def produce_req(
    topic: str, records: bytes | None, partition: int = 0, acks: int = 1, version: int = 8
) -> Any:
    T = ProduceRequest.TopicProduceData
    return ProduceRequest[version](
        acks=acks,
        timeout_ms=5000,
        topic_data=[T(name=topic, partition_data=[T.PartitionProduceData(index=partition, records=records)])],
    )


def metadata_req(topics: list[str] | None, version: int = 8, auto_create: bool = False) -> Any:
    items = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return MetadataRequest[version](
        topics=items,
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def list_offsets_req(
    topic: str, partition: int = 0, timestamp: int = -1, version: int = 5, isolation_level: int = 0
) -> Any:
    T = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest[version](
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            T(
                name=topic,
                partitions=[
                    T.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )


def fetch_req(
    topic: str,
    offset: int = 0,
    partition: int = 0,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    version: int = 11,
    isolation_level: int = 0,
    max_bytes: int = 50 << 20,
    partition_max_bytes: int = 10 << 20,
) -> Any:
    T = FetchRequest.FetchTopic
    return FetchRequest[version](
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        rack_id="",
        forgotten_topics_data=[],
        topics=[
            T(
                topic=topic,
                partitions=[
                    T.FetchPartition(
                        partition=partition,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        log_start_offset=-1,
                        partition_max_bytes=partition_max_bytes,
                    )
                ],
            )
        ],
    )


def create_topic_req(
    name: str, partitions: int = 1, configs: dict[str, str] | None = None, timeout_ms: int = 10000
) -> Any:
    T = CreateTopicsRequest.CreatableTopic
    return CreateTopicsRequest[4](
        timeout_ms=timeout_ms,
        validate_only=False,
        topics=[
            T(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
    )


# -- one-shot operations on new connections -------------------------------------------------


def request(port: int, req: Any, resp_cls: Any, *, client_id: str = CLIENT_ID, timeout: float = TIMEOUT) -> Any:
    """Send ``req`` on a new connection; return its answer."""
    with Conn(port, timeout, client_id) as c:
        return c.call(req, resp_cls)


def produce(
    port: int,
    topic: str,
    records: bytes | None,
    partition: int = 0,
    acks: int = 1,
    version: int = 8,
    *,
    client_id: str = CLIENT_ID,
    timeout: float = TIMEOUT,
) -> Any:
    """Send one produce; return the partition's answer."""
    with Conn(port, timeout, client_id) as c:
        return c.produce(topic, records, partition, acks, version)


def end_offset(
    port: int, topic: str, partition: int = 0, *, client_id: str = CLIENT_ID, timeout: float = TIMEOUT
) -> int:
    resp = request(port, list_offsets_req(topic, partition), ListOffsetsResponse, client_id=client_id, timeout=timeout)
    p = resp.topics[0].partitions[0]
    assert p.error_code == 0, p
    return p.offset


def fetch_records(
    port: int,
    topic: str,
    partition: int = 0,
    *,
    client_id: str = CLIENT_ID,
    timeout: float = TIMEOUT,
    **fetch: Any,
) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every (offset, key, value) stored in the partition, fetched with ``fetch_req(..., **fetch)``.

    Records before the fetch offset (a batch the offset falls inside) are skipped.
    """
    out: list[tuple[int, bytes | None, bytes | None]] = []
    with Conn(port, timeout, client_id) as c:
        while True:
            offset = out[-1][0] + 1 if out else 0
            resp = c.call(fetch_req(topic, offset, partition, **fetch), FetchResponse)
            p = resp.responses[0].partitions[0]
            assert p.error_code == 0, p
            data = bytes(p.records or b"")
            got = 0
            for pos, _ in iter_batches(data):
                for r in decode_batch_records(data, pos)[1]:
                    if r.offset >= offset:
                        out.append((r.offset, r.key, r.value))
                        got += 1
            if not got or out[-1][0] + 1 >= p.high_watermark:
                return out


def create_topic(
    port: int,
    name: str,
    partitions: int = 1,
    configs: dict[str, str] | None = None,
    *,
    client_id: str = CLIENT_ID,
    timeout: float = TIMEOUT,
) -> None:
    """Create a topic (or find it already there)."""
    resp = request(
        port, create_topic_req(name, partitions, configs), CreateTopicsResponse, client_id=client_id, timeout=timeout
    )
    assert resp.topics[0].error_code in (0, TOPIC_ALREADY_EXISTS), resp


def incremental_alter_configs(port: int, resource_type: int, name: str, values: dict[str, str | None],
                              validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 of one resource (2 topic, 4 broker): SET, or DELETE for None;
    (error, message)."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    req = IncrementalAlterConfigsRequest[1](validate_only=validate_only, resources=[resource(
        resource_type=resource_type, resource_name=name, configs=[
            config(name=k, config_operation=0 if v is not None else 1, value=v) for k, v in values.items()])])
    [result] = request(port, req, IncrementalAlterConfigsResponse).responses
    return result.error_code, result.error_message


def describe_configs(port: int, resource_type: int, name: str, keys: list[str] | None = None) -> Any:
    """DescribeConfigs v4 with synonyms of one resource (2 topic, 4 broker): its result."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    req = DescribeConfigsRequest[4](resources=[resource(resource_type=resource_type, resource_name=name,
                                                        configuration_keys=keys)],
                                    include_synonyms=True, include_documentation=False)
    [result] = request(port, req, DescribeConfigsResponse).results
    return result
def simple_commit(conn: Conn, group: str, topic: str, offsets: dict[int, int]) -> None:
    """OffsetCommit v2 with generation -1 and no member id (a group without members), every partition
    answered NONE."""
    T = OffsetCommitRequest.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    req = OffsetCommitRequest[2](group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                 retention_time_ms=-1,
                                 topics=[T(name=topic, partitions=[P(partition_index=p, committed_offset=o,
                                                                     committed_metadata="")
                                                                   for p, o in offsets.items()])])
    resp = conn.call(req, OffsetCommitResponse)
    assert [p.error_code for t in resp.topics for p in t.partitions] == [0] * len(offsets)
