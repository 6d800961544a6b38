"""The broker's ``metrics.listener``: Prometheus' text format with the JMX exporter's Kafka names and
kafka_exporter's lag, figures that move with real client traffic; bad listeners are refused by name."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from support.brokermetrics import metrics_url, scrape, total, value
from support.brokerproc import BrokerProcess
from support.hwclients import create_topic, make_records, produce_confluent, unique

pytestmark = pytest.mark.timeout(60)

N = 300
PARTITIONS = 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    base = tmp_path_factory.mktemp("metrics")
    with BrokerProcess(base / "data", "metrics.listener=http://127.0.0.1:0",
                       "group.initial.rebalance.delay.ms=0") as proc:
        yield proc


def test_figures_follow_produce_consume_and_commit(broker: BrokerProcess) -> None:
    url = metrics_url(broker)
    topic, group = unique("metrics"), unique("metrics-group")
    create_topic("confluent", broker.bootstrap, topic, PARTITIONS)
    before = scrape(url)
    assert value(before, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 0
    assert value(before, "kafka_log_log_logendoffset", topic=topic, partition="0") == 0

    # lz4 batches: messages in are counted from each batch header, never by decompressing
    produce_confluent(broker.bootstrap, topic, make_records(N, PARTITIONS, "m"), codec="lz4")
    committed = {}
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        seen = 0
        while seen < N:
            m = consumer.poll(10)
            assert m is not None, f"consumed {seen} of {N}"
            assert m.error() is None, m.error()
            seen += 1
        committed = {p: 10 * (p + 1) for p in range(PARTITIONS)}  # part of each partition's 100
        consumer.commit(offsets=[TopicPartition(topic, p, off) for p, off in committed.items()], asynchronous=False)
    finally:
        consumer.close()
    after = scrape(url)

    def rise(name: str, **labels: str) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    prefix = "kafka_server_brokertopicmetrics_"
    assert rise(prefix + "messagesin_total", topic=topic) == N
    assert value(after, prefix + "messagesin_total") - value(before, prefix + "messagesin_total") == N  # all topics
    bytes_in = rise(prefix + "bytesin_total", topic=topic)
    assert 0 < bytes_in < N * 200  # compressed batches as sent
    assert rise(prefix + "bytesout_total", topic=topic) >= bytes_in  # every batch read at least once
    assert rise(prefix + "totalproducerequests_total", topic=topic) >= 1
    assert rise(prefix + "failedproducerequests_total", topic=topic) == 0
    assert rise(prefix + "totalfetchrequests_total", topic=topic) >= 1
    for request in ("Produce", "Fetch", "FetchConsumer", "JoinGroup", "SyncGroup", "OffsetCommit"):
        assert rise("kafka_network_requestmetrics_requests_total", request=request) >= 1, request
        assert rise("kafka_network_requestmetrics_totaltimems_count", request=request) >= 1, request
    assert value(after, "kafka_network_requestmetrics_totaltimems", request="Produce", quantile="0.99") > 0

    ends = {p: value(after, "kafka_log_log_logendoffset", topic=topic, partition=str(p)) for p in range(PARTITIONS)}
    assert sum(ends.values()) == N
    for p in range(PARTITIONS):
        labels = {"topic": topic, "partition": str(p)}
        assert value(after, "kafka_log_log_logstartoffset", **labels) == 0
        assert value(after, "kafka_log_log_size", **labels) > 0
        assert value(after, "kafka_log_log_numlogsegments", **labels) == 1
        assert value(after, "kafka_consumergroup_current_offset", consumergroup=group, **labels) == committed[p]
        assert value(after, "kafka_consumergroup_lag", consumergroup=group, **labels) == ends[p] - committed[p]
    assert value(after, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == N - sum(committed.values())
    assert total(after, "kafka_consumergroup_lag", consumergroup=group) == N - sum(committed.values())
    assert value(after, "kafka_consumergroup_members", consumergroup=group) == 0  # it left
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1
    assert value(after, "kafka_coordinator_group_groupmetadatamanager_numoffsets") >= PARTITIONS


@pytest.mark.parametrize("listener", ["127.0.0.1:9404", "https://127.0.0.1:9404", "http://127.0.0.1", "http://h:x"])
def test_a_bad_listener_is_refused_by_name(listener: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "headwater", "broker", "--set", f"log.dirs={tmp_path}",
                           "--set", f"metrics.listener={listener}"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert "invalid configuration: metrics.listener:" in done.stderr, done.stderr


def test_a_listener_in_use_fails_the_start(broker: BrokerProcess, tmp_path: Path) -> None:
    taken = metrics_url(broker).removesuffix("/metrics")
    other = BrokerProcess(tmp_path / "data", f"metrics.listener={taken}")
    with pytest.raises(RuntimeError, match=r"metrics\.listener .*cannot listen"):
        other.start(timeout=20)
    other.kill()


def test_headwater_up_carries_on_without_its_default_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """``headwater up``'s default metrics address is taken only when free; when taken, a warning and no metrics."""
    from headwater import up
    from headwater.broker.config.broker_config import BrokerConfig
    from headwater.broker.server.broker_server import BrokerServer

    async def go() -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            monkeypatch.setattr(up, "DEFAULT_METRICS_LISTENER", f"http://127.0.0.1:{taken.getsockname()[1]}")
            broker = BrokerServer(BrokerConfig.model_validate({"listeners": "PLAINTEXT://127.0.0.1:0",
                                                               "log.dirs": str(tmp_path / "data")}))
            await broker.start()
            try:
                await up._default_metrics(broker)
                assert broker.metrics_url is None
            finally:
                await broker.stop()
        assert "broker metrics are off" in caplog.text and "Address already in use" in caplog.text

    asyncio.run(go())


def test_transaction_coordinator_metrics(broker: BrokerProcess) -> None:
    topic = unique("metrics-txn")
    create_topic("confluent", broker.bootstrap, topic, partitions=1)
    url = metrics_url(broker)
    before = value(scrape(url), "headwater_transactions", state="CompleteCommit")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": unique("metrics-tid")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, value=b"v")
    producer.commit_transaction(30)
    after = scrape(url)
    assert value(after, "headwater_transactions", state="CompleteCommit") == before + 1
    assert value(after, "headwater_transaction_coordinator_failures_total") == 0
