"""Two real brokers and Connect workers over them, for the MirrorMaker tests."""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from .confluent import headers_of, position


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=configs)])[topic].result(30)
    del admin


def grow(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(topic, partitions)])[topic].result(30)


def topics(bootstrap: str) -> dict[str, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    return {name: len(t.partitions) for name, t in md.topics.items() if not t.error}


def produce_keyed(bootstrap: str, topic: str, count: int, start: int = 0, headers: bool = True,
                  base_ts: int = 1_700_000_000_000, pad: int = 0, **config: Any) -> None:
    """``count`` keyed records (key k<i % 50>) with headers and a timestamp of their own each; ``pad``
    more bytes in each value; ``config``: more librdkafka settings (e.g. ``{"batch.size": 16384}``)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True, **config})
    for i in range(start, start + count):
        hdrs: list[tuple[str, str | bytes | None]] | None = (
            [("n", str(i).encode()), ("dup", b"a"), ("dup", b"b")] if headers and i % 3 else None)
        p.produce(topic, key=f"k{i % 50}".encode(), value=f"v{i}".encode() * (1 + i % 4) + b"." * pad, headers=hdrs,
                  timestamp=base_ts + i)
        if i % 5000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def read_all(bootstrap: str, topic: str, expect: int | None = None, timeout: float = 60.0,
             settle: float = 0.0) -> list[Rec]:
    """Every record of ``topic`` (all partitions, from the beginning); waits for ``expect`` of them (and so,
    within ``timeout``, for the topic to exist: a source may not have created it yet)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        deadline = time.monotonic() + timeout
        while True:
            meta = c.list_topics(topic, timeout=30).topics.get(topic)
            parts = len(meta.partitions) if meta is not None and meta.error is None else 0
            if parts or expect is None or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        out: list[Rec] = []
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = c.consume(10000, 0.2)
            for m in msgs:
                if m.error():
                    continue
                out.append(Rec(*position(m), m.key(), m.value(), headers_of(m), m.timestamp()[1]))
            if msgs:
                quiet_since = time.monotonic()
            if expect is not None and len(out) >= expect and time.monotonic() - quiet_since >= settle:
                break
            if expect is None and time.monotonic() - quiet_since > max(settle, 1.0):
                break
        return out
    finally:
        c.close()


def by_partition(records: Iterable[Rec]) -> dict[int, list[tuple[Any, ...]]]:
    """Each partition's records without their offsets, in order."""
    out: dict[int, list[tuple[Any, ...]]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append((r.key, r.value, r.headers, r.timestamp))
    return out


def mirror_config(name: str, cls: str, source: tuple[str, str], target: tuple[str, str],
                  **extra: Any) -> dict[str, Any]:
    """A MirrorMaker connector config from alias ``source[0]`` at ``source[1]`` into ``target``."""
    return {"name": name, "connector.class": cls, "source.cluster.alias": source[0],
            "target.cluster.alias": target[0], "source.cluster.bootstrap.servers": source[1],
            "target.cluster.bootstrap.servers": target[1], "tasks.max": "2",
            "refresh.topics.interval.seconds": "2", "refresh.groups.interval.seconds": "2",
            "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.interval.seconds": "1",
            **{k.replace("_", "."): str(v) for k, v in extra.items()}}


# -- MM2's internal records read with struct.unpack from the field layouts (not our decoders) -------------

def _string(data: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", data, pos)
    return data[pos + 2:pos + 2 + n].decode(), pos + 2 + n


def unpack_offset_sync(key: bytes | None, value: bytes | None) -> tuple[str, int, int, int]:
    """(topic, partition, upstream, downstream): key {topic STRING, partition INT32}, value {INT64, INT64}."""
    assert key is not None and value is not None, "an offset sync has a key and a value"
    topic, pos = _string(key, 0)
    (partition,) = struct.unpack_from(">i", key, pos)
    upstream, downstream = struct.unpack_from(">qq", value, 0)
    return topic, partition, upstream, downstream


def unpack_checkpoint(key: bytes | None, value: bytes | None) -> tuple[str, str, int, int, int, str]:
    """(group, topic, partition, upstream, downstream, metadata): value starts with version INT16 = 0."""
    assert key is not None and value is not None, "a checkpoint has a key and a value"
    group, pos = _string(key, 0)
    topic, pos = _string(key, pos)
    (partition,) = struct.unpack_from(">i", key, pos)
    version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    assert version == 0
    metadata, _ = _string(value, 18)
    return group, topic, partition, upstream, downstream, metadata


def unpack_heartbeat(key: bytes | None, value: bytes | None) -> tuple[str, str, int]:
    assert key is not None and value is not None, "a heartbeat has a key and a value"
    source, pos = _string(key, 0)
    target, _ = _string(key, pos)
    version, timestamp = struct.unpack(">hq", value)
    assert version == 0
    return source, target, timestamp
