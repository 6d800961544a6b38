"""A small blocking Kafka client: the four requests a reader needs (ApiVersions, Metadata, ListOffsets, Fetch),
over TLS and SASL (PLAIN, SCRAM-SHA-256/512) as Kafka's client security keys say.

Requests and responses are kafka-python's classes generated from Kafka's message schemas; record
batches stay raw bytes (``decode`` turns them into Arrow columns). A full consumer is not used
because a Spark task reads one bounded offset range of one partition: no group, no position
tracking, no prefetch thread, and fetched batches need not become a Python object per record.

Connections are per broker node and reused; one ``KafkaClient`` serves one thread.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.net.sasl.scram import ScramClient
from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from headwater.kafka.client_security import client_security
from headwater.kafka.errors import ErrorCode

from .errors import SparkSourceError

__all__ = ["EARLIEST", "LATEST", "RETRIABLE", "TP", "ClusterMetadata", "Connection", "KafkaClient", "KafkaReadError",
           "PartitionFetch", "error_name"]

EARLIEST = -2  # ListOffsets timestamps, and the same numbers in Spark's offset JSON
LATEST = -1

TP = tuple[str, int]

# Highest version asked for: the last non-flexible version of each API, which every broker from
# Kafka 2.x to 4.x serves, by topic name (Fetch 13+ addresses topics by id).
_WANTED = {FetchRequest.API_KEY: (4, 11), ListOffsetsRequest.API_KEY: (1, 5), MetadataRequest.API_KEY: (1, 8)}
RETRIABLE = frozenset({
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.OFFSET_NOT_AVAILABLE,
})
_SIZE = struct.Struct(">i")


class KafkaReadError(SparkSourceError, RuntimeError):
    """A request the cluster refused or could not answer; ``code`` is the Kafka error code (if any)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


@dataclass
class ClusterMetadata:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    # topic -> partition -> leader node id (-1 while there is none)
    topics: dict[str, dict[int, int]] = field(default_factory=dict)
    internal: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)  # topics the cluster answered with an error for


@dataclass
class PartitionFetch:
    """One partition's part of a fetch answer."""

    error: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes
    aborted: list[tuple[int, int]]  # (producer id, first offset) of aborted transactions in range


