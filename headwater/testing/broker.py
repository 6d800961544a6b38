"""An embedded broker for tests: a real ``BrokerServer`` on a free loopback port, in a thread of its
own, with helpers that create topics, produce and consume through a real Kafka client."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.broker.config.broker_config import BrokerConfig
from headwater.broker.server import BrokerServer
from headwater.connect.kafka import clients
from headwater.connect.kafka.cluster_view import ClusterView, TopicOffsets
from headwater.connect.kafka.security import client_security
from headwater.connect.kafka.topics import create_topic

from .loop import LoopThread
from .names import unique
from .waiting import wait_until

__all__ = ["BROKER_SETTINGS", "EmbeddedBroker", "Record", "unique"]

# What a broker serving in-process workers needs: no initial join delay, short sessions allowed.
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


@dataclass(frozen=True)
class Record:
    """One consumed record."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def text(self) -> str | None:
        """The value as UTF-8 text."""
        return None if self.value is None else self.value.decode()

    def json(self) -> Any:
        """The value parsed as JSON."""
        return None if self.value is None else json.loads(self.value)


class EmbeddedBroker:
    """A broker on ``127.0.0.1:<free port>`` with its logs in ``data_dir``; ``start``/``stop`` or ``with``.

    ``settings`` are broker properties (``listeners=SASL_SSL://127.0.0.1:0`` and the listener's ``ssl.*`` and
    ``sasl.*`` make a secured broker); ``client_settings`` are the Kafka client properties
    (``security.protocol``, ``sasl.jaas.config``, ``ssl.truststore.location``, ...) that reach its first
    listener: the helpers here use them, and the ``headwater_worker`` fixture gives them to its worker."""

    def __init__(self, data_dir: str | Path, settings: dict[str, str] | None = None,
                 client_settings: dict[str, str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.settings = {**BROKER_SETTINGS, **(settings or {})}
        self.client_settings = dict(client_settings or {})
        self.bootstrap = ""
        self._thread: LoopThread | None = None
        self._server: BrokerServer | None = None

    def start(self) -> EmbeddedBroker:
        config = BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0",
                                              "log.dirs": str(self.data_dir), **self.settings})
        self._thread = LoopThread(unique("headwater-broker"))
        self._server = BrokerServer(config)
        self._thread.run(self._server.start())
        self.bootstrap = self._server.listener_urls()[0].split("://", 1)[1]
        return self

    def stop(self) -> list[str]:
        """Stop the broker (logs flushed and closed); returns threads that would not end."""
        if self._thread is None:
            return []
        try:
            if self._server is not None:
                self._thread.run(self._server.stop(), 30)
        finally:
            leftover = self._thread.close()
            self._thread, self._server = None, None
        return leftover

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, coro: Any, timeout: float = 30.0) -> Any:
        if self._thread is None:
            coro.close()
            raise RuntimeError("the broker is not running")
        return self._thread.run(coro, timeout)

    # -- topics -------------------------------------------------------------------------------

    def create_topic(self, name: str | None = None, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
        """Create a topic (a unique name when none is given) and return its name."""
        topic = name or unique("topic")
        self._run(self._create(topic, partitions, configs or {}))
        return topic

    async def _create(self, topic: str, partitions: int, configs: dict[str, str]) -> None:
        admin = clients.admin_client(self.bootstrap, self.client_settings)
        await admin.start()
        try:
            await create_topic(admin, topic, partitions, 1, configs)
        finally:
            await admin.close()

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The next offset of each partition of ``topic`` ({} when it does not exist)."""
        return self._run(self._ends(topic))

    async def _ends(self, topic: str) -> dict[int, int]:
        found = await _topic(self.bootstrap, topic, self.client_settings)
        return {} if found is None else {p.partition: p.end_offset for p in found.partitions}

    # -- records -------------------------------------------------------------------------------

    def produce(self, topic: str, values: list[Any], keys: list[Any] | None = None,
                partition: int | None = None) -> list[tuple[int, int]]:
        """Send ``values`` (bytes, str, or anything else as JSON) with ``keys`` (same forms, or None),
        acknowledged by the broker; returns (partition, offset) of each."""
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        pairs = list(zip(keys or [None] * len(values), values, strict=True))
        return self._run(self._produce(topic, [(_bytes(k), _bytes(v)) for k, v in pairs], partition))

    async def _produce(self, topic: str, records: list[tuple[bytes | None, bytes | None]],
                       partition: int | None) -> list[tuple[int, int]]:
        producer = clients.producer(self.bootstrap, self.client_settings, acks="all", linger_ms=0)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, key=k, partition=partition) for k, v in records]
            return [(md.partition, md.offset) for md in [await f for f in futures]]
        finally:
            await producer.stop()

    def consume(self, topic: str, timeout: float = 10.0, isolation_level: str = "read_uncommitted") -> list[Record]:
        """Every record in ``topic`` now (up to each partition's end offset), by partition and offset; with
        ``isolation_level="read_committed"`` only those of committed transactions (and none may be open)."""
        return self._run(self._consume(topic, isolation_level), timeout + 5)

    async def _consume(self, topic: str, isolation_level: str = "read_uncommitted") -> list[Record]:
        from aiokafka import TopicPartition

        found = await _topic(self.bootstrap, topic, self.client_settings)
        if found is None:
            return []
        ends = {TopicPartition(topic, p.partition): p.end_offset for p in found.partitions}
        consumer = clients.consumer(self.bootstrap, self.client_settings, enable_auto_commit=False,
                                    auto_offset_reset="earliest", isolation_level=isolation_level)
        await consumer.start()
        try:
            tps = list(ends)
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            out: list[Record] = []
            while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
                batches = await consumer.getmany(*tps, timeout_ms=500)
                for tp, messages in batches.items():
                    out += [Record(m.topic, m.partition, m.offset, m.key, m.value, m.timestamp,
                                   tuple(m.headers or ())) for m in messages if m.offset < ends[tp]]
            return sorted(out, key=lambda r: (r.partition, r.offset))
        finally:
            await consumer.stop()

    def wait_for_records(self, topic: str, count: int, timeout: float = 30.0) -> list[Record]:
        """Every record of ``topic`` once it holds at least ``count``; fails naming how many it held."""
        held: list[Record] = []

        def enough() -> bool:
            nonlocal held
            held = self.consume(topic)
            return len(held) >= count

        wait_until(enough, f"{count} records in topic {topic}", timeout, 0.2,
                   seen=lambda: f"{len(held)} records; the last: {held[-3:]}")
        return held


async def _topic(bootstrap: str, topic: str, client_settings: dict[str, str]) -> TopicOffsets | None:
    """The topic's partitions with their offsets, None when it does not exist (never created by looking)."""
    async with ClusterView(bootstrap, settings=client_security(client_settings)) as view:
        return await view.topic(topic)


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()
