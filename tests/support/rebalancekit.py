"""Where every connector and task of a distributed cluster runs, and who restarted what: for the rebalance
test and bench/rebalance_scale.py.

``GET /connectors?expand=status`` gives one worker's view of every connector and task at once; the status
topic tells, record by record, which worker wrote RUNNING for which task (a worker writes it each time it
starts the task), so a task stopped and started again by the worker that keeps it shows as a second RUNNING.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from .workerproc import Cluster, WorkerProcess, read_topic

__all__ = ["Placement", "expand_status", "placement_of_all", "restarted_on_keepers", "running_writes",
           "settled", "status_marks", "task_loads"]

Placement = dict[tuple[str, int], tuple[str, str]]  # (connector, task) -> (state, worker id); task -1: connector


def expand_status(worker: WorkerProcess, timeout: float = 30) -> dict[str, Any] | None:
    """``GET /connectors?expand=status`` on ``worker`` (None: the call failed)."""
    try:
        resp = worker.call("GET", "/connectors?expand=status", timeout=timeout)
    except OSError:
        return None
    return resp.json if resp.status == 200 else None


def placement_of_all(answer: dict[str, Any]) -> Placement:
    out: Placement = {}
    for name, entry in answer.items():
        st = entry["status"]
        out[(name, -1)] = (st["connector"]["state"], st["connector"]["worker_id"])
        for t in st["tasks"]:
            out[(name, t["id"])] = (t["state"], t["worker_id"])
    return out


def task_loads(placement: Placement) -> Counter[str]:
    """Tasks (not connectors) per worker id."""
    return Counter(wid for (_, t), (_, wid) in placement.items() if t >= 0)


def settled(cluster: Cluster, expected: int, allowed: set[str], balanced: bool = False) -> Placement | None:
    """The placement once every live worker reports ``expected`` connectors and tasks, all RUNNING on
    ``allowed`` workers, the same on every worker (and, with ``balanced``, tasks spread within one over
    ``allowed``); None until then."""
    seen = []
    for w in cluster.live:
        answer = expand_status(w, timeout=10)
        if answer is None:
            return None
        seen.append(placement_of_all(answer))
    if not seen:
        return None
    first = seen[0]
    if len(first) != expected or any(s != first for s in seen[1:]):
        return None
    if any(state != "RUNNING" or wid not in allowed for state, wid in first.values()):
        return None
    if balanced:
        loads = task_loads(first)
        if set(loads) != allowed or max(loads.values()) - min(loads.values()) > 1:
            return None
    return first


def status_marks(bootstrap: str, topic: str) -> dict[int, int]:
    """Each status partition's end now: records after it came later."""
    ends: dict[int, int] = {}
    for partition, offset, _, _ in read_topic(bootstrap, topic):
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    return ends


def running_writes(bootstrap: str, topic: str, since: dict[int, int]) -> list[tuple[tuple[str, int], str]]:
    """(task, worker id) of each RUNNING task status written after ``since`` (``status_marks``)."""
    out = []
    for partition, offset, key, value in sorted(read_topic(bootstrap, topic)):
        if offset < since.get(partition, 0) or key is None or value is None:
            continue
        k = key.decode()
        if not k.startswith("status-task-"):
            continue
        name, _, num = k[len("status-task-"):].rpartition("-")
        v = json.loads(value)
        if v.get("state") == "RUNNING":
            out.append(((name, int(num)), v["worker_id"]))
    return out


def restarted_on_keepers(before: Placement, after: Placement, writes: list[tuple[tuple[str, int], str]]) -> set[
        tuple[str, int]]:
    """Tasks run by the same worker before and after, which that worker started again in between."""
    return {item for item, wid in writes
            if before.get(item, ("", ""))[1] == wid == after.get(item, ("", ""))[1]}
