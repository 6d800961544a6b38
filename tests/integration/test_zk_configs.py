"""Topic and broker configs cluster-wide through ZooKeeper (docs/CLUSTER.md "Configs"): the entity config znodes
and change notifications of broker/cluster/config_changes.py against a real ZooKeeper, as Kafka's
AdminZkClient and DynamicConfigManager have them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from support import zkserver

from headwater.broker.cluster.config_changes import (
    ConfigChanges,
    desanitize,
    read_entity_config,
    sanitize,
    write_entity_config,
)
from headwater.testing import unique

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))


@pytest.fixture
def zk(zookeeper: zkserver.ZooKeeperServer) -> Iterator[KazooClient]:
    """A session under a chroot of this test's own."""
    root = KazooClient(hosts=zookeeper.connect)
    root.start(timeout=15)
    chroot = "/" + unique("cfg")
    root.ensure_path(chroot)
    root.stop()
    root.close()
    client = KazooClient(hosts=zookeeper.connect + chroot)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def test_write_entity_config_is_kafkas_znode_and_notification(zk: KazooClient) -> None:
    write_entity_config(zk, "topics", "orders", {"retention.ms": "1000"})
    write_entity_config(zk, "brokers", "<default>", {"log.retention.ms": "5000"})
    assert json.loads(zk.get("/config/topics/orders")[0]) == {"version": 1, "config": {"retention.ms": "1000"}}
    changes = sorted(zk.get_children("/config/changes"))
    assert changes == ["config_change_0000000000", "config_change_0000000001"]
    assert [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in changes] == [
        {"version": 2, "entity_path": "topics/orders"}, {"version": 2, "entity_path": "brokers/<default>"}]
    assert read_entity_config(zk, "brokers", "<default>") == ({"log.retention.ms": "5000"}, 0)
    assert read_entity_config(zk, "brokers", "7") == ({}, -1)


def test_a_conditional_write_loses_no_change(zk: KazooClient) -> None:
    config, version = read_entity_config(zk, "topics", "t")
    assert version == -1
    write_entity_config(zk, "topics", "t", {"a": "1"}, expected_version=version)
    with pytest.raises(BadVersionError):  # another writer came first: nothing written, no notification
        write_entity_config(zk, "topics", "t", {"b": "2"}, expected_version=version)
    _, version = read_entity_config(zk, "topics", "t")
    write_entity_config(zk, "topics", "t", {"a": "1", "b": "2"}, expected_version=version)
    with pytest.raises(BadVersionError):
        write_entity_config(zk, "topics", "t", {}, expected_version=version)
    assert read_entity_config(zk, "topics", "t") == ({"a": "1", "b": "2"}, 1)
    assert len(zk.get_children("/config/changes")) == 2


def test_sanitized_names_are_kafkas() -> None:
    assert sanitize("user 1*@x.y-z_~") == "user%201%2A%40x.y-z_%7E"
    assert sanitize("é") == "%C3%A9"
    assert desanitize(sanitize("user 1*@x.y-z_~é")) == "user 1*@x.y-z_~é"


def test_config_changes_hand_over_existing_then_every_change_in_order(zk: KazooClient) -> None:
    write_entity_config(zk, "topics", "before", {"retention.ms": "1"})
    write_entity_config(zk, "users", "alice", {"consumer_byte_rate": "10"})
    write_entity_config(zk, "users", "alice/clients/app", {"producer_byte_rate": "20"})
    zk.create("/config/changes/config_change_", b"not json", sequence=True)  # a bad one is skipped, counted
    # a version 1 notification (Kafka before 0.10.1), read as Kafka still reads it
    zk.create("/config/changes/config_change_",
              json.dumps({"version": 1, "entity_type": "topics", "entity_name": "before"}).encode(), sequence=True)

    async def scenario() -> tuple[list[tuple[str, str, dict[str, str]]], int]:
        seen: list[tuple[str, str, dict[str, str]]] = []
        changes = ConfigChanges(zk)
        changes.handle("topics", lambda name, config: seen.append(("topics", name, config)))
        await changes.start()
        assert ("topics", "before", {"retention.ms": "1"}) in seen  # the existing one, at start
        await _until(lambda: changes.processed >= 4)
        seen.clear()
        # users added after the start: the existing ones (with <user>/clients/<client>) handed over at once
        changes.handle("users", lambda name, config: seen.append(("users", name, config)))
        await _until(lambda: len(seen) == 2)
        assert seen == [("users", "alice", {"consumer_byte_rate": "10"}),
                        ("users", "alice/clients/app", {"producer_byte_rate": "20"})]
        seen.clear()
        for i in range(3):
            await asyncio.to_thread(write_entity_config, zk, "topics", "t", {"retention.ms": str(i)})
        await asyncio.to_thread(write_entity_config, zk, "clients", "nobody-handles-these", {})
        await _until(lambda: changes.processed >= 8)
        # each notification reads the entity's config then, so a late reader may see the last value more than once
        assert [s[1] for s in seen] == ["t", "t", "t"] and seen[-1][2] == {"retention.ms": "2"}
        await changes.stop()
        return seen, changes.failures

    _, failures = asyncio.run(scenario())
    assert failures == 1  # the notification that was not JSON


def test_expired_notifications_are_purged(zk: KazooClient) -> None:
    for i in range(3):
        write_entity_config(zk, "topics", "t", {"retention.ms": str(i)})

    async def scenario() -> None:
        changes = ConfigChanges(zk, expiration_ms=0)
        await changes.start()
        await _until(lambda: changes.processed >= 2)
        await asyncio.to_thread(write_entity_config, zk, "topics", "t", {})
        await _until(lambda: changes.processed >= 3)
        await changes.stop()

    asyncio.run(scenario())
    # each pass deletes what has expired (here everything it saw), the newest after the next change
    assert len(zk.get_children("/config/changes")) <= 1


async def _until(done: object, timeout: float = 10) -> None:
    assert callable(done)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not done():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)