class Connection:
    """One broker connection; ``settings`` are ``client_security``'s (TLS context, SASL mechanism and login)."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float,
                 settings: Mapping[str, Any] | None = None) -> None:
        self.address = f"{host}:{port}"
        self.client_id = client_id
        settings = settings or {"security_protocol": "PLAINTEXT"}
        protocol = settings["security_protocol"]
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if protocol.endswith("SSL"):
                sock = settings["ssl_context"].wrap_socket(sock, server_hostname=host)
        except OSError as exc:  # ssl.SSLError (an untrusted certificate) is one
            raise KafkaReadError(f"cannot connect to the Kafka broker at {self.address} ({protocol}): {exc}") from None
        self.sock = sock
        self._cid = 0
        self.versions: dict[int, int] = {}
        self._negotiate()
        if protocol.startswith("SASL_"):
            self._authenticate(settings["sasl_mechanism"], settings["sasl_plain_username"],
                               settings["sasl_plain_password"])

    def _authenticate(self, mechanism: str, user: str, password: str) -> None:
        """SaslHandshake v1, then SaslAuthenticate frames: PLAIN's one token, or SCRAM's two exchanges."""
        shake = self.call(SaslHandshakeRequest[1](mechanism=mechanism), SaslHandshakeResponse)
        if shake.error_code:
            raise KafkaReadError(f"the broker at {self.address} does not take SASL {mechanism} (it takes "
                                 f"{', '.join(shake.mechanisms) or 'none'})", shake.error_code)
        if mechanism == "PLAIN":
            self._sasl_token(mechanism, b"\0" + user.encode() + b"\0" + password.encode())
            return
        scram = ScramClient(user, password, mechanism)
        scram.process_server_first_message(self._sasl_token(mechanism, scram.first_message()))
        try:
            scram.process_server_final_message(self._sasl_token(mechanism, scram.final_message()))
        except ValueError as exc:  # the server's signature is not the one the password gives
            raise KafkaReadError(f"SASL {mechanism} with the broker at {self.address}: {exc}") from None

    def _sasl_token(self, mechanism: str, token: bytes) -> bytes:
        answer = self.call(SaslAuthenticateRequest[1](auth_bytes=token), SaslAuthenticateResponse)
        if answer.error_code:
            raise KafkaReadError(f"SASL {mechanism} authentication with the broker at {self.address} failed: "
                                 f"{answer.error_message or error_name(answer.error_code)}", answer.error_code)
        return bytes(answer.auth_bytes)

    def _negotiate(self) -> None:
        answer = self.call(ApiVersionsRequest[0](), ApiVersionsResponse)
        if answer.error_code:
            raise KafkaReadError(f"{self.address} refused ApiVersions: {error_name(answer.error_code)}",
                                 answer.error_code)
        served = {a.api_key: (a.min_version, a.max_version) for a in answer.api_keys}
        for key, (low, high) in _WANTED.items():
            if key not in served or served[key][1] < low or served[key][0] > high:
                raise KafkaReadError(f"the broker at {self.address} does not serve API key {key} "
                                     f"at any version from {low} to {high}")
            self.versions[key] = min(high, served[key][1])

    def send(self, request: Any) -> int:
        self._cid += 1
        request.with_header(correlation_id=self._cid, client_id=self.client_id)
        try:
            self.sock.sendall(request.encode(header=True, framed=True))
        except OSError as exc:
            raise KafkaReadError(f"lost the connection to {self.address}: {exc}") from None
        return self._cid

    def receive(self, response_cls: Any, version: int) -> Any:
        head = self._read(4)
        body = self._read(_SIZE.unpack(head)[0])
        return response_cls.decode(body, version=version, header=True)

    def call(self, request: Any, response_cls: Any) -> Any:
        self.send(request)
        return self.receive(response_cls, request.API_VERSION)

    def _read(self, n: int) -> memoryview:
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        try:
            while got < n:
                k = self.sock.recv_into(view[got:])
                if not k:
                    raise KafkaReadError(f"the broker at {self.address} closed the connection")
                got += k
        except OSError as exc:
            raise KafkaReadError(f"lost the connection to {self.address}: {exc}") from None
        return view

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class KafkaClient:
    """Metadata, offsets and fetches against one cluster; ``security`` are Kafka's client security keys
    (``security.protocol``, ``sasl.*``, ``ssl.*``: PLAIN and SCRAM over TLS or not)."""

    def __init__(self, bootstrap: str, client_id: str = "headwater-spark", timeout: float = 30.0,
                 retries: int = 5, retry_backoff: float = 0.2, security: Mapping[str, str] | None = None) -> None:
        self.bootstrap = [_host_port(s) for s in bootstrap.split(",") if s.strip()]
        if not self.bootstrap:
            raise KafkaReadError("kafka.bootstrap.servers names no broker")
        self.client_id = client_id
        self.settings = client_security(security or {})
        self.timeout = timeout
        self.retries = retries
        self.retry_backoff = retry_backoff
        self._conns: dict[int | str, Connection] = {}
        self.meta = ClusterMetadata()

    # -- connections ------------------------------------------------------------------------

    def _any(self) -> Connection:
        """A connection to some broker: an open one, else a bootstrap server, else a node metadata named."""
        if self._conns:
            return next(iter(self._conns.values()))
        errors = []
        candidates: list[tuple[int | str, str, int]] = [(f"boot:{h}:{p}", h, p) for h, p in self.bootstrap]
        candidates += [(node, h, p) for node, (h, p) in self.meta.brokers.items()]
        for key, host, port in candidates:
            try:
                conn = Connection(host, port, self.client_id, self.timeout, self.settings)
            except KafkaReadError as exc:
                errors.append(str(exc))
                continue
            self._conns[key] = conn
            return conn
        raise KafkaReadError("; ".join(errors))

    def node(self, node_id: int) -> Connection:
        conn = self._conns.get(node_id)
        if conn is None:
            if node_id not in self.meta.brokers:
                self.refresh()
            if node_id not in self.meta.brokers:
                raise KafkaReadError(f"broker {node_id} is not in the cluster's metadata")
            host, port = self.meta.brokers[node_id]
            conn = self._conns[node_id] = Connection(host, port, self.client_id, self.timeout, self.settings)
        return conn

    def drop(self, conn: Connection) -> None:
        for key, c in list(self._conns.items()):
            if c is conn:
                del self._conns[key]
        conn.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata -----------------------------------------------------------------------------

    def refresh(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Metadata of ``topics`` (all topics when None), merged into ``self.meta``; no topic is created."""
        names = None if topics is None else sorted(set(topics))
        items = None if names is None else [MetadataRequest.MetadataRequestTopic(name=t) for t in names]
        for attempt in range(self.retries + 1):
            conn = None
            try:
                conn = self._any()
                request = MetadataRequest[conn.versions[MetadataRequest.API_KEY]](
                    topics=items, allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False)
                answer = conn.call(request, MetadataResponse)
                break
            except KafkaReadError:
                if conn is not None:
                    self.drop(conn)
                if attempt == self.retries:
                    raise
                time.sleep(self.retry_backoff * (attempt + 1))
        meta = self.meta
        meta.brokers = {b.node_id: (b.host, b.port) for b in answer.brokers}
        if names is None:
            meta.topics.clear()
            meta.errors.clear()
        for t in answer.topics:
            if t.error_code and t.error_code != ErrorCode.LEADER_NOT_AVAILABLE:
                meta.errors[t.name] = t.error_code
                meta.topics.pop(t.name, None)
                continue
            meta.errors.pop(t.name, None)
            meta.topics[t.name] = {p.partition_index: p.leader_id for p in t.partitions}
            if t.is_internal:
                meta.internal.add(t.name)
        return meta

    def leader(self, tp: TP, refresh: bool = False) -> int:
        topic, partition = tp
        if refresh or topic not in self.meta.topics or self.meta.topics[topic].get(partition, -1) < 0:
            self.refresh([topic])
        leader = self.meta.topics.get(topic, {}).get(partition)
        if leader is None:
            code = self.meta.errors.get(topic)
            why = error_name(code) if code is not None else "no such partition"
            raise KafkaReadError(f"topic-partition {topic}-{partition}: {why}", code)
        return leader

    # -- offsets ------------------------------------------------------------------------------

    def list_offsets(self, tps: Iterable[TP], timestamp: int, read_committed: bool = False) -> dict[TP, int]:
        """The earliest (``EARLIEST``) or latest (``LATEST``: the high watermark, or the last stable
        offset when ``read_committed``) offset of each partition, asked of each partition's leader."""
        pending = set(tps)
        out: dict[TP, int] = {}
        for attempt in range(self.retries + 1):
            retry: set[TP] = set()
            by_leader: dict[int, list[TP]] = {}
            for tp in sorted(pending):
                by_leader.setdefault(self.leader(tp, refresh=attempt > 0), []).append(tp)
            for leader, group in by_leader.items():
                if leader < 0:
                    retry.update(group)
                    continue
                try:
                    answer = self._list_offsets_at(leader, group, timestamp, read_committed)
                except KafkaReadError:
                    if attempt == self.retries:
                        raise
                    retry.update(group)
                    continue
                for tp, (code, offset) in answer.items():
                    if code == 0:
                        out[tp] = offset
                    elif code in RETRIABLE and attempt < self.retries:
                        retry.add(tp)
                    else:
                        raise KafkaReadError(f"ListOffsets for {tp[0]}-{tp[1]}: {error_name(code)}", code)
            if not retry:
                return out
            pending = retry
            time.sleep(self.retry_backoff)
        raise KafkaReadError(f"no leader answered ListOffsets for {sorted(pending)}")

    def _list_offsets_at(self, leader: int, tps: list[TP], timestamp: int,
                         read_committed: bool) -> dict[TP, tuple[int, int]]:
        conn = self.node(leader)
        version = conn.versions[ListOffsetsRequest.API_KEY]
        T = ListOffsetsRequest.ListOffsetsTopic
        topics: dict[str, list[int]] = {}
        for topic, partition in tps:
            topics.setdefault(topic, []).append(partition)
        request = ListOffsetsRequest[version](
            replica_id=-1, isolation_level=1 if read_committed else 0,
            topics=[T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                                                       timestamp=timestamp) for p in parts])
                    for topic, parts in topics.items()])
        try:
            answer = conn.call(request, ListOffsetsResponse)
        except KafkaReadError:
            self.drop(conn)
            raise
        return {(t.name, p.partition_index): (p.error_code, p.offset) for t in answer.topics for p in t.partitions}

    # -- fetching -----------------------------------------------------------------------------

    def fetch_request(self, conn: Connection, tp: TP, offset: int, max_bytes: int, read_committed: bool,
                      max_wait_ms: int = 0) -> Any:
        version = conn.versions[FetchRequest.API_KEY]
        T = FetchRequest.FetchTopic
        return FetchRequest[version](
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
            isolation_level=1 if read_committed else 0, session_id=0, session_epoch=-1, rack_id="",
            forgotten_topics_data=[],
            topics=[T(topic=tp[0], partitions=[T.FetchPartition(partition=tp[1], current_leader_epoch=-1,
                                                                 fetch_offset=offset, log_start_offset=-1,
                                                                 partition_max_bytes=max_bytes)])])

    @staticmethod
    def fetch_answer(conn: Connection, version: int) -> PartitionFetch:
        answer = conn.receive(FetchResponse, version)
        if answer.error_code:
            return PartitionFetch(answer.error_code, -1, -1, -1, b"", [])
        [topic] = answer.responses
        [p] = topic.partitions
        aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions or []]
        return PartitionFetch(p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
                              p.records or b"", aborted)


def _host_port(server: str) -> tuple[str, int]:
    server = server.strip()
    for prefix in ("PLAINTEXT://", "plaintext://"):
        server = server.removeprefix(prefix)
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        raise KafkaReadError(f"kafka.bootstrap.servers: {server!r} is not host:port")
    return host.strip("[]"), int(port)

