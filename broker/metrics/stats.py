"""Counters the request path bumps, read by the metrics collector (``prometheus.py``) at scrape time.

Kafka keeps these figures as Yammer meters and histograms (``BrokerTopicMetrics``,
``RequestMetrics``). Here a produce, a fetch or any request only adds to a few ints on objects
of ours: no metrics library is called per request, and the cost is the same whether metrics are
served or not. Per-topic counters live on the topic (``Topic.stats``), so they go when it is
deleted, as Kafka removes a deleted topic's meters; the all-topics ones and the per-API ones live
on the cluster (``Cluster.stats``). Everything runs on the event loop, so plain ints suffice.

In a ZooKeeper cluster the replication and controller code keep Kafka's counters of theirs the same way:
``ReplicationStats`` on the ReplicaManager (its ``IsrShrinksPerSec``, ``IsrExpandsPerSec``,
``FailedIsrUpdatesPerSec``), ``ControllerStats`` on the controller (Kafka's ``ControllerStats``: the broker-change
handling timed as ``LeaderElectionRateAndTimeMs``, ``UncleanLeaderElectionsPerSec``) and ``ZkSessionStats`` on the
membership (the ``SessionExpireListener`` meters of Kafka's ZooKeeper client).
"""

from __future__ import annotations

__all__ = ["RECENT_TIMES", "BrokerStats", "ControllerStats", "ReplicationStats", "RequestCounters", "Timings",
           "TopicCounters", "ZkSessionStats"]

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


class Timings:
    """Times of one kind of event (a Yammer timer's count, and the most recent times for its quantiles)."""

    __slots__ = ("count", "recent", "time_ms")

    def __init__(self) -> None:
        self.count = 0
        self.time_ms = 0.0
        self.recent = [0.0] * RECENT_TIMES

    def record_ms(self, ms: float) -> None:
        self.recent[self.count & _MASK] = ms
        self.count += 1
        self.time_ms += ms

    def recent_times(self) -> list[float]:
        """The last (up to RECENT_TIMES) times, in no particular order."""
        return self.recent[: self.count] if self.count < RECENT_TIMES else list(self.recent)


class RequestCounters(Timings):
    """One API's requests: how many per version, their total time, and the most recent times."""

    __slots__ = ("by_version",)

    def __init__(self) -> None:
        super().__init__()
        self.by_version: dict[int, int] = {}

    def record(self, version: int, ms: float) -> None:
        self.by_version[version] = self.by_version.get(version, 0) + 1
        self.record_ms(ms)


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


class ReplicationStats:
    """The ReplicaManager's meters: ISR changes this broker made as a leader, counted once written (as Kafka marks
    them when its AlterIsr succeeds; the controller taking a dead broker out of an ISR is not one of them), and the
    ISR writes that failed or lost to another write."""

    __slots__ = ("failed_isr_updates", "isr_expands", "isr_shrinks")

    def __init__(self) -> None:
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.failed_isr_updates = 0

    def isr_written(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        if set(after) < set(before):
            self.isr_shrinks += 1
        elif set(after) > set(before):
            self.isr_expands += 1


class ControllerStats:
    """Kafka's ``kafka.controller:type=ControllerStats``: how long the controller took over each change of the live
    brokers (Kafka's BrokerChange event, whose timer is named ``LeaderElectionRateAndTimeMs``), and the leaders it
    elected from outside the ISR."""

    __slots__ = ("leader_elections", "unclean_elections")

    def __init__(self) -> None:
        self.leader_elections = Timings()
        self.unclean_elections = 0


# kazoo's KeeperState (the client's state, as it tells its listeners) -> the SessionExpireListener meter it marks,
# as Kafka's ZooKeeperClient maps ZooKeeper's KeeperState (Disconnected, SyncConnected, AuthFailed,
# ConnectedReadOnly, Expired); kazoo has no SaslAuthenticated event
_SESSION_EVENTS = {"CONNECTING": "disconnects", "CONNECTED": "sync_connects", "AUTH_FAILED": "auth_failures",
                   "CONNECTED_RO": "readonly_connects", "EXPIRED_SESSION": "expires"}


class ZkSessionStats:
    """The meters of ``kafka.server:type=SessionExpireListener`` (``ZooKeeper<Event>PerSec``): the broker's
    ZooKeeper connection events, counted from kazoo's state changes."""

    __slots__ = ("auth_failures", "disconnects", "expires", "readonly_connects", "sync_connects")

    def __init__(self) -> None:
        self.disconnects = 0
        self.sync_connects = 0
        self.auth_failures = 0
        self.readonly_connects = 0
        self.expires = 0

    def observe(self, client_state: str) -> None:
        """kazoo's client went into ``client_state`` (a KeeperState: ``CONNECTED``, ``CONNECTING`` after a lost
        connection, ``EXPIRED_SESSION``, ...)."""
        attr = _SESSION_EVENTS.get(client_state)
        if attr is not None:
            setattr(self, attr, getattr(self, attr) + 1)
