"""Cluster topics on ZooKeeper at scale: creating many replicated partitions and moving their leaders.

A standalone ZooKeeper (Debian's package, tests/support/zkserver.py) and three broker subprocesses with
``zookeeper.session.timeout.ms`` (default 4000):

1. **create**: CreateTopics for a topic of N partitions with replication factor 3 (confluent-kafka's
   AdminClient); the time until it answers (every partition led in that broker's view) and until every
   broker's Metadata (v8, polled) has a leader for all N. The anchor, same run: a 1-partition RF 3 topic.
2. **kill**: SIGKILL broker 2; the time until both survivors' Metadata show every partition of each topic
   led by a survivor with broker 2 out of its ISR. Both topics are watched through the same kill, so the
   1-partition topic's time (the session timeout plus the controller's reaction) is the anchor and the
   difference is the cost of moving N partitions.
3. **restart**: broker 2 started again; the time until its Metadata has all N partitions.

    .venv/bin/python bench/cluster_topics.py [--partitions 2000] [--session-timeout-ms 4000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from support.brokerproc import BrokerProcess  # noqa: E402
from support.zkcluster import agreed_controller, cluster_broker, topic_view  # noqa: E402
from support.zkserver import ZooKeeperServer, available  # noqa: E402

from headwater.testing import wait_until  # noqa: E402

IDS = {1, 2, 3}


def _all_led(brokers: list[BrokerProcess], topic: str, count: int, dead: int | None = None) -> bool:
    for b in brokers:
        view = topic_view(b, topic)
        if view is None or len(view) != count:
            return False
        if any(p[0] < 0 or p[0] == dead or (dead is not None and dead in p[3]) for p in view.values()):
            return False
    return True


def _create(admin: AdminClient, topic: str, partitions: int) -> float:
    started = time.monotonic()
    next(iter(admin.create_topics([NewTopic(topic, partitions, 3)], operation_timeout=300).values())).result(330)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=2000)
    parser.add_argument("--session-timeout-ms", type=int, default=4000)
    args = parser.parse_args()
    if (why := available()) is not None:
        print(why, file=sys.stderr)
        return 2
    n = args.partitions
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zk:
        procs = {i: cluster_broker(Path(tmp), zk.connect + "/bench", i, args.session_timeout_ms) for i in IDS}
        try:
            for p in procs.values():
                p.start()
            every = list(procs.values())
            wait_until(lambda: agreed_controller(every, IDS), "three brokers", timeout=60)
            admin = AdminClient({"bootstrap.servers": procs[1].bootstrap})
            print(f"load before: {os.getloadavg()[0]:.1f}")
            small = _create(admin, "anchor", 1)
            wait_until(lambda: _all_led(every, "anchor", 1), "anchor led", timeout=60)
            started = time.monotonic()
            answered = _create(admin, "big", n)
            wait_until(lambda: _all_led(every, "big", n), "every partition led everywhere", timeout=600, interval=0.2)
            everywhere = time.monotonic() - started
            print(f"create: 1 partition answered in {small:.2f} s (anchor); {n} partitions answered in "
                  f"{answered:.2f} s, in every broker's Metadata after {everywhere:.2f} s")

            survivors = [procs[1], procs[3]]
            killed = procs[2]
            done: dict[str, float] = {}
            started = time.monotonic()
            killed.kill()

            def moved() -> bool:
                for topic, count in (("anchor", 1), ("big", n)):
                    if topic not in done and _all_led(survivors, topic, count, dead=2):
                        done[topic] = time.monotonic() - started
                return len(done) == 2
            wait_until(moved, "every leader moved off broker 2", timeout=args.session_timeout_ms / 1000 + 600,
                       interval=0.1)
            print(f"SIGKILL of broker 2 (session timeout {args.session_timeout_ms} ms): 1 partition moved in "
                  f"{done['anchor']:.2f} s (anchor); {n} partitions in {done['big']:.2f} s "
                  f"(+{done['big'] - done['anchor']:.2f} s)")

            started = time.monotonic()
            killed.start()
            wait_until(lambda: (v := topic_view(killed, "big")) is not None and len(v) == n, "restarted view",
                       timeout=600, interval=0.2)
            print(f"restart of broker 2 until its Metadata has all {n} partitions: {time.monotonic() - started:.2f} s")
            print(f"load after: {os.getloadavg()[0]:.1f}")
        finally:
            for p in procs.values():
                p.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
