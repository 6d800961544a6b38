"""Benchmark: a 3-member consumer group reading 1,000,000 records from 6 partitions.

Loads the topic with kcat (librdkafka, so the load is not limited by a Python loop),
then starts three confluent-kafka consumer processes in one group and times from their
start until, together, they have consumed every record (join and the initial rebalance delay included),
and from the first record to the last.
Prints a table; not a test.

    .venv/bin/python bench/group_consume.py [--records 1000000] [--members 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.brokerproc import BrokerProcess  # noqa: E402

CONSUMER = r"""
import json, sys, time
from confluent_kafka import Consumer
bootstrap, topic, group, expected = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": True, "partition.assignment.strategy": "roundrobin",
              "fetch.wait.max.ms": 50})
c.subscribe([topic])
count, first, last, idle_since = 0, None, None, None
assigned = set()
deadline = time.time() + 120
while time.time() < deadline:
    msgs = c.consume(10000, 0.2)
    if msgs:
        first = first or time.time()
        count += sum(1 for m in msgs if not m.error())
        last = time.time()
        idle_since = None
        for m in msgs:
            assigned.add(m.partition())
    else:
        idle_since = idle_since or time.time()
        if count and time.time() - idle_since > 2:
            break
c.close()
print(json.dumps({"count": count, "first": first, "last": last, "partitions": sorted(assigned)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "lines.txt"
        with open(data, "w") as f:
            for i in range(args.records):
                f.write(f"{i:010d}" + "x" * 89 + "\n")
        # Kafka's default initial rebalance delay (3 s) lets all members join the first generation,
        # so no partition is read twice by members that came late.
        with BrokerProcess(Path(tmp) / "data", f"num.partitions={args.partitions}",
                           "group.initial.rebalance.delay.ms=3000") as broker:
            topic = "group-bench"
            subprocess.run(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "-1", "-l", str(data),
                            "-X", "linger.ms=5", "-X", "batch.size=1048576",
                            "-X", "queue.buffering.max.messages=2000000"],
                           check=True)
            start = time.time()
            procs = [subprocess.Popen([sys.executable, "-c", CONSUMER, broker.bootstrap, topic, "bench-group",
                                       str(args.records)], stdout=subprocess.PIPE, text=True)
                     for _ in range(args.members)]
            results = [json.loads(p.communicate(timeout=180)[0].strip().splitlines()[-1]) for p in procs]
        total = sum(r["count"] for r in results)
        done = max(r["last"] for r in results if r["last"])
        first = min(r["first"] for r in results if r["first"])
        print("| members | records consumed | partitions per member | start→all consumed | records/s (start→done) "
              "| records/s (first→last record) |")
        print("|---|---|---|---|---|---|")
        print(f"| {args.members} | {total:,} | {[len(r['partitions']) for r in results]} | {done - start:.2f} s "
              f"| {total / (done - start):,.0f} | {total / max(done - first, 1e-9):,.0f} |")
        if total < args.records:
            print(f"MISSING: {args.records - total} records were not consumed")


if __name__ == "__main__":
    main()
