"""Kafka's client quota arithmetic: the sampled rate and its window, the throttle time, the eight-level
precedence of user/client-id quotas, shared sensors, persistence; and a simulated client that waits out
each throttle lands within a few percent of its quota."""

from __future__ import annotations

from pathlib import Path

from headwater.broker.quotas import QuotaStore, Rate, Throttler, entity


def test_rate_counts_at_least_samples_minus_one_windows() -> None:
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000  # 10 full windows assumed at the start
    assert rate.per_second(0) == 100
    for t in range(1, 30):
        rate.record(1000, t * 1000)
    # after 30 s only the last 11 samples count: 11,000 bytes over 10 s and a bit
    assert 1000 <= rate.per_second(29_500) <= 1100
    assert len(rate.totals) == 11


def test_throttle_time_is_kafkas_formula(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    store.alter([(entity([("client-id", "c")]), {"producer_byte_rate": 1000.0})])
    throttler = Throttler(store, "producer_byte_rate", 11, 1000)
    assert throttler.record("ANONYMOUS", "c", 5000, 0) == 0  # 500 B/s over the 10 s window
    # 25,000 bytes over 10 s = 2500 B/s: (2500 - 1000) / 1000 * 10,000 ms
    assert throttler.record("ANONYMOUS", "c", 20000, 0) == 15_000
    assert throttler.record("ANONYMOUS", "other", 10**9, 0) == 0  # no quota for other clients


def test_precedence_of_user_and_client_id_quotas(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    levels = [[("user", "u"), ("client-id", "c")], [("user", "u"), ("client-id", None)], [("user", "u")],
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


def test_a_client_that_waits_out_its_throttles_gets_its_quota(tmp_path: Path) -> None:
    store = QuotaStore(tmp_path)
    store.alter([(entity([("client-id", "fast")]), {"producer_byte_rate": 1_000_000.0})])
    throttler = Throttler(store, "producer_byte_rate", 11, 1000)
    now, sent, at = 0.0, 0, {}
    while now < 60_000:  # 64 KiB requests as fast as the client may: every 5 ms unless muted
        sent += 65536
        throttle = throttler.record("ANONYMOUS", "fast", 65536, now)
        now += 5 + throttle
        at.setdefault(int(now // 10_000), (now, sent))
    # the first window's worth goes through at once (as in Kafka); from then on the quota holds, a little
    # over it: Kafka's sampled rate forgets a whole sample at once, so a bursty client gains about 10%
    (t0, s0), (t1, s1) = at[2], at[max(at)]
    assert abs((s1 - s0) / ((t1 - t0) / 1000) - 1_000_000) / 1_000_000 < 0.10, (s1 - s0) / ((t1 - t0) / 1000)
