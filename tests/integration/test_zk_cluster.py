"""A broker cluster on a real ZooKeeper (Debian's package, tests/support/zkserver.py): three real brokers
register, elect one controller, every broker's Metadata lists them all; the controller's SIGKILL moves
the controller within the session timeout; a restarted broker registers again; a second broker with a
taken broker.id is refused, and the broker left alone serves a topic of the cluster. Topics across brokers are
in test_zk_topics.py."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kazoo.client import KazooClient
from support import zkserver
from support.brokerproc import BrokerProcess
from support.zkcluster import agreed_controller, cluster_broker, metadata_view

from headwater.testing import free_port, unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 6000


@pytest.fixture
def zk(zookeeper: zkserver.ZooKeeperServer) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zookeeper.connect)
    client.start(timeout=15)
    yield client
    client.stop()
    client.close()


def _broker(base: Path, zookeeper: zkserver.ZooKeeperServer, chroot: str, broker_id: int) -> BrokerProcess:
    return cluster_broker(base, zookeeper.connect + chroot, broker_id, SESSION_TIMEOUT_MS)


def test_three_brokers_elect_a_controller_and_fail_over(tmp_path: Path, zookeeper, zk: KazooClient) -> None:
    chroot = "/" + unique("hw")
    procs = {i: _broker(tmp_path, zookeeper, chroot, i) for i in (1, 2, 3)}
    try:
        for p in procs.values():
            p.start()
        every = list(procs.values())
        controller = wait_until(lambda: agreed_controller(every, {1, 2, 3}),
                                "three brokers and one controller in every Metadata", timeout=20,
                                seen=lambda: [metadata_view(b) for b in every])

        # Kafka's layout in ZooKeeper, under the chroot
        reg = json.loads(zk.get(f"{chroot}/brokers/ids/2")[0])
        assert reg["version"] == 4 and reg["jmx_port"] == -1 and reg["port"] == procs[2].port
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{procs[2].port}"]
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"} and int(reg["timestamp"]) > 0
        assert json.loads(zk.get(f"{chroot}/controller")[0])["brokerid"] == controller
        epoch = int(zk.get(f"{chroot}/controller_epoch")[0])
        assert epoch >= 1

        # DescribeCluster (kafka-python) answers the same cluster
        admin = KafkaAdminClient(bootstrap_servers=procs[1].bootstrap, request_timeout_ms=10000)
        try:
            described = admin.describe_cluster()
        finally:
            admin.close()
        assert described["controller_id"] == controller
        assert {b["broker_id"] for b in described["brokers"]} == {1, 2, 3}

        # SIGKILL the controller: its session expires and a survivor takes over
        killed = procs[controller]
        survivors = [p for i, p in procs.items() if i != controller]
        started = time.monotonic()
        killed.kill()
        rest = {1, 2, 3} - {controller}
        new_controller = wait_until(lambda: agreed_controller(survivors, rest), "a new controller among the survivors",
                                    timeout=SESSION_TIMEOUT_MS / 1000 + 15,
                                    seen=lambda: [metadata_view(b) for b in survivors])
        failover = time.monotonic() - started
        assert new_controller != controller
        assert int(zk.get(f"{chroot}/controller_epoch")[0]) > epoch
        print(f"controller failover after SIGKILL: {failover:.1f} s (session timeout {SESSION_TIMEOUT_MS} ms)")

        # the killed broker, restarted, registers again and follows the new controller
        killed.start()
        assert wait_until(lambda: agreed_controller(every, {1, 2, 3}), "the restarted broker back in every Metadata",
                          timeout=20, seen=lambda: [metadata_view(b) for b in every]) == new_controller
    finally:
        for p in procs.values():
            p.kill()


def test_taken_broker_id_is_refused_and_the_broker_carries_on(tmp_path: Path, zookeeper) -> None:
    chroot = "/" + unique("hw")
    with _broker(tmp_path, zookeeper, chroot, 7) as first:
        second = cluster_broker(tmp_path / "second", zookeeper.connect + chroot, 7, SESSION_TIMEOUT_MS)
        with pytest.raises(RuntimeError, match=r"exited with 2") as refused:
            second.start()
        assert f"broker.id 7 is already registered in ZooKeeper at {zookeeper.connect}{chroot}/brokers/ids/7" \
            in str(refused.value)

        # the first broker carries on, and makes a cluster topic it alone leads
        assert metadata_view(first) == ({7}, 7)
        admin = AdminClient({"bootstrap.servers": first.bootstrap})
        topic = unique("t")
        next(iter(admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=15).values())).result(20)
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        assert {p: (m.leader, m.replicas, m.isrs) for p, m in partitions.items()} == \
            {0: (7, [7], [7]), 1: (7, [7], [7])}


def test_no_zookeeper_is_a_clear_start_failure(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    broker = BrokerProcess(tmp_path / "b", f"zookeeper.connect=127.0.0.1:{port}", "broker.id=1",
                           "zookeeper.connection.timeout.ms=1500")
    with pytest.raises(RuntimeError, match=r"exited with 2") as refused:
        broker.start()
    assert f"zookeeper.connect: no ZooKeeper session with 127.0.0.1:{port} within 1.5 s" in str(refused.value)


def test_a_broker_whose_session_expired_registers_again(tmp_path: Path, zookeeper, zk: KazooClient) -> None:
    """A broker cut off longer than its session (SIGSTOP) loses its znodes; once back it registers again
    and, alone, is elected controller again with a higher epoch."""
    chroot = "/" + unique("hw")
    with _broker(tmp_path, zookeeper, chroot, 4) as broker:
        assert broker.proc is not None
        wait_until(lambda: metadata_view(broker) == ({4}, 4), "broker 4 registered and controller")
        epoch = int(zk.get(f"{chroot}/controller_epoch")[0])
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: zk.exists(f"{chroot}/brokers/ids/4") is None, "the stopped broker's session expired",
                       timeout=SESSION_TIMEOUT_MS / 1000 + 15)
            assert zk.exists(f"{chroot}/controller") is None
        finally:
            broker.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: zk.exists(f"{chroot}/brokers/ids/4") is not None and metadata_view(broker) == ({4}, 4),
                   "broker 4 registered and controller again", timeout=20, log=broker.log_text)
        assert int(zk.get(f"{chroot}/controller_epoch")[0]) == epoch + 1
        assert "registered again in ZooKeeper after its session expired" in broker.log_text()
