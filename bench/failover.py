"""Failover benchmark: how long a killed worker's tasks stay down, and how long a new worker waits for work.

A broker subprocess and 3 distributed workers (subprocesses) run a DataGen connector with
``tasks.max=6`` (two tasks per worker). Each trial:

1. SIGKILL a worker that runs tasks (chosen at random, seeded; it may be the group leader) and poll
   ``GET /connectors/<c>/status`` on a survivor every 50 ms until all 6 tasks are RUNNING on live
   workers: the **failover** time.
2. Start a replacement worker and poll until it runs at least one task: the **join** time, counted from
   the process launch (so it includes Python start-up, reading the internal topics and joining the
   group; the part until the worker's "REST API at" line, printed once it has joined, is shown apart).
3. Wait for the 2/2/2 balance before the next trial.

Runs: ``shipped`` -- configs/worker-distributed.properties as shipped, overriding only bootstrap.servers,
listeners, group.id and plugin.path (session.timeout.ms=3000, heartbeat.interval.ms=500,
scheduled.rebalance.max.delay.ms=1000); ``slower`` -- the same with session.timeout.ms=6000,
heartbeat.interval.ms=1000 and scheduled.rebalance.max.delay.ms=3000. The broker allows sessions down to
1 s (group.min.session.timeout.ms=1000) and forms a new group without delay
(group.initial.rebalance.delay.ms=0); each run gets a fresh broker.

    .venv/bin/python bench/failover.py [--trials 10] [--runs shipped,fast] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.brokerproc import BrokerProcess  # noqa: E402
from support.workerproc import BROKER_OVERRIDES, Cluster, WorkerProcess, tasks_per_worker  # noqa: E402

TASKS = 6
POLL_S = 0.05
RUNS = {
    "shipped": {},
    "slower": {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1000",
               "scheduled.rebalance.max.delay.ms": "3000"},
}
TIMING_KEYS = ("session.timeout.ms", "heartbeat.interval.ms", "scheduled.rebalance.max.delay.ms")


def _settings(overrides: dict[str, str]) -> str:
    """The three timings a run uses: the shipped worker file, then the run's overrides."""
    shipped = {}
    for line in (ROOT / "configs" / "worker-distributed.properties").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            shipped[key.strip()] = value.strip()
    merged = {**shipped, **overrides}
    return " / ".join(merged.get(k, "?") for k in TIMING_KEYS)


@dataclass
class Trial:
    victim_role: str
    failover_s: float
    join_s: float
    startup_s: float


def _status(worker: WorkerProcess) -> dict[str, Any] | None:
    return worker.status("gen")


def _poll(cluster: Cluster, done: Any, timeout: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for w in cluster.live:
            st = _status(w)
            if st is not None:
                if done(st):
                    return st
                break
        time.sleep(POLL_S)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}\n{cluster.logs()}")


def _all_running_on(st: dict[str, Any], live: set[str]) -> bool:
    return len(st["tasks"]) == TASKS and all(t["state"] == "RUNNING" and t["worker_id"] in live for t in st["tasks"])


def _balanced(cluster: Cluster) -> dict[str, Any]:
    live = {w.worker_id for w in cluster.live}
    return _poll(cluster, lambda st: _all_running_on(st, live) and set(tasks_per_worker(st)) == live
                 and sorted(tasks_per_worker(st).values()) == [2, 2, 2], 60, "a 2/2/2 balance")


def run(name: str, extra: dict[str, str], trials: int, seed: int) -> list[Trial]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix=f"failover-{name}-") as tmp:
        base = Path(tmp)
        with BrokerProcess(base / "data", *BROKER_OVERRIDES, "num.partitions=1") as broker:
            cluster = Cluster(base, broker.bootstrap, tag=f"bench-{name}", settings={"group.id": f"bench-{name}",
                                                                                    **extra})
            with cluster:
                cluster.start(3)
                cluster.leader().ok("POST", "/connectors", {"name": "gen", "config": {
                    "connector.class": "DataGen", "topic": "bench-gen", "tasks.max": str(TASKS),
                    "rate.per.sec": "10"}}, expect=201)
                st = _balanced(cluster)
                out: list[Trial] = []
                for i in range(trials):
                    leader = cluster.leader()
                    running = sorted(tasks_per_worker(st))
                    victim = cluster.by_id(rng.choice(running))
                    role = "leader" if victim is leader else "follower"
                    killed_at = time.monotonic()
                    victim.kill()
                    live = {w.worker_id for w in cluster.live}
                    _poll(cluster, lambda s, live=live: _all_running_on(s, live), 120, "failover")
                    failover = time.monotonic() - killed_at

                    new = cluster.new_worker().launch()
                    launched = new.started_at
                    new.wait_ready()
                    ready_at = time.monotonic()
                    _poll(cluster, lambda s, wid=new.worker_id: tasks_per_worker(s).get(wid, 0) >= 1, 120,
                          "the new worker to run a task")
                    join = time.monotonic() - launched
                    trial = Trial(role, failover, join, ready_at - launched)
                    out.append(trial)
                    print(f"{name} trial {i + 1}: killed {role} {victim.worker_id}: failover {failover:.2f}s; "
                          f"replacement runs a task {join:.2f}s after launch (ready line at {trial.startup_s:.2f}s)",
                          flush=True)
                    st = _balanced(cluster)
                    time.sleep(0.5)
                return out


def _row(name: str, settings: str, trials: list[Trial]) -> str:
    f = [t.failover_s for t in trials]
    j = [t.join_s for t in trials]
    s = [t.startup_s for t in trials]
    roles = sum(t.victim_role == "leader" for t in trials)
    return (f"| {name} | {settings} | {len(trials)} ({roles} leader) | {statistics.median(f):.2f} | {max(f):.2f} | "
            f"{statistics.median(j):.2f} | {max(j):.2f} | {statistics.median(s):.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--runs", default="shipped,slower")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    results: dict[str, list[Trial]] = {}
    for name in args.runs.split(","):
        results[name] = run(name, RUNS[name], args.trials, args.seed)
    print()
    print("| run | session / heartbeat / max delay (ms) | trials (killed leader) | failover median s | failover max s "
          "| join median s | join max s | start-up median s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, trials in results.items():
        settings = _settings(RUNS[name])
        print(_row(name, settings, trials))
    for name, trials in results.items():
        for role in ("follower", "leader"):
            f = [t.failover_s for t in trials if t.victim_role == role]
            if f:
                print(f"{name}: killed {role}: n={len(f)} failover median {statistics.median(f):.2f}s "
                      f"max {max(f):.2f}s")


if __name__ == "__main__":
    main()
