"""Headwater's ``/admin/topics`` and ``/admin/groups`` endpoints on a real ``headwater up``: offsets,
newest records (text, base64, headers, cut values), members and lag, 404s that create nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.structs import OffsetAndMetadata
from support.connectproc import ConnectProcess, create_topic, module_connect, sink_config, unique, wait_for

pytestmark = pytest.mark.timeout(180)

connect = module_connect("admin-api")


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def send(bootstrap: str, topic: str,
         records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes]]]]) -> None:
    """(partition, key, value, headers) records, in order, each acknowledged."""

    async def go() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, key=k, partition=p, headers=h or None)
                       for p, k, v, h in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    _run(go())


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for ``group`` as a consumer of it that then leaves."""

    async def go() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(t, p) for t, p in offsets]
            consumer.assign(tps)
            await consumer.commit({TopicPartition(t, p): OffsetAndMetadata(o, "") for (t, p), o in offsets.items()})
        finally:
            await consumer.stop()

    _run(go())


def topic_names(connect: ConnectProcess) -> set[str]:
    return {t["topic"] for t in connect.ok("GET", "/admin/topics", expect=200)}


def test_topics_list_offsets_and_flags_internal_topics(connect: ConnectProcess) -> None:
    topic = unique("admin-list")
    create_topic(connect.bootstrap, topic, 3)
    send(connect.bootstrap, topic, [(0, None, b"a", [])] * 4 + [(2, None, b"b", [])] * 3)
    listed = {t["topic"]: t for t in connect.ok("GET", "/admin/topics", expect=200)}
    assert listed[topic] == {"topic": topic, "internal": False, "partitions": 3, "start_offset": 0, "end_offset": 7,
                             "records": 7}
    # Kafka's own topic and the workers' config, offset and status topics are internal
    assert listed["__consumer_offsets"]["internal"] is True
    assert sum(1 for t in listed.values() if t["internal"] and t["topic"].startswith("connect-")) == 3


def test_topic_partitions_with_start_and_end_offsets(connect: ConnectProcess) -> None:
    topic = unique("admin-topic")
    create_topic(connect.bootstrap, topic, 3)
    send(connect.bootstrap, topic, [(0, None, b"x", [])] * 5 + [(1, None, b"y", [])] * 2)
    body = connect.ok("GET", f"/admin/topics/{topic}", expect=200)
    assert body["topic"] == topic and body["internal"] is False and body["configs"] == {}
    assert [(p["partition"], p["start_offset"], p["end_offset"], p["records"]) for p in body["partitions"]] == \
        [(0, 0, 5, 5), (1, 0, 2, 2), (2, 0, 0, 0)]
    assert all(p["leader"] >= 0 and p["replicas"] == p["isr"] and p["replicas"] for p in body["partitions"])


def test_topic_config_overrides_are_shown(connect: ConnectProcess) -> None:
    topic = unique("admin-compacted")
    _run(_create_compacted(connect.bootstrap, topic))
    assert connect.ok("GET", f"/admin/topics/{topic}", expect=200)["configs"] == {"cleanup.policy": "compact"}


async def _create_compacted(bootstrap: str, topic: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        await admin.close()


def test_newest_records_newest_first_with_text_base64_and_headers(connect: ConnectProcess) -> None:
    topic = unique("admin-records")
    create_topic(connect.bootstrap, topic, 2)
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes]]]] = [
        (0, f"k{i}".encode(), f"value {i} é".encode(), [("source", b"test"), ("n", bytes([i]))]) for i in range(30)]
    send(connect.bootstrap, topic, records)
    send(connect.bootstrap, topic, [(1, None, b"\xff\xfe\x00binary", []), (1, b"tomb", None, [])])

    body = connect.ok("GET", f"/admin/topics/{topic}/records", expect=200, limit=4)
    assert body["topic"] == topic
    got = body["records"]
    assert [(r["partition"], r["offset"]) for r in got] == [(1, 1), (1, 0), (0, 29), (0, 28)]
    tomb, binary, last = got[0], got[1], got[2]
    assert tomb["key"] == "tomb" and tomb["value"] is None
    assert binary["key"] is None and binary["value"] == {"base64": "//4AYmluYXJ5"}
    assert last["key"] == "k29" and last["value"] == "value 29 é" and last["truncated"] is False
    assert last["headers"] == [{"key": "source", "value": "test"}, {"key": "n", "value": "\x1d"}]
    assert last["timestamp_type"] == "CreateTime" and last["timestamp"] > 0

    default = connect.ok("GET", f"/admin/topics/{topic}/records", expect=200)["records"]
    assert len(default) == 20  # the default limit, across both partitions
    everything = connect.ok("GET", f"/admin/topics/{topic}/records", expect=200, limit=500)["records"]
    assert len(everything) == 32
    assert sorted(r["offset"] for r in everything if r["partition"] == 0) == list(range(30))


def test_long_values_are_cut_and_flagged(connect: ConnectProcess) -> None:
    topic = unique("admin-long")
    send(connect.bootstrap, topic, [(0, None, "ab€".encode() * 3000, [])])  # 15000 bytes of text
    (record,) = connect.ok("GET", f"/admin/topics/{topic}/records", expect=200, limit=1)["records"]
    assert record["truncated"] is True
    assert isinstance(record["value"], str) and 4090 <= len(record["value"].encode()) <= 4096  # no split character


