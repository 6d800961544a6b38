"""Counters the request path bumps, read by the metrics collector (``prometheus.py``) at scrape time.

Kafka keeps these figures as Yammer meters and histograms (``BrokerTopicMetrics``,
``RequestMetrics``). Here a produce, a fetch or any request only adds to a few ints on objects
of ours: no metrics library is called per request, and the cost is the same whether metrics are
served or not. Per-topic counters live on the topic (``Topic.stats``), so they go when it is
deleted, as Kafka removes a deleted topic's meters; the all-topics ones and the per-API ones live
on the cluster (``Cluster.stats``). Everything runs on the event loop, so plain ints suffice.
"""

from __future__ import annotations

__all__ = ["RECENT_TIMES", "BrokerStats", "RequestCounters", "TopicCounters"]

# Request times kept per API for the latency quantiles (a ring; Kafka's histograms keep a
# reservoir of 1028 samples). A power of two, so the ring index is a mask.
RECENT_TIMES = 1024
_MASK = RECENT_TIMES - 1


class TopicCounters:
    """One topic's (or all topics') share of Kafka's ``BrokerTopicMetrics``."""

    __slots__ = ("bytes_in", "bytes_out", "failed_fetch", "failed_produce", "fetch_requests", "messages_in",
                 "produce_requests")

    def __init__(self) -> None:
        self.bytes_in = 0  # record-batch bytes appended by Produce
        self.messages_in = 0  # records appended (from each batch header's record count)
        self.bytes_out = 0  # record-batch bytes returned by Fetch
        self.produce_requests = 0  # partitions in Produce requests (Kafka counts per partition)
        self.failed_produce = 0  # of which answered with an error
        self.fetch_requests = 0  # partitions in Fetch answers
        self.failed_fetch = 0  # of which answered with an error


class RequestCounters:
    """One API's requests: how many per version, their total time, and the most recent times."""

    __slots__ = ("by_version", "count", "recent", "time_ms")

    def __init__(self) -> None:
        self.by_version: dict[int, int] = {}
        self.count = 0
        self.time_ms = 0.0
        self.recent = [0.0] * RECENT_TIMES

    def record(self, version: int, ms: float) -> None:
        self.by_version[version] = self.by_version.get(version, 0) + 1
        self.recent[self.count & _MASK] = ms
        self.count += 1
        self.time_ms += ms

    def recent_times(self) -> list[float]:
        """The last (up to RECENT_TIMES) request times, in no particular order."""
        return self.recent[: self.count] if self.count < RECENT_TIMES else list(self.recent)


class BrokerStats:
    """The broker-wide counters: all topics together, and each API by key."""

    def __init__(self) -> None:
        self.all_topics = TopicCounters()
        self.requests: dict[int, RequestCounters] = {}
        # SASL authentications by listener: [successful, failed] (Kafka's socket-server-metrics)
        self.authentications: dict[str, list[int]] = {}

    def authentication_done(self, listener: str, ok: bool) -> None:
        counts = self.authentications.setdefault(listener, [0, 0])
        counts[0 if ok else 1] += 1

    def request_done(self, api_key: int, version: int, seconds: float) -> None:
        """One request answered (or, for acks=0 Produce, handled) after ``seconds``."""
        counters = self.requests.get(api_key)
        if counters is None:
            counters = self.requests[api_key] = RequestCounters()
        counters.record(version, seconds * 1000)
