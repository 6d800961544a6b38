"""Client quota arithmetic: the debt a client runs up and its burst credit, the throttle time, the
eight-level precedence of user/client-id quotas, shared sensors, persistence; and a simulated client that
waits out each throttle lands within 1% of its quota."""

from __future__ import annotations

from pathlib import Path

from headwater.broker.access.quotas import Debt, QuotaStore, Throttler, entity


def test_debt_allows_one_burst_then_the_quota() -> None:
    debt = Debt(burst_ms=10_000)
    assert debt.record(10_000, 1000, 0) == 0  # 10 s of credit at 1000 B/s: 10,000 bytes at once
    assert debt.record(2000, 1000, 0) == 2000  # then 2000 more bytes are 2 s early
    assert debt.record(500, 1000, 3000) == 0  # waited out (and 0.5 s to spare)
    debt.take_back(500, 1000)
    assert debt.due_ms == 2000


def test_throttle_times(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    store.alter([(entity([("client-id", "c")]), {"producer_byte_rate": 1000.0})])
    throttler = Throttler(store, "producer_byte_rate", 11, 1000)  # 10 windows of credit
    assert throttler.record("ANONYMOUS", "c", 5000, 0) == 0
    assert throttler.record("ANONYMOUS", "c", 20000, 0) == 15_000  # 25,000 bytes: 15 s beyond the credit
    assert throttler.record("ANONYMOUS", "other", 10**9, 0) == 0  # no quota for other clients
    assert throttler.record("ANONYMOUS", "c", 1000, 16_000, undo_if_throttled=True) == 0
    assert throttler.record("ANONYMOUS", "c", 5000, 16_000, undo_if_throttled=True) == 5000
    assert throttler.record("ANONYMOUS", "c", 2000, 16_000) == 2000  # the undone 5000 bytes did not count


def test_precedence_of_user_and_client_id_quotas(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    levels: list[list[tuple[str, str | None]]] = [
              [("user", "u"), ("client-id", "c")], [("user", "u"), ("client-id", None)], [("user", "u")],
              [("user", None), ("client-id", "c")], [("user", None), ("client-id", None)], [("user", None)],
              [("client-id", "c")], [("client-id", None)]]
    store.alter([(entity(parts), {"consumer_byte_rate": float(i + 1)}) for i, parts in enumerate(levels)])
    for i, parts in enumerate(levels):
        assert store.resolve("consumer_byte_rate", "u", "c") == (entity(parts), float(i + 1))
        store.alter([(entity(parts), {"consumer_byte_rate": None})])
    assert store.resolve("consumer_byte_rate", "u", "c") is None
    assert store.quotas == {}


def test_clients_of_one_entity_share_the_sensor_and_quotas_persist(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    store.alter([(entity([("client-id", None)]), {"producer_byte_rate": 1000.0})])
    throttler = Throttler(store, "producer_byte_rate", 11, 1000)
    assert throttler.record("ANONYMOUS", "a", 6000, 0) == 0
    assert throttler.record("ANONYMOUS", "b", 6000, 0) > 0  # the default entity's one sensor: 12,000 bytes
    reloaded = QuotaStore(tmp_path)
    assert reloaded.quotas == {entity([("client-id", None)]): {"producer_byte_rate": 1000.0}}
    store.alter([(entity([("client-id", None)]), {"producer_byte_rate": 10**9})])
    assert throttler.record("ANONYMOUS", "a", 6000, 0) == 0  # a change is seen at once


def test_a_throttler_is_active_only_while_some_entity_has_its_key(tmp_path: Path) -> None:
    """A quota key no entity has is not looked up at all on the request path (Throttler.active)."""
    store = QuotaStore(tmp_path)
    produce = Throttler(store, "producer_byte_rate", 11, 1000)
    fetch = Throttler(store, "consumer_byte_rate", 11, 1000)
    assert not produce.active and not fetch.active
    store.alter([(entity([("user", None)]), {"consumer_byte_rate": 1000.0, "request_percentage": 50.0})])
    assert fetch.active and not produce.active
    assert fetch.applies("alice", "c")  # the default user's quota: every user's
    assert QuotaStore(tmp_path).keys == {"consumer_byte_rate", "request_percentage"}  # as reloaded
    store.alter([(entity([("user", None)]), {"consumer_byte_rate": None})])
    assert not fetch.active and store.keys == {"request_percentage"}


def test_a_fetch_is_either_throttled_or_charged_never_free(tmp_path: Path) -> None:
    """A fetch over its quota by less than half a millisecond: its bytes were taken back, so it must be
    answered as throttled (1 ms), not as 0 ms with its records (which then cost nothing)."""
    store = QuotaStore(tmp_path)
    store.alter([(entity([("client-id", "c")]), {"consumer_byte_rate": 1_000_000.0})])
    throttler = Throttler(store, "consumer_byte_rate", 2, 1000)  # 1 s of credit
    assert throttler.record("ANONYMOUS", "c", 1_000_000, 0, undo_if_throttled=True) == 0  # the credit
    assert throttler.record("ANONYMOUS", "c", 1_000_000, 999.7, undo_if_throttled=True) == 1  # 0.3 ms early
    assert throttler.record("ANONYMOUS", "c", 1_000_000, 1000, undo_if_throttled=True) == 0  # on time: charged
    assert throttler.record("ANONYMOUS", "c", 1_000_000, 1000, undo_if_throttled=True) == 1000


def test_a_client_that_waits_out_its_throttles_gets_its_quota(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    store.alter([(entity([("client-id", "fast")]), {"producer_byte_rate": 1_000_000.0})])
    throttler = Throttler(store, "producer_byte_rate", 11, 1000)
    now, sent = 0.0, 0
    at: dict[int, tuple[float, int]] = {}  # the first (time, bytes sent) of each 10 s window
    while now < 60_000:  # 64 KiB requests as fast as the client may: every 5 ms unless muted
        sent += 65536
        throttle = throttler.record("ANONYMOUS", "fast", 65536, now)
        now += 5 + throttle
        at.setdefault(int(now // 10_000), (now, sent))
    # the credit goes through at once (as Kafka's padded window lets it); from then on the quota holds
    (t0, s0), (t1, s1) = at[2], at[max(at)]
    assert abs((s1 - s0) / ((t1 - t0) / 1000) - 1_000_000) / 1_000_000 < 0.01, (s1 - s0) / ((t1 - t0) / 1000)