def test_empty_topic_has_no_records(connect: ConnectProcess) -> None:
    topic = unique("admin-empty")
    create_topic(connect.bootstrap, topic, 2)
    assert connect.ok("GET", f"/admin/topics/{topic}/records", expect=200) == {"topic": topic, "records": []}


def test_unknown_topics_and_groups_are_404_and_nothing_is_created(connect: ConnectProcess) -> None:
    missing = unique("admin-missing")
    for path in (f"/admin/topics/{missing}", f"/admin/topics/{missing}/records", f"/admin/groups/{missing}"):
        resp = connect.get(path)
        assert resp.status == 404, resp
        assert resp.json["error_code"] == 404 and missing in resp.json["message"]
    assert missing not in topic_names(connect)  # a Metadata request naming it would have created it
    braces = connect.get(f"/admin/groups/%7B{missing}%7D")  # a group name may hold braces: it is looked up
    assert braces.status == 404 and f"{{{missing}}}" in braces.json["message"]
    assert missing not in {g["group"] for g in connect.ok("GET", "/admin/groups", expect=200)}


@pytest.mark.parametrize("limit", ["0", "501", "-3", "ten", "1.5", ""])
def test_a_bad_limit_is_400(connect: ConnectProcess, limit: str) -> None:
    resp = connect.get("/admin/topics/whatever/records", limit=limit)
    assert resp.status == 400, resp
    assert "limit" in resp.json["message"]


def test_group_lag_per_partition_with_and_without_members(connect: ConnectProcess) -> None:
    topic = unique("admin-lag")
    group = unique("admin-group")
    create_topic(connect.bootstrap, topic, 2)
    send(connect.bootstrap, topic, [(0, None, b"r", [])] * 10 + [(1, None, b"r", [])] * 6)
    commit(connect.bootstrap, group, {(topic, 0): 4, (topic, 1): 6})

    body = connect.ok("GET", f"/admin/groups/{group}", expect=200)
    assert body["state"] == "Empty" and body["members"] == []
    assert [(o["topic"], o["partition"], o["committed_offset"], o["end_offset"], o["lag"], o["member_id"])
            for o in body["offsets"]] == [(topic, 0, 4, 10, 6, None), (topic, 1, 6, 6, 0, None)]
    assert body["lag"] == 6
    listed = {g["group"]: g for g in connect.ok("GET", "/admin/groups", expect=200)}
    # a group only committed to, never joined, has no protocol type (as in Kafka)
    assert listed[group] == {"group": group, "state": "Empty", "protocol_type": "", "members": 0}

    async def with_member() -> dict:
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=connect.bootstrap, group_id=group, client_id="lag-probe",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while loop.time() < deadline:
                described = await asyncio.to_thread(connect.ok, "GET", f"/admin/groups/{group}", expect=200)
                if described["state"] == "Stable" and described["members"]:
                    return described
                await asyncio.sleep(0.2)
            raise AssertionError(f"the group never became Stable with a member: {described}")
        finally:
            await consumer.stop()

    live = _run(with_member())
    (member,) = live["members"]
    assert member["client_id"] == "lag-probe" and member["host"]
    assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(topic, 0), (topic, 1)]
    assert {o["member_id"] for o in live["offsets"]} == {member["member_id"]}
    assert live["lag"] == 6


def test_a_sink_connectors_group_catches_up(connect: ConnectProcess, tmp_path: Path) -> None:
    topic = unique("admin-sink-topic")
    name = unique("admin-sink")
    send(connect.bootstrap, topic, [(0, None, f"line {i}".encode(), []) for i in range(25)])
    connect.create(name, sink_config(tmp_path / "out.txt", topic))
    connect.wait_state(name, "RUNNING", tasks=1)

    def caught_up() -> dict | None:
        resp = connect.get(f"/admin/groups/connect-{name}")
        if resp.status != 200:
            return None
        body = resp.json
        offsets = body["offsets"]
        return body if offsets and offsets[0]["committed_offset"] == 25 and body["members"] else None

    body = wait_for(caught_up, 30, 0.2, "the sink's group to commit offset 25", connect.log_text)
    assert body["protocol_type"] == "consumer" and body["lag"] == 0
    assert body["offsets"][0] == {"topic": topic, "partition": 0, "committed_offset": 25, "end_offset": 25, "lag": 0,
                                  "member_id": body["members"][0]["member_id"]}


def test_the_admin_routes_are_in_the_openapi_document(connect: ConnectProcess) -> None:
    paths = connect.ok("GET", "/openapi.json", expect=200)["paths"]
    for path in ("/admin/topics", "/admin/topics/{topic}", "/admin/topics/{topic}/records", "/admin/groups",
                 "/admin/groups/{group}"):
        assert "get" in paths[path], path
        assert "404" in paths[path]["get"]["responses"] or "{" not in path
    limit = paths["/admin/topics/{topic}/records"]["get"]["parameters"][1]
    assert limit["name"] == "limit" and limit["schema"] == {"type": "integer", "minimum": 1, "maximum": 500}


def test_the_console_is_served(connect: ConnectProcess) -> None:
    resp = connect.get("/ui")  # urllib follows the redirect to /ui/
    assert resp.status == 200 and b"<title>Headwater console</title>" in resp.body
    script = connect.get("/ui/js/app.js")
    assert script.status == 200 and script.headers["content-type"].startswith("text/javascript")
    assert "default-src 'self'" in script.headers["content-security-policy"]
    for path in ("/ui/nope.js", "/ui/../connect/rest/app.py", "/ui/%2e%2e/__init__.py"):
        assert connect.get(path).status == 404, path
