"""aiokafka clients built from Kafka property names (``producer.*``/``consumer.*`` overrides); the security keys
among them (``security.protocol``, ``sasl.*``, ``ssl.*``) go through ``security.client_security``, so every
client built here connects as its configuration says, or is not built."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.client import AIOKafkaClient
from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError
from aiokafka.producer.message_accumulator import BatchBuilder

from .raw_fetch import checked_isolation
from .security import client_security, is_security_key

__all__ = ["PrebuiltBatch", "admin_client", "bootstrap_failure", "consumer", "explained", "fill_batch", "kafka_kwargs",
           "prebuilt_batch", "producer", "stop_producer"]

log = logging.getLogger(__name__)

_INT = int
_BOOL = lambda v: str(v).strip().lower() == "true"  # noqa: E731


def _boolean(key: str) -> Callable[[str], bool]:
    """A boolean property read as Kafka's ConfigDef reads one: true or false, or an error naming it."""
    def parse(value: str) -> bool:
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, got {value!r}")
        return text == "true"
    return parse


# Kafka property -> (aiokafka keyword, converter)
_PRODUCER: dict[str, tuple[str, Any]] = {
    "acks": ("acks", lambda v: v if v == "all" else int(v)),
    "batch.size": ("max_batch_size", _INT),
    "linger.ms": ("linger_ms", _INT),
    "compression.type": ("compression_type", lambda v: None if v == "none" else v),
    "max.request.size": ("max_request_size", _INT),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "enable.idempotence": ("enable_idempotence", _BOOL),
    "client.id": ("client_id", str),
    "retry.backoff.ms": ("retry_backoff_ms", _INT),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "delivery.timeout.ms": ("delivery_timeout_ms", _INT),  # not aiokafka's: see producer()
    "transaction.timeout.ms": ("transaction_timeout_ms", _INT),  # used by transactional producers only
}
_CONSUMER: dict[str, tuple[str, Any]] = {
    "auto.offset.reset": ("auto_offset_reset", str),
    "fetch.max.bytes": ("fetch_max_bytes", _INT),
    "max.partition.fetch.bytes": ("max_partition_fetch_bytes", _INT),
    "fetch.min.bytes": ("fetch_min_bytes", _INT),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _INT),
    "max.poll.records": ("max_poll_records", _INT),
    "session.timeout.ms": ("session_timeout_ms", _INT),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _INT),
    "max.poll.interval.ms": ("max_poll_interval_ms", _INT),
    "isolation.level": ("isolation_level", checked_isolation),
    "check.crcs": ("check_crcs", _boolean("check.crcs")),
    "client.id": ("client_id", str),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "request.timeout.ms": ("request_timeout_ms", _INT),
}
_ADMIN: dict[str, tuple[str, Any]] = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", _INT),
    "metadata.max.age.ms": ("metadata_max_age_ms", _INT),
    "retry.backoff.ms": ("retry_backoff_ms", _INT),
}


def kafka_kwargs(props: Mapping[str, str], table: dict[str, tuple[str, Any]]) -> dict[str, Any]:
    """Translate the Kafka properties aiokafka understands, the security ones included (a ValueError names a
    security key that is wrong or cannot be honoured); others are ignored."""
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in table:
            name, conv = table[key]
            out[name] = conv(value)
    if any(is_security_key(k) for k in props):  # else the caller's own settings (the CLI's) stand
        out.update(client_security(props))
    return out


def producer(bootstrap: str, overrides: dict[str, str], **defaults: Any) -> AIOKafkaProducer:
    """An AIOKafkaProducer; ``delivery_timeout_ms`` (Kafka's delivery.timeout.ms) bounds how long a batch
    is retried. aiokafka retries a batch's retriable errors (in order, at the head of its partition's
    queue, ``retry_backoff_ms`` apart) until ``request_timeout_ms`` after the batch was queued; Kafka
    bounds each request by request.timeout.ms and the whole delivery by delivery.timeout.ms."""
    kwargs = {**defaults, **kafka_kwargs(overrides, _PRODUCER)}
    delivery_timeout_ms = kwargs.pop("delivery_timeout_ms", None)
    out = AIOKafkaProducer(bootstrap_servers=bootstrap, **kwargs)
    _explain_bootstrap(out, out.client)
    if delivery_timeout_ms is not None:
        out._message_accumulator._batch_ttl = delivery_timeout_ms / 1000
    _bound_requests(out._message_accumulator, out._max_request_size)
    return out


def _bound_requests(accumulator: Any, max_request_size: int) -> None:
    """Produce requests of at most ``max_request_size`` bytes of batches (one batch alone may be bigger), as
    Kafka's RecordAccumulator.drain stops filling a request: aiokafka puts the next batch of every
    partition led by a node into one request, whatever their sum. The batches left out go back to the head
    of their partition's queue for the next request."""
    drain = accumulator.drain_by_nodes

    def drain_by_nodes(ignore_nodes: Any, muted_partitions: Any = frozenset()) -> Any:
        nodes, unknown_leaders = drain(ignore_nodes, muted_partitions)
        for batches in nodes.values():
            size = 0
            for tp, batch in list(batches.items()):
                batch_size = batch._builder.size()
                if size and size + batch_size > max_request_size:
                    del batches[tp]
                    accumulator.reenqueue(batch)
                else:
                    size += batch_size
        return nodes, unknown_leaders

    accumulator.drain_by_nodes = drain_by_nodes


