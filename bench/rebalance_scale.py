"""Rebalances at size: three distributed workers sharing 1,000 tasks; one SIGKILLed, one added.

A broker subprocess and ``--workers`` distributed workers (subprocesses, tests/support/workerproc.py,
session.timeout.ms 3000, heartbeat 500 ms) run ``--connectors`` DataGen connectors of ``--tasks`` tasks
each, idle (``max.records=0``: a task polls nothing every 0.5 s), so the figures are the herder's and the
group's, not the records'. The phases:

1. **create**: the connectors are POSTed to the leader one after the other; then polled
   (``GET /connectors?expand=status`` on every worker, every 0.2 s) until every connector and task is
   RUNNING and every worker reports the same placement.
2. **kill**: a follower is SIGKILLed (``--victim leader``: the leader); polled until every connector and
   task is RUNNING on the survivors. Kafka Connect counts in two steps, and so does this figure: the
   broker notices the death after ``session.timeout.ms``, then the leader holds the lost work back for
   ``scheduled.rebalance.max.delay.ms`` (the worker may come back) before reassigning it; the goal is
   session timeout + delay + 10 s. ``--delay-ms`` sets the delay (default 1000, as shipped).
3. **join**: a new worker starts; polled until the tasks are spread within one over the workers. The
   figures: tasks moved to the newcomer, and tasks **restarted on a worker that kept them** (must be 0:
   no stop-the-world), counted from the status topic (a task's RUNNING record written again by the
   worker that already ran it).

Per phase: the seconds, the rebalance rounds (group generations seen in the workers' logs), tasks
moved, tasks restarted on the workers that kept them; then each worker's RSS and threads, the time of
one ``GET /connectors?expand=status``, ``ulimit -n`` and the load (``uptime``).

    .venv/bin/python bench/rebalance_scale.py [--connectors 100] [--tasks 10] [--delay-ms 1000]
        [--victim follower|leader]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.brokerproc import BrokerProcess  # noqa: E402
from support.connectproc import unique, wait_for  # noqa: E402
from support.rebalancekit import (  # noqa: E402
    expand_status,
    restarted_on_keepers,
    running_writes,
    settled,
    status_marks,
    task_loads,
)
from support.workerproc import BROKER_OVERRIDES, Cluster, WorkerProcess, fast_settings  # noqa: E402

from headwater.connect.herder.assignor import balanced_shares  # noqa: E402

POLL_S = 0.2


def proc_figures(worker: WorkerProcess) -> str:
    assert worker.proc is not None
    fields = {}
    for line in Path(f"/proc/{worker.proc.pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return f"{worker.name}: RSS {int(fields['VmRSS'].split()[0]) / 1024:.0f} MB, {fields['Threads']} threads"


def generations(workers: list[WorkerProcess], after: int) -> int:
    return len({j.generation for w in workers for j in w.joins() if j.generation > after})


def last_generation(workers: list[WorkerProcess]) -> int:
    return max((j.generation for w in workers for j in w.joins()), default=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connectors", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--delay-ms", type=int, default=1000, help="scheduled.rebalance.max.delay.ms")
    parser.add_argument("--victim", choices=["follower", "leader"], default="follower")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"{args.workers} workers, {args.connectors} connectors x {args.tasks} tasks; ulimit -n {soft} (hard {hard}); "
          f"load {os.getloadavg()[0]:.2f} at start")
    expected = args.connectors * (args.tasks + 1)
    tag = unique("scale")
    settings = {**fast_settings(tag), "scheduled.rebalance.max.delay.ms": str(args.delay_ms)}
    session_s, delay_s = int(settings["session.timeout.ms"]) / 1000, args.delay_ms / 1000
    with tempfile.TemporaryDirectory(prefix="rebalance-scale-") as tmp:
        base = Path(tmp)
        with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1") as broker, \
                Cluster(base, broker.bootstrap, tag=tag, settings=settings) as cluster:
            status_topic = settings["status.storage.topic"]
            workers = cluster.start(args.workers)
            leader = cluster.leader()
            # 1. create
            t0 = time.monotonic()
            for i in range(args.connectors):
                leader.ok("POST", "/connectors", {"name": f"idle-{i:04d}", "config": {
                    "connector.class": "DataGen", "topic": f"{tag}-idle", "tasks.max": str(args.tasks),
                    "max.records": "0"}}, expect=201)
            posted = time.monotonic() - t0
            ids = {w.worker_id for w in workers}
            before = wait_for(lambda: settled(cluster, expected, ids), 600, POLL_S, "all RUNNING", cluster.logs)
            created = time.monotonic() - t0
            t = time.monotonic()
            expand_status(leader)
            expand_ms = (time.monotonic() - t) * 1000
            print(f"create: {args.connectors} POSTs in {posted:.1f} s; all {expected} connectors+tasks RUNNING after "
                  f"{created:.1f} s; GET /connectors?expand=status {expand_ms:.0f} ms")
            loads = task_loads(before)
            print(f"  tasks per worker {sorted(loads.values())}; {generations(workers, -1)} generations so far")
            for w in workers:
                print("  " + proc_figures(w))

            # 2. kill
            leader = cluster.leader()
            victim = leader if args.victim == "leader" else next(w for w in workers if w is not leader)
            survivors = [w for w in workers if w is not victim]
            lost = sum(1 for (_, t), (_, wid) in before.items() if t >= 0 and wid == victim.worker_id)
            gen, mark = last_generation(survivors), status_marks(broker.bootstrap, status_topic)
            killed = time.monotonic()
            victim.kill()
            alive = {w.worker_id for w in survivors}
            after = wait_for(lambda: settled(cluster, expected, alive), 300, POLL_S, "RUNNING on survivors",
                             cluster.logs)
            elapsed = time.monotonic() - killed
            restarted = len(restarted_on_keepers(before, after, running_writes(broker.bootstrap, status_topic, mark)))
            moved = sum(1 for i, (_, wid) in after.items() if i[1] >= 0 and before[i][1] != wid)
            print(f"kill {args.victim} ({lost} tasks): all RUNNING on survivors after {elapsed:.1f} s (goal: session "
                  f"{session_s:.0f} s + delay {delay_s:.0f} s + 10 s = {session_s + delay_s + 10:.0f} s; "
                  f"{elapsed - session_s - delay_s:+.1f} s over session + delay); {generations(survivors, gen)} "
                  f"generations; tasks moved {moved}; restarted on survivors that kept them {restarted}")
            loads = task_loads(after)
            print(f"  tasks per worker {sorted(loads.values())}")

            # 3. join
            gen, mark = last_generation(survivors), status_marks(broker.bootstrap, status_topic)
            joined = time.monotonic()
            new = cluster.start(1)[0]
            ready = time.monotonic() - joined
            live = {w.worker_id for w in cluster.live}
            final = wait_for(lambda: settled(cluster, expected, live, balanced=True), 300, POLL_S, "balanced",
                             cluster.logs)
            elapsed = time.monotonic() - joined
            restarted = len(restarted_on_keepers(after, final, running_writes(broker.bootstrap, status_topic, mark)))
            to_new = sum(1 for i, (_, wid) in final.items() if i[1] >= 0 and wid == new.worker_id)
            moved = sum(1 for i, (_, wid) in final.items() if i[1] >= 0 and after[i][1] != wid)
            shares = balanced_shares({**loads, new.worker_id: 0}, args.connectors * args.tasks)
            ideal = sum(max(0, n - shares[wid]) for wid, n in loads.items())
            print(f"join: balanced after {elapsed:.1f} s (worker ready after {ready:.1f} s); "
                  f"{generations(cluster.live, gen)} generations; tasks moved {moved} (to the newcomer {to_new}, "
                  f"ideal {ideal}); restarted on workers that kept them {restarted}")
            loads = task_loads(final)
            print(f"  tasks per worker {sorted(loads.values())}")
            for w in cluster.live:
                print("  " + proc_figures(w))
            t = time.monotonic()
            expand_status(new)
            print(f"GET /connectors?expand=status {(time.monotonic() - t) * 1000:.0f} ms; "
                  f"load {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
