"""A network partition, Jepsen-style, on a real ZooKeeper with three real brokers, each broker in a network
namespace of its own (tests/support/netns.py): the leader of a partition is cut off from the other brokers and
from ZooKeeper for longer than zookeeper.session.timeout.ms while idempotent librdkafka producers (acks=all,
min.insync.replicas=2, replication factor 3, in the root namespace) write numbered records. Either the clients
still reach the old leader, and a second client that knows the cluster from the old leader alone keeps writing
to it (records it cannot replicate, so it must acknowledge none of them), or it is cut off from the clients too.
The controller moves the leadership and the new leader acknowledges records during the cut; after healing, the
old leader truncates its divergent tail (leader epochs), catches up and rejoins the ISRs. Every acknowledged
record is read back exactly once and the three replicas' logs hold the same batches below the high watermark."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from support import netns, zkserver
from support.brokerproc import BrokerProcess
from support.netns import NetLab, NetnsBroker
from support.zkcluster import (
    NumberedProducer,
    agreed_controller,
    assert_each_acknowledged_once,
    high_watermarks,
    read_numbers,
    replicas_equal,
)

from headwater.broker.cluster.znodes import state_path
from headwater.broker.replication.state import PartitionState
from headwater.testing import unique, wait_until

pytestmark = [pytest.mark.skipif(zkserver.available() is not None, reason=str(zkserver.available())),
              pytest.mark.skipif(netns.available() is not None, reason=str(netns.available()))]

SESSION_TIMEOUT_MS = 4000
IDS = (1, 2, 3)
PARTITIONS = 3
STALE_FIRST = 10**9  # the second client's first number
STRAGGLERS_S = 2.0  # acknowledgements of what the followers fetched before the cut may arrive this late


@pytest.fixture
def lab() -> Iterator[NetLab]:
    with NetLab() as made:
        yield made


def _states(zk: KazooClient, topic: str) -> dict[int, PartitionState] | None:
    """Each partition's state znode; None while any is missing."""
    states = {}
    for p in range(PARTITIONS):
        if zk.exists(state_path(topic, p)) is None:
            return None
        states[p] = PartitionState.from_json(zk.get(state_path(topic, p))[0])
    return states


def _all_in_sync(zk: KazooClient, topic: str) -> dict[int, PartitionState] | None:
    states = _states(zk, topic)
    return states if states and all(set(s.isr) == set(IDS) for s in states.values()) else None


def _moved(zk: KazooClient, topic: str, old: int) -> dict[int, PartitionState] | None:
    states = _states(zk, topic)
    return states if states and states[0].leader not in (-1, old) else None


@pytest.mark.parametrize("client_reaches_it", [True, False], ids=["client-reaches-old-leader", "isolated"])
def test_a_leader_cut_off_from_brokers_and_zookeeper_loses_nothing_acknowledged(
        lab: NetLab, tmp_path: Path, client_reaches_it: bool) -> None:
    zk_address = lab.add_root_address()  # ZooKeeper's own address, so that a cut can spare the client's
    for i in IDS:
        lab.add_host(f"b{i}")
    chroot = "/" + unique("hw")
    with zkserver.ZooKeeperServer(tmp_path / "zk", host=zk_address) as server:
        brokers = {i: NetnsBroker(lab, f"b{i}", tmp_path / f"b{i}", f"zookeeper.connect={server.connect}{chroot}",
                                  f"broker.id={i}", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
                                  "replica.lag.time.max.ms=3000") for i in IDS}
        zk = KazooClient(hosts=server.connect + chroot, timeout=10)
        try:
            for b in brokers.values():
                b.start()
            zk.start(timeout=10)  # after the brokers made the chroot
            _run(lab, brokers, zk, zk_address, client_reaches_it)
        finally:
            zk.stop()
            zk.close()
            for b in brokers.values():
                b.kill()


