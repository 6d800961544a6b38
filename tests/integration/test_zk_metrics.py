"""The replication and controller metrics of three real brokers on a real ZooKeeper, scraped from each broker's
``metrics.listener``: one active controller, leaders summing to the partitions, and a SIGKILLed broker seen as
Kafka's gauges show it (its partners' ISR shrinks, under-replicated and offline partitions, the preferred
replicas' imbalance, the controller's broker-change handling) until it returns and everything is back to 0."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support import zkserver
from support.brokermetrics import Samples, metrics_url, scrape, value
from support.brokerproc import BrokerProcess
from support.zkcluster import PartitionView, agreed_controller, agreed_topic, running_cluster, topic_view

from headwater.testing import unique, wait_until

pytestmark = pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available()))

SESSION_TIMEOUT_MS = 4000
IDS = {1, 2, 3}
RM = "kafka_server_replicamanager_"
KC = "kafka_controller_kafkacontroller_"


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, zookeeper: zkserver.ZooKeeperServer
            ) -> Iterator[dict[int, BrokerProcess]]:
    # a follower that stops fetching leaves its leaders' ISRs 1 s after it falls behind: before its session
    # expires, so the leaders shrink the ISR themselves (the figure Kafka's IsrShrinksPerSec counts)
    with running_cluster(tmp_path_factory.mktemp("zk-metrics"), f"{zookeeper.connect}/{unique('hw')}", IDS,
                         SESSION_TIMEOUT_MS, "metrics.listener=http://127.0.0.1:0",
                         "replica.lag.time.max.ms=1000") as started:
        yield started


def _scrape_all(brokers: dict[int, BrokerProcess], ids: set[int]) -> dict[int, Samples]:
    return {i: scrape(metrics_url(brokers[i])) for i in sorted(ids)}


def _sum(scraped: dict[int, Samples], name: str) -> float:
    return sum(value(s, name) for s in scraped.values())


def _settled(brokers: dict[int, BrokerProcess], ids: set[int],
             check: Callable[[dict[int, Samples]], bool]) -> dict[int, Samples] | None:
    """Every broker of ``ids`` scraped, once ``check`` holds of what they answer (None meanwhile)."""
    scraped = _scrape_all(brokers, ids)
    return scraped if check(scraped) else None


def test_replication_and_controller_metrics_follow_a_broker_kill(brokers: dict[int, BrokerProcess]) -> None:
    every = list(brokers.values())
    controller = wait_until(lambda: agreed_controller(every, IDS), "a controller", timeout=20)
    victim = min(IDS - {controller})
    topic, alone = unique("replicated"), unique("alone")
    admin = AdminClient({"bootstrap.servers": ",".join(b.bootstrap for b in every)})
    for future in admin.create_topics([NewTopic(topic, 3, 3), NewTopic(alone, 1, replica_assignment=[[victim]])],
                                      operation_timeout=20).values():
        future.result(30)
    view: dict[int, PartitionView] = wait_until(
        lambda: agreed_topic(every, topic, lambda v: all(p[0] == p[2][0] and len(p[3]) == 3 for p in v.values())),
        "the topic's preferred leaders, every ISR full", timeout=20)
    wait_until(lambda: agreed_topic(every, alone, lambda v: v[0][0] == victim), "the single replica leading")

    # exactly one active controller; leaders sum to the partitions; nothing under-replicated or offline
    def healthy(scraped: dict[int, Samples]) -> bool:
        return (_sum(scraped, RM + "leadercount") == 4 and _sum(scraped, RM + "underreplicatedpartitions") == 0
                and value(scraped[controller], KC + "globalpartitioncount") == 4)
    before = wait_until(lambda: _settled(brokers, IDS, healthy), "every leader in place", timeout=20)
    assert [i for i, s in before.items() if value(s, KC + "activecontrollercount") == 1] == [controller]
    assert _sum(before, KC + "activecontrollercount") == 1
    for i, s in before.items():
        assert value(s, RM + "partitioncount") == (4 if i == victim else 3)
        # min.insync.replicas 1: only the single replica's partition is at its minimum ISR
        assert value(s, RM + "atminisrpartitioncount") == (1 if i == victim else 0)
        assert value(s, RM + "underminisrpartitioncount") == 0
        assert value(s, "kafka_server_sessionexpirelistener_sessionstate", state="CONNECTED") == 1
        assert value(s, "kafka_server_sessionexpirelistener_zookeepersyncconnects_total") >= 1
        cluster_wide = [value(s, KC + n) for n in ("globaltopiccount", "globalpartitioncount", "offlinepartitionscount",
                                                  "preferredreplicaimbalancecount")]
        assert cluster_wide == ([2, 4, 0, 0] if i == controller else [0, 0, 0, 0])
    shrinks_before = {i: value(s, RM + "isrshrinks_total") for i, s in before.items()}
    elections_before = value(before[controller], "kafka_controller_controllerstats_leaderelectionrateandtimems_count")

    # SIGKILL the victim; records written to the partitions the others lead leave it behind there
    killed_at = time.monotonic()
    brokers[victim].kill()
    others = IDS - {victim}
    producer = Producer({"bootstrap.servers": ",".join(brokers[i].bootstrap for i in others), "acks": 1})
    for p, (leader, *_) in view.items():
        if leader != victim:
            for n in range(5):
                producer.produce(topic, str(n).encode(), partition=p)
    assert producer.flush(20) == 0

    def shrunk(scraped: dict[int, Samples]) -> bool:
        return all(value(scraped[view[p][0]], RM + "isrshrinks_total") > shrinks_before[view[p][0]]
                   for p in view if view[p][0] != victim) and _sum(scraped, RM + "underreplicatedpartitions") >= 2
    wait_until(lambda: _settled(brokers, others, shrunk), "the leaders shrinking their ISRs", timeout=15)
    shrunk_after = time.monotonic() - killed_at  # (seen by the scrapes: the shrinks themselves came earlier)

    # the session expires: the controller moves the victim's leadership, and its single replica is offline
    wait_until(lambda: agreed_topic([brokers[i] for i in others], topic,
                                    lambda v: all(p[0] in others and victim not in p[3] for p in v.values())),
               "the victim's partition led by another broker", timeout=SESSION_TIMEOUT_MS / 1000 + 15)

    def degraded(scraped: dict[int, Samples]) -> bool:
        return value(scraped[controller], KC + "offlinepartitionscount") == 1 and \
            _sum(scraped, RM + "underreplicatedpartitions") == 3
    during = wait_until(lambda: _settled(brokers, others, degraded), "the victim's absence in the figures",
                        timeout=15)
    assert _sum(during, RM + "leadercount") == 3  # the single replica's partition has no leader
    # imbalanced: the partition the victim was preferred for, and the one without a leader
    assert value(during[controller], KC + "preferredreplicaimbalancecount") == 2
    assert value(during[controller], "kafka_controller_controllerstats_leaderelectionrateandtimems_count") > \
        elections_before
    assert value(during[controller], "kafka_controller_controllerstats_uncleanleaderelections_total") == 0
    assert value(during[controller], KC + "activecontrollercount") == 1

    # back: the leaders take it into their ISRs again, it leads its preferred partitions, all back to 0
    brokers[victim].start()
    expands_before = {i: value(s, RM + "isrexpands_total") for i, s in during.items()}

    def recovered(scraped: dict[int, Samples]) -> bool:
        return (_sum(scraped, RM + "underreplicatedpartitions") == 0 and _sum(scraped, RM + "leadercount") == 4
                and value(scraped[controller], KC + "offlinepartitionscount") == 0
                and value(scraped[controller], KC + "preferredreplicaimbalancecount") == 0)
    after = wait_until(lambda: _settled(brokers, IDS, recovered), "every figure back to health", timeout=20,
                       seen=lambda: {i: topic_view(brokers[i], topic) for i in IDS})
    assert sum(value(after[i], RM + "isrexpands_total") - expands_before[i] for i in others) >= 3
    assert value(after[victim], RM + "leadercount") == 2  # its preferred partition and the single replica
    assert value(after[victim], "kafka_server_replicafetchermanager_maxlag", clientId="Replica") == 0
    print(f"ISRs shrunk {shrunk_after:.1f} s after the SIGKILL (replica.lag.time.max.ms 1000, "
          f"session timeout {SESSION_TIMEOUT_MS} ms)")
