"""ACLs and quotas cost nothing to a client they do not apply to: its Produce and Fetch requests make no
authorization decision and no quota lookup or accounting, and stay pipelined (a Produce behind a waiting
Fetch on the same connection is appended at once and wakes it). For a client they apply to, the checks
run and its Produce/Fetch are handled one at a time, as Kafka does. The broker runs in this process
(``EmbeddedBroker``, real clients over TCP) so that the authorizer's and the quotas' calls can be counted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceResponse
from support.rawkafka import Conn, end_offset, fetch_req, frame, produce_req
from test_quotas import alter

from headwater.broker.access.acls import Authorizer
from headwater.broker.access.quotas import QuotaStore, Throttler
from headwater.kafka.records import Record, build_batch, decode_batch_records, iter_batches
from headwater.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(120)

METERED, FREE = "metered", "free"  # client ids: the first gets byte-rate quotas
LONG_POLL_MS = 30_000  # a fetch's wait when nothing wakes it


Call = tuple[str, str | None, tuple[Any, ...]]  # (method, the throttler's quota key, arguments)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every authorization decision, quota lookup and quota record the broker makes from now on."""
    seen: list[Call] = []
    for cls, name in ((Authorizer, "authorize"), (QuotaStore, "resolve"), (Throttler, "record")):
        original = getattr(cls, name)

        def counting(self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            seen.append((_name, getattr(self, "key", None), args))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, counting)
    return seen


def port_of(broker: EmbeddedBroker) -> int:
    return int(broker.bootstrap.rsplit(":", 1)[1])


def batch(value: bytes) -> bytes:
    return build_batch([Record(offset=0, timestamp=int(time.time() * 1000), key=None, value=value)])


def values_in(fetched: Any) -> list[bytes | None]:
    data = bytes(fetched.responses[0].partitions[0].records or b"")
    return [r.value for pos, _ in iter_batches(data) for r in decode_batch_records(data, pos)[1]]


def produce_behind_waiting_fetch(port: int, client_id: str, topic: str, wait_ms: int) -> tuple[Any, Any, float]:
    """A Fetch at the partition's end (waiting up to ``wait_ms`` for a record) and a Produce of one record,
    sent together on one connection; both answers, and the seconds until the fetch's answer came."""
    start = end_offset(port, topic)
    fetch, produce = fetch_req(topic, start, max_wait_ms=wait_ms, min_bytes=1), produce_req(topic, batch(b"wake"))
    with Conn(port, timeout=LONG_POLL_MS / 1000 + 30, client_id=client_id) as conn:
        sent = time.monotonic()
        conn.send_raw(frame(fetch, 1, client_id) + frame(produce, 2, client_id))
        (fetch_cid, fetched), took = conn.recv(FetchResponse, fetch.API_VERSION), time.monotonic() - sent
        produce_cid, produced = conn.recv(ProduceResponse, produce.API_VERSION)
    assert (fetch_cid, produce_cid) == (1, 2)
    assert produced.responses[0].partition_responses[0].error_code == 0
    return fetched, produced, took


@pytest.mark.parametrize("settings, checked", [
    ({}, False),
    ({"authorizer.enabled": "true", "super.users": "User:ANONYMOUS"}, False),
    ({"authorizer.enabled": "true", "allow.everyone.if.no.acl.found": "true"}, True),
], ids=["authorizer-off", "super-user", "acls-apply"])
def test_acl_decisions_only_for_a_principal_the_acls_apply_to(tmp_path: Path, calls: list[Call],
                                                             settings: dict[str, str], checked: bool) -> None:
    with EmbeddedBroker(tmp_path / "data", settings) as broker:
        topic = broker.create_topic()
        broker.produce(topic, [b"v%d" % i for i in range(20)])
        assert [r.value for r in broker.consume(topic)] == [b"v%d" % i for i in range(20)]
        decisions = [args for name, _, args in calls if name == "authorize"]
        if checked:  # every Produce's WRITE and every Fetch's READ on the topic was decided
            assert {(op.name, name) for _, _, op, _, name in decisions} >= {("WRITE", topic), ("READ", topic)}
        else:
            assert decisions == []
        assert [c for c in calls if c[0] != "authorize"] == []  # and no quota work: none is configured


def test_quota_work_only_for_a_client_with_a_quota(tmp_path: Path, calls: list[Call]) -> None:
    with EmbeddedBroker(tmp_path / "data") as broker:
        port = port_of(broker)
        topic = broker.create_topic()
        rates = {"producer_byte_rate": 10.0**7, "consumer_byte_rate": 10.0**7}  # far above what is sent
        assert alter(port, [([("client-id", METERED)], rates)]) == [(0, None)]
        for client_id in (FREE, METERED):
            for i in range(5):
                with Conn(port, client_id=client_id) as conn:
                    assert conn.produce(topic, batch(b"%s-%d" % (client_id.encode(), i))).error_code == 0
                    fetched = conn.call(fetch_req(topic, 0, max_wait_ms=100, min_bytes=1), FetchResponse)
                    assert len(values_in(fetched)) >= 1
        recorded = [(key, args[1]) for name, key, args in calls if name == "record"]
        assert recorded.count(("producer_byte_rate", METERED)) == 5
        assert recorded.count(("consumer_byte_rate", METERED)) == 5
        assert [r for r in recorded if r[1] != METERED] == []
        # the free client's quota is looked up once per key, not per request
        lookups = [(args[0], args[2]) for name, _, args in calls if name == "resolve"]
        assert sorted(lookup for lookup in lookups if lookup[1] == FREE) == [("consumer_byte_rate", FREE),
                                                                            ("producer_byte_rate", FREE)]


def test_a_produce_behind_a_waiting_fetch_wakes_it_unless_a_quota_applies(tmp_path: Path) -> None:
    with EmbeddedBroker(tmp_path / "data") as broker:
        port = port_of(broker)
        topic = broker.create_topic()
        fetched, _, took = produce_behind_waiting_fetch(port, FREE, topic, LONG_POLL_MS)
        # Read ahead: the produce was appended while the fetch waited, and woke it long before its wait ran out
        assert values_in(fetched) == [b"wake"]
        assert took < LONG_POLL_MS / 1000 / 2
        assert alter(port, [([("client-id", METERED)], {"consumer_byte_rate": 10.0**7})]) == [(0, None)]
        fetched, _, took = produce_behind_waiting_fetch(port, METERED, topic, 300)
        # A quota'd client's fetch is handled before its next request is read: it waits out its 300 ms empty
        assert values_in(fetched) == [] and took >= 0.25
