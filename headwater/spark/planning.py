"""Driver-side planning: which partitions the options name, where each range starts and ends,
how much one micro-batch takes, and how ranges become Spark input partitions.

Offsets travel as Spark's Kafka source writes them in checkpoints: ``{"topic": {"0": 42}}``,
the offset of the next record to read. Spark compares a micro-batch's offsets as JSON text, so
they are always built in one order (topics by name, partitions by number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .client import EARLIEST, LATEST, TP, KafkaClient
from .options import OffsetSpec, OptionError, SourceOptions

__all__ = ["OffsetRange", "Offsets", "from_json", "plan_ranges", "rate_limit", "resolve", "subscribed", "to_json"]

Offsets = dict[TP, int]


@dataclass
class OffsetRange(InputPartition):
    """One Spark task's work: the records of one partition with offsets in [start, end)."""

    topic: str
    partition: int
    start: int
    end: int


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(value: dict[str, dict[str, int]] | None) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in (value or {}).items() for p, o in parts.items()}


def subscribed(client: KafkaClient, opts: SourceOptions) -> list[TP]:
    """The partitions the options name, as the cluster has them now (new ones included)."""
    if opts.strategy == "subscribe":
        # As with Spark's subscribe, a topic that does not exist (yet) has no partitions to read.
        meta = client.refresh(opts.topics)
        return sorted((t, p) for t in opts.topics for p in meta.topics.get(t, {}))
    if opts.strategy == "subscribePattern":
        meta = client.refresh(None)
        pattern = re.compile(opts.pattern)
        return sorted((t, p) for t, parts in meta.topics.items()
                      if t not in meta.internal and pattern.fullmatch(t) for p in parts)
    meta = client.refresh(t for t, _ in opts.assign)
    out = []
    for topic, partitions in opts.assign:
        if topic not in meta.topics:
            raise OptionError(f"option 'assign' names topic {topic!r}, which does not exist on the cluster "
                              f"at {opts.bootstrap}")
        missing = [p for p in partitions if p not in meta.topics[topic]]
        if missing:
            raise OptionError(f"option 'assign' names partitions {missing} of topic {topic!r}, which has "
                              f"{len(meta.topics[topic])} partition(s)")
        out += [(topic, p) for p in partitions]
    return sorted(out)


def resolve(client: KafkaClient, opts: SourceOptions, tps: Iterable[TP], spec: OffsetSpec, option: str) -> Offsets:
    """Offsets for ``tps`` from "earliest", "latest" or per-partition JSON (-2/-1 resolved here).

    Per-partition JSON must name exactly the subscribed partitions, as Spark's Kafka source requires.
    """
    tps = sorted(tps)
    if spec == "earliest":
        return _listed(client, opts, tps, EARLIEST)
    if spec == "latest":
        return _listed(client, opts, tps, LATEST)
    assert isinstance(spec, dict)
    given = {(t, p): o for t, parts in spec.items() for p, o in parts.items()}
    if set(given) != set(tps):
        missing = sorted(set(tps) - set(given))
        extra = sorted(set(given) - set(tps))
        raise OptionError(
            f"option '{option}' gives specific offsets, so it must name every partition read ({opts.description}); "
            f"use -2 for earliest, -1 for latest."
            + (f" Missing: {_names(missing)}." if missing else "")
            + (f" Not read (unknown or not subscribed): {_names(extra)}." if extra else ""))
    out = dict(given)
    for code in (EARLIEST, LATEST):
        wanted = [tp for tp, o in given.items() if o == code]
        if wanted:
            out.update(_listed(client, opts, wanted, code))
    return dict(sorted(out.items()))


def _listed(client: KafkaClient, opts: SourceOptions, tps: list[TP], code: int) -> Offsets:
    if not tps:
        return {}
    return client.list_offsets(tps, code, read_committed=opts.read_committed and code == LATEST)


def rate_limit(start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
    """End offsets that take at most ``max_rows`` records in all, shared by the partitions in proportion
    to how far behind each is (Spark's Kafka source does the same), every lagging partition moving."""
    end = dict(latest)
    if max_rows is None:
        return end
    lag = {tp: latest[tp] - start[tp] for tp in latest if latest[tp] > start.get(tp, latest[tp])}
    total = sum(lag.values())
    if total <= max_rows:
        return end
    share = {tp: max_rows * n // total for tp, n in lag.items()}
    # Rounding down leaves up to len(lag) - 1 records; hand them to the furthest behind.
    left = max_rows - sum(share.values())
    for tp in sorted(lag, key=lambda tp: (-lag[tp], tp)):
        if left <= 0:
            break
        share[tp] += 1
        left -= 1
    for tp, n in share.items():
        end[tp] = start[tp] + n
    return end


def plan_ranges(start: Offsets, end: Offsets, min_partitions: int | None = None) -> list[OffsetRange]:
    """Input partitions for [start, end) of every partition with records; ranges split further when
    ``min_partitions`` asks for more tasks than partitions (Spark's minPartitions)."""
    ranges = [(tp, start[tp], end[tp]) for tp in sorted(end) if tp in start and end[tp] > start[tp]]
    total = sum(e - s for _, s, e in ranges)
    out = []
    for (topic, partition), s, e in ranges:
        parts = 1
        if min_partitions and min_partitions > len(ranges):
            parts = max(1, round((e - s) / total * min_partitions))
        step = (e - s) / parts
        bounds = [s + round(step * i) for i in range(parts)] + [e]
        out += [OffsetRange(topic, partition, a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]
    return out


def _names(tps: list[TP]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in tps)

