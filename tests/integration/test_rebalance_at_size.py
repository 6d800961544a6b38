"""Rebalances with many tasks: three distributed workers sharing 150 idle tasks (15 DataGen connectors x 10).

A follower is SIGKILLed and a replacement (a new worker) starts at once, while the leader holds the lost
work back (``scheduled.rebalance.max.delay.ms``, 8 s here so the replacement joins within it): the lost
work goes to the replacement, and the survivors keep what they ran, without a restart. Then a fourth worker
joins: only the survivors' excess moves to it, and no task restarts on a worker that keeps it. Restarts are
read from the status topic (a worker writes RUNNING each time it starts a task).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.brokerproc import BrokerProcess
from support.connectproc import unique, wait_for
from support.rebalancekit import restarted_on_keepers, running_writes, settled, status_marks, task_loads
from support.workerproc import BROKER_OVERRIDES, Cluster, fast_settings

from headwater.connect.herder.assignor import balanced_shares

CONNECTORS, TASKS = 15, 10
ITEMS = CONNECTORS * (TASKS + 1)
SESSION_S, DELAY_S = 3.0, 8.0

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("rebalance-broker")
    with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1") as proc:
        yield proc


def test_lost_work_goes_to_the_replacement_and_a_join_moves_only_the_excess(broker: BrokerProcess,
                                                                             tmp_path: Path) -> None:
    tag = unique("size")
    settings = {**fast_settings(tag), "scheduled.rebalance.max.delay.ms": str(int(DELAY_S * 1000))}
    status_topic = settings["status.storage.topic"]
    with Cluster(tmp_path, broker.bootstrap, tag=tag, settings=settings) as cluster:
        workers = cluster.start(3)
        leader = cluster.leader()
        for i in range(CONNECTORS):
            leader.ok("POST", "/connectors", {"name": f"idle-{i:02d}", "config": {
                "connector.class": "DataGen", "topic": f"{tag}-idle", "tasks.max": str(TASKS),
                "max.records": "0"}}, expect=201)
        ids = {w.worker_id for w in workers}
        before = wait_for(lambda: settled(cluster, ITEMS, ids, balanced=True), 60, 0.2,
                          f"{ITEMS} connectors and tasks RUNNING, balanced", cluster.logs)

        # A follower dies; its replacement starts at once and joins while the lost work is held back.
        leader = cluster.leader()
        victim = next(w for w in workers if w is not leader)
        survivors = [w for w in workers if w is not victim]
        lost = {i for i, (_, wid) in before.items() if wid == victim.worker_id}
        mark = status_marks(broker.bootstrap, status_topic)
        killed = time.monotonic()
        victim.kill()
        replacement = cluster.start(1)[0]
        live = {w.worker_id for w in (*survivors, replacement)}
        after = wait_for(lambda: settled(cluster, ITEMS, live), SESSION_S + DELAY_S + 20, 0.2,
                         "everything RUNNING on the survivors and the replacement", cluster.logs)
        elapsed = time.monotonic() - killed
        print(f"\nkilled a worker with {len(lost)} connectors and tasks: all RUNNING again after {elapsed:.1f} s "
              f"(session {SESSION_S:.0f} s + delay {DELAY_S:.0f} s)")
        assert elapsed <= SESSION_S + DELAY_S + 10
        assert {i for i, (_, wid) in after.items() if wid == replacement.worker_id} == lost, \
            "the replacement took the lost work, and only it"
        assert all(after[i] == before[i] for i in before if i not in lost), "the survivors' work stayed put"
        writes = running_writes(broker.bootstrap, status_topic, mark)
        assert not restarted_on_keepers(before, after, writes), "a survivor restarted a task it kept"

        # A fourth worker joins: it gets the excess of the others, nothing else moves or restarts.
        mark = status_marks(broker.bootstrap, status_topic)
        loads = task_loads(after)
        newcomer = cluster.start(1)[0]
        live.add(newcomer.worker_id)
        final = wait_for(lambda: settled(cluster, ITEMS, live, balanced=True), 60, 0.2,
                         "the tasks spread over four workers", cluster.logs)
        moved = {i for i in final if i[1] >= 0 and final[i][1] != after[i][1]}
        assert all(final[i][1] == newcomer.worker_id for i in moved), "tasks moved only to the newcomer"
        shares = balanced_shares({**loads, newcomer.worker_id: 0}, CONNECTORS * TASKS)
        assert len(moved) == sum(max(0, n - shares[wid]) for wid, n in loads.items())
        writes = running_writes(broker.bootstrap, status_topic, mark)
        assert not restarted_on_keepers(after, final, writes), "a worker restarted a task it kept"
