"""Fetch sessions (KIP-227) between followers and leaders: incremental follower fetches carry only the partitions
that changed, as Kafka's FetchSession.scala (leader side) and FetchSessionHandler (follower side).

A follower's first Fetch (``session_id`` 0, ``session_epoch`` 0) is a full one: the leader keeps its partitions
(fetch offset, log start, current leader epoch, max bytes) in a session and answers its id. The follower's next
Fetches name the session and the next epoch (1, 2, ...) and carry only the partitions whose fetch data changed
(new ones included), listing those it stops fetching in ``forgotten_topics_data``; the leader reads every
partition of the session and answers only those with something new: records, an error, or a changed high
watermark, last stable offset or log start. An unknown session is answered FETCH_SESSION_ID_NOT_FOUND, a wrong
epoch INVALID_FETCH_SESSION_EPOCH, and the follower starts a new session with a full Fetch; so does one whose
connection dropped. ``session_epoch`` -1 with a session id closes it (a sessionless full Fetch).

Sessions are kept for followers only (one per follower broker: its new session replaces its old one, so the
cache stays within the cluster's size; ``max.incremental.fetch.session.cache.slots`` bounds them, 0 turning
sessions off); consumers' fetches stay sessionless (session id 0 in every answer,
which KIP-227 lets a broker answer).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from headwater.kafka.errors import ErrorCode

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "FetchSessionCache", "FetchSessionHandler", "LeaderSession",
           "SessionPartition", "next_epoch"]

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1

Key = tuple[str, int]
# what a follower sends of a partition: (fetch offset, log start offset, current leader epoch, max bytes)
FetchData = tuple[int, int, int, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch`` (Kafka's: wraps to 1, never back to the initial 0)."""
    return 1 if epoch >= _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class SessionPartition:
    """A partition of a leader's session: what the follower last sent of it (the attribute names of a Fetch
    request's partition, so a read treats both alike) and what the last answer said."""

    partition: int
    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    answered_log_start: int = -1

    def changed(self, entry: dict[str, Any]) -> bool:
        """Whether the answer ``entry`` for the partition carries something new, remembering what it says."""
        new = (entry["high_watermark"], entry["last_stable_offset"], entry["log_start_offset"])
        old = (self.high_watermark, self.last_stable_offset, self.answered_log_start)
        self.high_watermark, self.last_stable_offset, self.answered_log_start = new
        return bool(entry["error_code"] or entry["records"] or new != old)


@dataclass(slots=True)
class _Topic:
    topic: str
    partitions: list[SessionPartition]


@dataclass
class LeaderSession:
    """One follower's session on its leader."""

    session_id: int
    replica_id: int
    epoch: int = 1  # the epoch the next incremental Fetch must carry
    partitions: dict[Key, SessionPartition] = field(default_factory=dict)

    def update(self, topics: Any, forgotten: Any) -> None:
        """Take a Fetch's partitions (added, or their fetch data changed) and forgotten partitions."""
        for t in topics:
            for p in t.partitions:
                self.partitions[(t.topic, p.partition)] = SessionPartition(
                    p.partition, p.fetch_offset, getattr(p, "log_start_offset", -1), p.current_leader_epoch,
                    p.partition_max_bytes)
        for t in forgotten or ():
            for index in t.partitions:
                self.partitions.pop((t.topic, index), None)

    def topics(self) -> list[_Topic]:
        """Every partition of the session, grouped by topic as a Fetch request's are."""
        by_topic: dict[str, list[SessionPartition]] = {}
        for (topic, _), p in self.partitions.items():
            by_topic.setdefault(topic, []).append(p)
        return [_Topic(t, ps) for t, ps in by_topic.items()]

    def changed_only(self, responses: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The answer's partitions with something new (every one is remembered)."""
        kept = []
        for topic in responses:
            partitions = [e for e in topic["partitions"]
                          if (p := self.partitions.get((topic["topic"], e["partition_index"]))) is None
                          or p.changed(e)]
            if partitions:
                kept.append({**topic, "partitions": partitions})
        return kept


class FetchSessionCache:
    """A leader's sessions, one per follower broker, at most ``slots`` (Kafka's
    ``max.incremental.fetch.session.cache.slots``; 0: no sessions, every follower Fetch a full one)."""

    def __init__(self, slots: int = 1000) -> None:
        self.slots = slots
        self._ids = itertools.count(1)
        self._by_id: dict[int, LeaderSession] = {}
        self._by_replica: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def create(self, replica_id: int, topics: Any) -> LeaderSession | None:
        """A new session for ``replica_id``'s full Fetch (its former session, if any, goes); None when every slot
        is taken (the Fetch is answered without a session)."""
        former = self._by_replica.pop(replica_id, None)
        if former is not None:
            self._by_id.pop(former, None)
        if len(self._by_id) >= self.slots:
            return None
        session = LeaderSession(next(self._ids), replica_id)
        session.update(topics, ())
        self._by_id[session.session_id] = session
        self._by_replica[replica_id] = session.session_id
        return session

    def remove(self, session_id: int) -> None:
        session = self._by_id.pop(session_id, None)
        if session is not None and self._by_replica.get(session.replica_id) == session_id:
            del self._by_replica[session.replica_id]

    def incremental(self, session_id: int, epoch: int, replica_id: int) -> LeaderSession | ErrorCode:
        """The session an incremental Fetch names, or the error to answer it with."""
        session = self._by_id.get(session_id)
        if session is None or session.replica_id != replica_id:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if epoch != session.epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        return session


class FetchSessionHandler:
    """A follower's side of its session with one leader (Kafka's FetchSessionHandler)."""

    def __init__(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._sent: dict[Key, FetchData] = {}  # the session's partitions as the leader has them
        self._next: dict[Key, FetchData] = {}

    def build(self, wanted: dict[Key, FetchData]) -> tuple[dict[Key, FetchData], list[Key]]:
        """The partitions to send and those to forget, for fetching ``wanted``: all of them in a full Fetch
        (no session yet), else those whose fetch data changed, and the session's partitions not wanted."""
        self._next = dict(wanted)
        if self.session_id == 0:
            return dict(wanted), []
        send = {k: d for k, d in wanted.items() if self._sent.get(k) != d}
        return send, [k for k in self._sent if k not in wanted]

    def answered(self, error_code: int, session_id: int) -> bool:
        """The leader's answer to the Fetch just built; False when the session is gone (the answer carries no
        partitions, and the next Fetch is a full one)."""
        if error_code in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            self.reset()
            return False
        if self.session_id == 0:
            self.session_id = session_id  # 0: the leader keeps no session, every Fetch stays a full one
            self.epoch = INITIAL_EPOCH if session_id == 0 else next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = next_epoch(self.epoch)
        self._sent = self._next
        return True

    def reset(self) -> None:
        """No session (a new connection, an error): the next Fetch is a full one."""
        self.session_id, self.epoch, self._sent = 0, INITIAL_EPOCH, {}