async def stop_producer(producer: AIOKafkaProducer, timeout_s: float) -> None:
    """Stop ``producer``, waiting about ``timeout_s`` for what it still has to deliver; batches not
    delivered by then expire: each fails at its next attempt instead of being retried (as Kafka's
    ``close(timeout)`` aborts them), so a long delivery.timeout.ms does not keep a task from stopping."""
    try:
        await asyncio.wait_for(asyncio.shield(producer.flush()), timeout_s)
    except TimeoutError:
        accumulator = producer._message_accumulator
        for batch in [*(b for queue in accumulator._batches.values() for b in queue), *accumulator._pending_batches]:
            batch._ttl = 0  # in flight: failed when its request fails; queued: failed by the next drain
        log.warning("producer %s: batches not delivered within %.1f s of closing are given up",
                    producer.client._client_id, timeout_s)
    await producer.stop()


def consumer(bootstrap: str, overrides: dict[str, str], **defaults: Any) -> AIOKafkaConsumer:
    kwargs = {**defaults, **kafka_kwargs(overrides, _CONSUMER)}
    out = AIOKafkaConsumer(bootstrap_servers=bootstrap, **kwargs)
    _explain_bootstrap(out, out._client)
    return out


def admin_client(bootstrap: str, props: Mapping[str, str] | None = None, **kwargs: Any) -> AIOKafkaAdminClient:
    """An admin client; ``props`` are Kafka's admin properties (``admin.*``), ``kwargs`` aiokafka's defaults."""
    out = AIOKafkaAdminClient(bootstrap_servers=bootstrap, **{**kwargs, **kafka_kwargs(props or {}, _ADMIN)})
    _explain_bootstrap(out, out._client)
    return out


async def bootstrap_failure(client: AIOKafkaClient) -> str:
    """Why ``client`` cannot reach any of its bootstrap servers, each tried once more as aiokafka's bootstrap
    does (which logs the reason and raises only "Unable to bootstrap from [...]")."""
    reasons = []
    for host, port, _ in client.hosts:
        try:
            conn = await create_conn(
                host, port, client_id=client._client_id, request_timeout_ms=client._request_timeout_ms,
                ssl_context=client._ssl_context, security_protocol=client._security_protocol,
                sasl_mechanism=client._sasl_mechanism, sasl_plain_username=client._sasl_plain_username,
                sasl_plain_password=client._sasl_plain_password,
                sasl_oauth_token_provider=client._sasl_oauth_token_provider)
        except Exception as exc:  # noqa: BLE001 - any reason is the answer
            reasons.append(f"{host}:{port} ({client._security_protocol}): {type(exc).__name__}: {exc}")
        else:
            conn.close()
    return "; ".join(reasons) or "each bootstrap server answered when tried again"


async def explained(exc: KafkaConnectionError, client: AIOKafkaClient) -> KafkaConnectionError:
    """aiokafka's "Unable to bootstrap from [...]" with the reason found by ``bootstrap_failure``."""
    return KafkaConnectionError(f"{exc.args[0] if exc.args else exc}: {await bootstrap_failure(client)}")


def _explain_bootstrap(owner: Any, client: AIOKafkaClient) -> None:
    """``owner.start()`` raising a KafkaConnectionError that says why the bootstrap failed: a refused login
    or an untrusted certificate then reaches the task's trace, not only the log."""
    start = owner.start

    async def explained_start() -> None:
        try:
            await start()
        except KafkaConnectionError as exc:
            raise await explained(exc, client) from exc

    owner.start = explained_start


def fill_batch(builder: BatchBuilder, key: bytes | None, values: list[bytes | None], start: int,
               timestamp: int) -> int:
    """Append ``values[start:]`` (one key, no headers) to an aiokafka BatchBuilder until it is
    full; return the index of the first value that did not fit (``len(values)``: all did).

    Calls the C record builder underneath directly: aiokafka's per-record ``append`` wrapper
    costs more than the append itself (0.45 against 0.2 us a record)."""
    inner = builder._builder
    offset = builder._relative_offset
    append = inner.append
    no_headers: list[tuple[str, bytes]] = []
    for i in range(start, len(values)):
        if append(offset, timestamp, key, values[i], no_headers) is None:
            builder._relative_offset = offset
            builder.close()
            return i
        offset += 1
    builder._relative_offset = offset
    return len(values)


def prebuilt_batch(producer: Any, data: bytes, count: int) -> PrebuiltBatch:
    """``data`` (one record batch, ``count`` records) to be sent whole by ``producer``: marked transactional when
    the producer is, as its own builders are."""
    txn_manager = getattr(producer, "_txn_manager", None)
    return PrebuiltBatch(data, count, transactional=getattr(txn_manager, "transactional_id", None) is not None)


class PrebuiltBatch:
    """A record batch already in wire form, for ``AIOKafkaProducer.send_batch`` (which takes a
    BatchBuilder: the producer asks it only for its bytes, size and count, and for its producer state
    to be set when idempotent). Nothing can be appended to it. ``transactional``: sent by a transactional
    producer, whose batches the broker counts in the open transaction only when their header says so."""

    def __init__(self, data: bytes, count: int, *, transactional: bool = False) -> None:
        self._buffer = data
        self._count = count
        self._closed = False
        self._transactional = transactional

    def append(self, *args: Any, **kwargs: Any) -> None:
        return None  # full

    def close(self) -> None:
        self._closed = True

    def closed(self) -> bool:
        return self._closed

    def size(self) -> int:
        return len(self._buffer)

    def record_count(self) -> int:
        return self._count

    def _build(self) -> bytes:
        self._closed = True
        return self._buffer

    def _set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        from headwater.kafka.records import copy_batch, parse_header

        self._buffer = copy_batch(self._buffer, 0, parse_header(self._buffer), producer_id=producer_id,
                                  producer_epoch=producer_epoch, base_sequence=base_sequence,
                                  transactional=self._transactional)
