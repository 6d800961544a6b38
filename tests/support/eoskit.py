"""Readers and counts for the exactly-once tests: what a read_committed (or read_uncommitted) consumer sees of a
topic, and how many duplicates and gaps it holds."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Hashable, Iterable

from confluent_kafka import Consumer, TopicPartition

from .confluent import headers_of, position
from .connectproc import unique
from .mirrorkit import Rec

__all__ = ["copies", "end_offsets", "read_isolated"]


def read_isolated(bootstrap: str, topic: str, isolation: str, timeout: float = 60.0, quiet: float = 1.5) -> list[Rec]:
    """Every record of ``topic`` with the given ``isolation.level``: read until the positions reach the end
    offsets of the moment, or nothing came for ``quiet`` seconds (a partition may end in a commit marker,
    which no record follows)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-reader"), "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "isolation.level": isolation, "fetch.wait.max.ms": 50})
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - last < quiet:
            msgs = c.consume(10000, timeout=0.2)
            for m in msgs:
                if m.error() is None:
                    out.append(Rec(*position(m), m.key(), m.value(), headers_of(m), m.timestamp()[1]))
            if msgs:
                last = time.monotonic()
            at = c.position([TopicPartition(topic, p) for p in ends])
            if all(tp.offset >= ends[tp.partition] or ends[tp.partition] == 0 for tp in at):
                break
        return out
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str) -> int:
    """The sum of the topic's high watermarks (0: no such topic yet): how far the mirror has written."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("eos-ends")})
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions)
    finally:
        c.close()


def copies(expected: Iterable[Hashable], seen: Iterable[Hashable]) -> tuple[int, int, int]:
    """(duplicates, missing, foreign) of what a reader ``seen`` against what it should see once each:
    copies beyond the first, expected items never seen, items seen that were not expected."""
    want = Counter(expected)
    got = Counter(seen)
    duplicates = sum(n - 1 for n in got.values() if n > 1)
    missing = sum(1 for k in want if k not in got)
    foreign = sum(n for k, n in got.items() if k not in want)
    return duplicates, missing, foreign
