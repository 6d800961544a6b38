"""Fixtures of the integration suite (the ``broker`` and ``fresh_broker`` fixtures live in tests/conftest.py)."""

import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient
from support.brokerproc import BrokerProcess
from support.zkserver import ZooKeeperServer


@pytest.fixture(scope="session")
def broker3(tmp_path_factory: pytest.TempPathFactory):
    """A session broker whose auto-created topics get 3 partitions (kcat has no admin API)."""
    base = tmp_path_factory.mktemp("broker3")
    with BrokerProcess(base / "data", "num.partitions=3") as proc:
        yield proc


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory):
    """A standalone ZooKeeper from Debian's package on a free loopback port (tests/support/zkserver.py); each
    cluster test works under a chroot of its own."""
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def admin(broker):
    """confluent-kafka's admin client on the session broker."""
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kadmin(broker):
    """kafka-python's admin client on the session broker."""
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    yield client
    client.close()
