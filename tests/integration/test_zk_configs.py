"""Topic and broker configs cluster-wide through ZooKeeper (docs/CLUSTER.md "Configs on a cluster"): the entity
config znodes and change notifications of broker/cluster/config_changes.py against a real ZooKeeper, as Kafka's
AdminZkClient and DynamicConfigManager have them; then three real brokers (one cluster for the module): a
config altered through one broker is described by the others and honoured by the followers' logs and the
leader's produce checks, survives a broker's restart (one down while it changed too), and a broker default
set through one broker is every broker's."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from support import zkserver
from support.brokerproc import BrokerProcess
from support.rawkafka import describe_configs, incremental_alter_configs, produce
from support.zkcluster import agreed_topic, running_cluster

from headwater.broker.cluster import config_changes
from headwater.kafka.records import Record, build_batch
from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
TOPIC, BROKER = 2, 4  # resource types
UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, INVALID_CONFIG, INVALID_REQUEST = 3, 19, 40, 42
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3


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
    config_changes.write_entity_config(zk, "topics", "orders", {"retention.ms": "1000"})
    config_changes.write_entity_config(zk, "brokers", "<default>", {"log.retention.ms": "5000"})
    assert json.loads(zk.get("/config/topics/orders")[0]) == {"version": 1, "config": {"retention.ms": "1000"}}
    changes = sorted(zk.get_children("/config/changes"))
    assert changes == ["config_change_0000000000", "config_change_0000000001"]
    assert [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in changes] == [
        {"version": 2, "entity_path": "topics/orders"}, {"version": 2, "entity_path": "brokers/<default>"}]
    assert config_changes.read_entity_config(zk, "brokers", "<default>") == ({"log.retention.ms": "5000"}, 0)
    assert config_changes.read_entity_config(zk, "brokers", "7") == ({}, -1)


def test_a_conditional_write_loses_no_change(zk: KazooClient) -> None:
    config, version = config_changes.read_entity_config(zk, "topics", "t")
    assert version == -1
    config_changes.write_entity_config(zk, "topics", "t", {"a": "1"}, expected_version=version)
    with pytest.raises(BadVersionError):  # another writer came first: nothing written, no notification
        config_changes.write_entity_config(zk, "topics", "t", {"b": "2"}, expected_version=version)
    _, version = config_changes.read_entity_config(zk, "topics", "t")
    config_changes.write_entity_config(zk, "topics", "t", {"a": "1", "b": "2"}, expected_version=version)
    with pytest.raises(BadVersionError):
        config_changes.write_entity_config(zk, "topics", "t", {}, expected_version=version)
    assert config_changes.read_entity_config(zk, "topics", "t") == ({"a": "1", "b": "2"}, 1)
    assert len(zk.get_children("/config/changes")) == 2


def test_sanitized_names_are_kafkas() -> None:
    assert config_changes.sanitize("user 1*@x.y-z_~") == "user%201%2A%40x.y-z_%7E"
    assert config_changes.sanitize("é") == "%C3%A9"
    assert config_changes.desanitize(config_changes.sanitize("user 1*@x.y-z_~é")) == "user 1*@x.y-z_~é"


def test_config_changes_hand_over_existing_then_every_change_in_order(zk: KazooClient) -> None:
    config_changes.write_entity_config(zk, "topics", "before", {"retention.ms": "1"})
    config_changes.write_entity_config(zk, "users", "alice", {"consumer_byte_rate": "10"})
    config_changes.write_entity_config(zk, "users", "alice/clients/app", {"producer_byte_rate": "20"})
    zk.create("/config/changes/config_change_", b"not json", sequence=True)  # a bad one is skipped, counted
    # a version 1 notification (Kafka before 0.10.1), read as Kafka still reads it
    zk.create("/config/changes/config_change_",
              json.dumps({"version": 1, "entity_type": "topics", "entity_name": "before"}).encode(), sequence=True)

    async def scenario() -> tuple[list[tuple[str, str, dict[str, str]]], int]:
        seen: list[tuple[str, str, dict[str, str]]] = []
        changes = config_changes.ConfigChanges(zk)
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
            await asyncio.to_thread(config_changes.write_entity_config, zk, "topics", "t", {"retention.ms": str(i)})
        await asyncio.to_thread(config_changes.write_entity_config, zk, "clients", "nobody-handles-these", {})
        await _until(lambda: changes.processed >= 8)
        # each notification reads the entity's config then, so a late reader may see the last value more than once
        assert [s[1] for s in seen] == ["t", "t", "t"] and seen[-1][2] == {"retention.ms": "2"}
        await changes.stop()
        return seen, changes.failures

    _, failures = asyncio.run(scenario())
    assert failures == 1  # the notification that was not JSON


def test_expired_notifications_are_purged(zk: KazooClient) -> None:
    for i in range(3):
        config_changes.write_entity_config(zk, "topics", "t", {"retention.ms": str(i)})

    async def scenario() -> None:
        changes = config_changes.ConfigChanges(zk, expiration_ms=0)
        await changes.start()
        await _until(lambda: changes.processed >= 2)
        await asyncio.to_thread(config_changes.write_entity_config, zk, "topics", "t", {})
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


# -- three brokers ------------------------------------------------------------------------------------------------

class Cluster:
    def __init__(self, base: Path, zookeeper: zkserver.ZooKeeperServer) -> None:
        self.base, self.zookeeper = base, zookeeper
        self.chroot = "/" + unique("hw")
        self.zk = KazooClient(hosts=zookeeper.connect)
        self.brokers: dict[int, BrokerProcess] = {}

    def znode(self, path: str) -> tuple[dict, int]:
        raw, stat = self.zk.get(self.chroot + path)
        return json.loads(raw), stat.version

    def changes(self) -> list[dict]:
        path = f"{self.chroot}/config/changes"
        return [json.loads(self.zk.get(f"{path}/{c}")[0]) for c in sorted(self.zk.get_children(path))]

    def create(self, topic: str, config: dict[str, str]) -> None:
        """A topic of one partition on brokers [1, 2, 3] (1 leads), once every broker has it in sync."""
        admin = AdminClient({"bootstrap.servers": self.brokers[1].bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2, 3]], config=config)])[topic].result(20)
        wait_until(lambda: agreed_topic(list(self.brokers.values()), topic,
                                        lambda v: v[0][0] == 1 and len(v[0][3]) == 3), f"{topic} in sync", timeout=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("zk-configs"), zookeeper)
    c.zk.start(timeout=15)
    try:
        with running_cluster(c.base, zookeeper.connect + c.chroot, IDS, SESSION_TIMEOUT_MS,
                             "log.retention.check.interval.ms=200", "replica.lag.time.max.ms=3000") as brokers:
            c.brokers = brokers
            yield c
    finally:
        c.zk.stop()
        c.zk.close()


def _described(broker: BrokerProcess, resource_type: int, name: str, key: str) -> tuple[str, int] | None:
    """(value, source) of one config as ``broker`` describes it; None when it cannot."""
    result = describe_configs(broker.port, resource_type, name, [key])
    if result.error_code or not result.configs:
        return None
    return result.configs[0].value, result.configs[0].config_source


def _describes(broker: BrokerProcess, resource_type: int, name: str, key: str, wanted: tuple[str, int]) -> bool:
    return _described(broker, resource_type, name, key) == wanted


def _segments(broker: BrokerProcess, topic: str) -> int:
    return len(list((broker.log_dir / f"{topic}-0").glob("*.log")))


def _produce(broker: BrokerProcess, topic: str, count: int, acks: int = -1) -> int:
    """``count`` batches of one 200-byte record, acks=all; the first error or 0."""
    for _ in range(count):
        batch = build_batch([Record(offset=0, timestamp=0, key=None, value=b"x" * 200)])
        error = int(produce(broker.port, topic, batch, acks=acks).error_code)
        if error:
            return error
    return 0


def test_a_topic_config_altered_through_one_broker_holds_on_every_broker(cluster: Cluster) -> None:
    topic, b = unique("cfg-retention"), cluster.brokers
    cluster.create(topic, {"segment.bytes": "1024"})
    assert _produce(b[1], topic, 10) == 0  # acks=all: on all three replicas
    # a follower appends what one fetch brings at once, so its segments roll less often than the leader's
    wait_until(lambda: _produce(b[1], topic, 1) == 0 and min(_segments(b[i], topic) for i in IDS) >= 2,
               "closed segments on every replica", timeout=20)
    changes = len(cluster.changes())

    # nothing invalid is written, and an unknown topic is Kafka's error
    assert incremental_alter_configs(b[2].port, TOPIC, topic, {"retention.ms": "soon"})[0] == INVALID_CONFIG
    assert incremental_alter_configs(b[2].port, TOPIC, unique("none"), {"retention.ms": "1"})[0] == \
        UNKNOWN_TOPIC_OR_PARTITION
    assert cluster.znode(f"/config/topics/{topic}") == ({"version": 1, "config": {"segment.bytes": "1024"}}, 0)
    assert len(cluster.changes()) == changes

    # altered through broker 2 (a follower): Kafka's znode and notification, described alike by every broker
    assert incremental_alter_configs(b[2].port, TOPIC, topic, {"retention.ms": "100"}) == (0, None)
    assert cluster.znode(f"/config/topics/{topic}")[0] == {
        "version": 1, "config": {"segment.bytes": "1024", "retention.ms": "100"}}
    assert cluster.changes()[-1] == {"version": 2, "entity_path": f"topics/{topic}"}
    wait_until(lambda: all(_described(b[i], TOPIC, topic, "retention.ms") == ("100", DYNAMIC_TOPIC_CONFIG)
                           for i in IDS), "retention.ms described by every broker", timeout=10)
    # honoured by every replica's log: the leader's and both followers' closed segments go
    wait_until(lambda: all(_segments(b[i], topic) == 1 for i in IDS), "retention on every replica", timeout=10)

    # three brokers altering the topic at once, each its own key: none of the changes is lost
    keys = {1: "flush.messages", 2: "max.message.bytes", 3: "segment.index.bytes"}
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda i: incremental_alter_configs(b[i].port, TOPIC, topic, {keys[i]: "4096"}), IDS))
    assert answers == [(0, None)] * 3
    assert cluster.znode(f"/config/topics/{topic}")[0]["config"] == {
        "segment.bytes": "1024", "retention.ms": "100", **{k: "4096" for k in keys.values()}}


def test_min_insync_replicas_and_a_restart(cluster: Cluster) -> None:
    topic, b = unique("cfg-minisr"), cluster.brokers
    cluster.create(topic, {})
    assert incremental_alter_configs(b[3].port, TOPIC, topic, {"min.insync.replicas": "3"}) == (0, None)
    wait_until(lambda: _described(b[1], TOPIC, topic, "min.insync.replicas") == ("3", DYNAMIC_TOPIC_CONFIG),
               "the leader has the change", timeout=10)
    assert _produce(b[1], topic, 1) == 0  # three in sync
    b[3].stop()  # a clean stop: it leaves the ISR at once
    wait_until(lambda: agreed_topic([b[1], b[2]], topic, lambda v: v[0][3] == (1, 2)), "ISR [1, 2]", timeout=15)
    assert _produce(b[1], topic, 1) == NOT_ENOUGH_REPLICAS  # the leader took the change made through broker 3
    assert _produce(b[1], topic, 1, acks=1) == 0

    # changed while broker 3 is down: it reads the configs again when it returns
    assert incremental_alter_configs(b[1].port, TOPIC, topic, {"retention.ms": "86400001"}) == (0, None)
    b[3].start()
    wait_until(lambda: agreed_topic(list(b.values()), topic, lambda v: len(v[0][3]) == 3), "ISR [1, 2, 3]",
               timeout=20)
    assert _described(b[3], TOPIC, topic, "retention.ms") == ("86400001", DYNAMIC_TOPIC_CONFIG)
    assert _described(b[3], TOPIC, topic, "min.insync.replicas") == ("3", DYNAMIC_TOPIC_CONFIG)
    assert _produce(b[1], topic, 1) == 0
    # back to the default (DELETE): acks=all needs the broker's own 1 again
    assert incremental_alter_configs(b[2].port, TOPIC, topic, {"min.insync.replicas": None}) == (0, None)
    assert cluster.znode(f"/config/topics/{topic}")[0]["config"] == {"retention.ms": "86400001"}
    wait_until(lambda: _described(b[1], TOPIC, topic, "min.insync.replicas") == ("1", 5), "default again")


def test_broker_configs_default_and_per_broker(cluster: Cluster) -> None:
    b, topic = cluster.brokers, unique("cfg-default")
    cluster.create(topic, {})
    assert incremental_alter_configs(b[1].port, BROKER, "", {"log.retention.ms": "7777777"}) == (0, None)
    assert cluster.znode("/config/brokers/<default>")[0] == {"version": 1, "config": {"log.retention.ms": "7777777"}}
    assert cluster.changes()[-1] == {"version": 2, "entity_path": "brokers/<default>"}
    for i in IDS:  # every broker's own value, and its topics' default
        wait_until(functools.partial(_describes, b[i], BROKER, str(i), "log.retention.ms",
                                     ("7777777", DYNAMIC_DEFAULT_BROKER_CONFIG)), f"broker {i} has the default",
                   timeout=10)
        assert _described(b[i], TOPIC, topic, "retention.ms") == ("7777777", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert _described(b[3], BROKER, "", "log.retention.ms") == ("7777777", DYNAMIC_DEFAULT_BROKER_CONFIG)

    # per broker: broker 2's own, set through it; another broker's id is refused, as Kafka's brokers do
    assert incremental_alter_configs(b[2].port, BROKER, "2", {"log.retention.ms": "5555"}) == (0, None)
    assert cluster.znode("/config/brokers/2")[0] == {"version": 1, "config": {"log.retention.ms": "5555"}}
    assert incremental_alter_configs(b[3].port, BROKER, "2", {"log.retention.ms": "1"})[0] == INVALID_REQUEST
    assert incremental_alter_configs(b[1].port, BROKER, "", {"log.retention.ms": "x"})[0] == INVALID_CONFIG
    assert _described(b[2], BROKER, "2", "log.retention.ms") == ("5555", DYNAMIC_BROKER_CONFIG)
    assert _described(b[2], TOPIC, topic, "retention.ms") == ("5555", DYNAMIC_BROKER_CONFIG)
    assert _described(b[3], BROKER, "3", "log.retention.ms") == ("7777777", DYNAMIC_DEFAULT_BROKER_CONFIG)
    # the default removed through broker 3: gone everywhere
    assert incremental_alter_configs(b[3].port, BROKER, "", {"log.retention.ms": None}) == (0, None)
    wait_until(lambda: _described(b[1], BROKER, "", "log.retention.ms") is None, "default removed", timeout=10)