def _run(lab: NetLab, brokers: dict[int, NetnsBroker], zk: KazooClient, zk_address: str,
         client_reaches_it: bool) -> None:
    every: list[BrokerProcess] = list(brokers.values())
    wait_until(lambda: agreed_controller(every, set(IDS)), "three brokers and a controller", timeout=20)
    topic = unique("netsplit")
    bootstrap = ",".join(b.bootstrap for b in every)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    next(iter(admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                  operation_timeout=20).values())).result(30)
    before = wait_until(lambda: _all_in_sync(zk, topic), "every replica in every ISR")

    writer = NumberedProducer(bootstrap, topic, PARTITIONS)
    # a second client writing to partition 0 during the cut, its numbers apart from the first's
    stale_client = NumberedProducer("", topic, PARTITIONS, first=STALE_FIRST, only=0) if client_reaches_it else None
    clients = [writer, *([stale_client] if stale_client else [])]
    writer.start()
    try:
        wait_until(lambda: all(writer.acked.values()), "records acknowledged on every partition")
        victim = before[0].leader
        others = [b.address for i, b in brokers.items() if i != victim]
        lab.cut(f"b{victim}", [*others, zk_address, *(() if client_reaches_it else (lab.gateway,))])
        cut_at = time.time()
        if stale_client is not None:  # knows the cluster from the old leader alone, which still says it leads
            stale_client.bootstrap = brokers[victim].bootstrap
            stale_client.start()
        try:
            moved = wait_until(lambda: _moved(zk, topic, victim), "partition 0 led by another broker",
                               timeout=SESSION_TIMEOUT_MS / 1000 + 15)
            moved_at = zk.get(state_path(topic, 0))[1].mtime / 1000  # when the controller wrote it
            # the new leader acknowledges records of the partition while the old one is still cut off
            wait_until(lambda: writer.acked_at[0] and writer.acked_at[0][-1] > moved_at,
                       "partition 0's records acknowledged by its new leader during the cut", timeout=20)
            during = {p: sum(1 for t in writer.acked_at[p] if t > cut_at) for p in range(PARTITIONS)}
            by_new = sum(1 for t in writer.acked_at[0] if t > moved_at)
        finally:
            lab.heal(f"b{victim}")
        healed_at = time.time()
        wait_until(lambda: _all_in_sync(zk, topic), "the old leader back in every ISR", timeout=30)
        rejoined_at = time.time()
        time.sleep(0.5)
    finally:
        for client in clients:
            if client.is_alive():
                client.finish()
    for client in clients:
        assert not client.failed, client.failed[:5]

    truncations = re.findall(rf"{re.escape(topic)}-0: truncating the log from (\d+) to (\d+)",
                             brokers[victim].log_text(since_start=True))
    divergent = sum(int(a) - int(b) for a, b in truncations)
    if client_reaches_it:  # the old leader took writes it could not replicate, and dropped them on its return
        assert divergent > 0, f"the old leader of partition 0 truncated no divergent tail: {truncations}"

    # the cut-off old leader acknowledged nothing: no record of partition 0 was acknowledged from shortly after
    # the cut (answers to what the followers had fetched before it) until the controller moved the leadership
    stale = [t for c in clients for t in c.acked_at[0] if cut_at + STRAGGLERS_S < t < moved_at]
    assert not stale, f"{len(stale)} records of partition 0 acknowledged while its leader was cut off"

    wait_until(lambda: _all_in_sync(zk, topic), "every replica in every ISR")
    highs = high_watermarks(bootstrap, topic, PARTITIONS)
    wait_until(lambda: replicas_equal([b.log_dir for b in every], topic, highs),
               "the three replicas' logs equal below the high watermark", timeout=30)
    read = read_numbers(bootstrap, topic, PARTITIONS)
    assert_each_acknowledged_once(writer.acked, {p: [n for n in ns if n < STALE_FIRST] for p, ns in read.items()})
    if stale_client is not None:
        assert stale_client.acked[0], "the second client's records were never acknowledged"
        assert_each_acknowledged_once(stale_client.acked,
                                      {p: [n for n in ns if n >= STALE_FIRST] for p, ns in read.items()})
    stale_figures = "" if stale_client is None else (
        f"; a client knowing only the old leader: its first record acknowledged "
        f"{stale_client.acked_at[0][0] - cut_at:.1f} s after the cut")
    print(f"{'client reaching it' if client_reaches_it else 'isolated'}: cut broker {victim} (leader of partition 0, "
          f"epoch {before[0].leader_epoch}) for {healed_at - cut_at:.1f} s: partition 0 led by broker "
          f"{moved[0].leader} (epoch {moved[0].leader_epoch}) after {moved_at - cut_at:.1f} s, none of its records "
          f"acknowledged in between (from {STRAGGLERS_S} s after the cut); acknowledged during the cut per partition "
          f"{during} (partition 0's by its new leader: {by_new}); old leader truncated {divergent} unacknowledged "
          f"records and was back in every ISR {rejoined_at - healed_at:.1f} s after healing"
          f"{stale_figures}; {sum(len(a) for c in clients for a in c.acked.values())} acknowledged records all "
          "read once")
