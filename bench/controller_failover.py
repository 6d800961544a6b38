"""Controller failover on ZooKeeper: how long a three-broker cluster has no agreed controller.

A standalone ZooKeeper (Debian's package, tests/support/zkserver.py) and three broker subprocesses with
``zookeeper.session.timeout.ms`` (default 6000). Each trial, with all three agreeing on the controller:

1. **kill**: SIGKILL the controller; the time until both survivors' Metadata (librdkafka, polled every
   50 ms) list the two of them and name the same new controller. ZooKeeper must first expire the dead
   session, so the session timeout is the floor: the figure beside it is the cost above it.
2. **rejoin**: restart the killed broker; the time from launch until all three list each other again
   (includes Python start-up).
3. **stop** (the anchor, same run): SIGTERM the controller; its session closes, so the others elect at once.
   Then restart it and wait until all three agree.

    .venv/bin/python bench/controller_failover.py [--trials 3] [--session-timeout-ms 6000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.brokerproc import BrokerProcess  # noqa: E402
from support.zkcluster import agreed_controller, cluster_broker  # noqa: E402
from support.zkserver import ZooKeeperServer, available  # noqa: E402

from headwater.testing import wait_until  # noqa: E402

POLL_S = 0.05
IDS = {1, 2, 3}


def _agreed(brokers: list[BrokerProcess], ids: set[int], timeout: float) -> tuple[int, float]:
    started = time.monotonic()
    controller = wait_until(lambda: agreed_controller(brokers, ids), f"brokers {sorted(ids)} agreeing on a controller",
                            timeout=timeout, interval=POLL_S)
    return controller, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    args = parser.parse_args()
    if (why := available()) is not None:
        print(why, file=sys.stderr)
        return 2
    timeout = args.session_timeout_ms / 1000 + 30
    kills: list[float] = []
    rejoins: list[float] = []
    stops: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zk:
        procs = {i: cluster_broker(Path(tmp), zk.connect + "/bench", i, args.session_timeout_ms) for i in IDS}
        try:
            for p in procs.values():
                p.start()
            controller, _ = _agreed(list(procs.values()), IDS, timeout)
            for _ in range(args.trials):
                for how, figures in (("kill", kills), ("stop", stops)):
                    victim_id, victim = controller, procs[controller]
                    survivors = [p for i, p in procs.items() if i != victim_id]
                    started = time.monotonic()
                    if how == "kill":
                        victim.kill()
                    else:
                        victim.stop()
                    controller, _ = _agreed(survivors, IDS - {victim_id}, timeout)
                    figures.append(time.monotonic() - started)
                    started = time.monotonic()
                    victim.start()
                    controller, _ = _agreed(list(procs.values()), IDS, timeout)
                    if how == "kill":
                        rejoins.append(time.monotonic() - started)
        finally:
            for p in procs.values():
                p.kill()
    load = os.getloadavg()[0]
    print(f"session timeout {args.session_timeout_ms} ms, {args.trials} trials, load (1 min) {load:.1f}")
    for name, figures in (("SIGKILL -> new controller agreed", kills), ("SIGTERM -> new controller agreed", stops),
                          ("restart -> rejoined in every Metadata", rejoins)):
        print(f"{name:40s} median {statistics.median(figures):5.2f} s  max {max(figures):5.2f} s  "
              f"({', '.join(f'{f:.2f}' for f in figures)})")
    print(f"kill above the session timeout: median "
          f"{statistics.median(kills) - args.session_timeout_ms / 1000:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
