"""Fetch sessions (KIP-227) between a follower and its leader (replication/fetch_sessions.py): the follower's
handler sends everything first, then only what changed, forgetting what it stops fetching, and starts over when
the leader lost the session; the leader's cache keeps one session per follower, checks ids and epochs, and
answers an incremental Fetch only the partitions with something new."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer import FetchRequest

from headwater.broker.replication.fetch_sessions import (
    FetchSessionCache,
    FetchSessionHandler,
    LeaderSession,
    next_epoch,
)
from headwater.kafka.errors import ErrorCode

Topic = FetchRequest.FetchTopic


def _topics(parts: dict[tuple[str, int], tuple[int, int, int, int]]) -> list[Any]:
    by_topic: dict[str, list[Any]] = {}
    for (t, i), (offset, start, epoch, max_bytes) in parts.items():
        by_topic.setdefault(t, []).append(Topic.FetchPartition(partition=i, current_leader_epoch=epoch,
                                                               fetch_offset=offset, log_start_offset=start,
                                                               partition_max_bytes=max_bytes))
    return [Topic(topic=t, partitions=ps) for t, ps in by_topic.items()]


def _create(cache: FetchSessionCache, replica_id: int, topics: list[Any]) -> LeaderSession:
    session = cache.create(replica_id, topics)
    assert session is not None
    return session


def _entry(index: int, hw: int, records: bytes = b"", error: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "error_code": error, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": 0, "records": records}


def test_the_follower_sends_all_then_only_what_changed() -> None:
    handler = FetchSessionHandler()
    wanted = {("a", 0): (10, 0, 1, 100), ("a", 1): (20, 0, 1, 100), ("b", 0): (5, 0, 3, 100)}
    send, forget = handler.build(wanted)
    assert (handler.session_id, handler.epoch) == (0, 0) and send == wanted and forget == []
    assert handler.answered(0, 7)
    assert (handler.session_id, handler.epoch) == (7, 1)
    send, forget = handler.build(wanted)  # nothing changed: an empty incremental Fetch (a long poll on all)
    assert send == {} and forget == []
    assert handler.answered(0, 7) and handler.epoch == 2
    moved = {**wanted, ("a", 1): (25, 0, 1, 100), ("c", 0): (0, 0, 1, 100)}
    del moved[("b", 0)]
    send, forget = handler.build(moved)
    assert send == {("a", 1): (25, 0, 1, 100), ("c", 0): (0, 0, 1, 100)} and forget == [("b", 0)]
    assert not handler.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)  # the leader lost it: start over
    assert (handler.session_id, handler.epoch) == (0, 0)
    assert handler.build(moved) == (moved, [])
    assert next_epoch(2**31 - 1) == 1


def test_the_leader_answers_an_incremental_fetch_only_what_changed() -> None:
    cache = FetchSessionCache()
    parts = {("a", 0): (10, 0, 1, 100), ("a", 1): (20, 0, 1, 100)}
    session = _create(cache, 2, _topics(parts))
    full = [{"topic": "a", "partitions": [_entry(0, 10), _entry(1, 20)]}]
    assert session.changed_only(full) == full  # the first answer: everything is new
    assert cache.incremental(session.session_id, 1, 2) is session
    # the follower fetched partition 1 further; nothing new on 0, records on 1
    session.update(_topics({("a", 1): (25, 0, 1, 100)}), [])
    assert [(p.partition, p.fetch_offset) for t in session.topics() for p in t.partitions] == [(0, 10), (1, 25)]
    answer = [{"topic": "a", "partitions": [_entry(0, 10), _entry(1, 20, b"batch")]}]
    assert session.changed_only(answer) == [{"topic": "a", "partitions": [_entry(1, 20, b"batch")]}]
    answer = [{"topic": "a", "partitions": [_entry(0, 12), _entry(1, 20)]}]  # a high watermark moved
    assert session.changed_only(answer) == [{"topic": "a", "partitions": [_entry(0, 12)]}]
    answer = [{"topic": "a", "partitions": [_entry(0, 12), _entry(1, 20, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)]}]
    assert session.changed_only(answer)[0]["partitions"][0]["partition_index"] == 1  # errors always go
    forgotten = FetchRequest.ForgottenTopic(topic="a", partitions=[1])
    session.update([], [forgotten])
    assert list(session.partitions) == [("a", 0)]


def test_the_leader_checks_ids_and_epochs_and_keeps_one_session_a_follower() -> None:
    cache = FetchSessionCache()
    first = _create(cache, 2, _topics({("a", 0): (0, 0, 1, 100)}))
    assert cache.incremental(first.session_id + 100, 1, 2) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert cache.incremental(first.session_id, 5, 2) == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert cache.incremental(first.session_id, 1, 3) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND  # another's
    second = _create(cache, 2, _topics({("a", 0): (0, 0, 1, 100)}))  # the follower reconnected
    assert len(cache) == 1 and second.session_id != first.session_id
    assert cache.incremental(first.session_id, 1, 2) == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    cache.create(3, [])
    cache.remove(second.session_id)
    assert len(cache) == 1


def test_no_slot_no_session() -> None:
    """max.incremental.fetch.session.cache.slots bounds the sessions; 0 turns them off (full Fetches)."""
    assert FetchSessionCache(slots=0).create(2, []) is None
    cache = FetchSessionCache(slots=1)
    assert cache.create(2, []) is not None
    assert cache.create(3, []) is None  # every slot taken
    assert cache.create(2, []) is not None  # a follower's new session takes its former one's slot
    handler = FetchSessionHandler()
    handler.build({("a", 0): (0, 0, 1, 100)})
    assert handler.answered(0, 0) and (handler.session_id, handler.epoch) == (0, 0)  # answered without a session
