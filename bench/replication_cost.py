"""What replication costs a producer: ``acks=all`` to three brokers with replication factor 3 against
``acks=1`` to one broker, same records, same run (prints a table; not a test).

- **single** (the anchor): one broker, no ZooKeeper; a topic of ``--partitions`` partitions; a librdkafka
  producer with ``acks=1``.
- **rf3**: a standalone ZooKeeper (Debian's package, tests/support/zkserver.py) and three brokers; the same
  topic with replication factor 3 and ``min.insync.replicas=2``; the producer with ``acks=all`` (and
  idempotence, as Kafka's producers default to).

Each round produces ``--records`` records of ``--size`` bytes (librdkafka's defaults otherwise: linger 5 ms,
batches up to 1 MB), timed from the first produce() to the last acknowledgement; the rounds alternate. Beside
each rate: CPU seconds of each broker, ZooKeeper and the producer (this process) over the round, and
the share of the machine everything else used.

    .venv/bin/python bench/replication_cost.py [--records 500000] [--size 100] [--partitions 6] [--rounds 2]
        [--broker-config KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from broker_throughput import _cpu_seconds, _system_busy
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.brokerproc import BrokerProcess  # noqa: E402
from support.zkcluster import agreed_controller, agreed_topic, cluster_broker  # noqa: E402
from support.zkserver import ZooKeeperServer, available  # noqa: E402

from headwater.testing import unique, wait_until  # noqa: E402

IDS = {1, 2, 3}


def produce(bootstrap: str, topic: str, records: int, size: int, acks: str) -> float:
    """Seconds from the first produce() to the last acknowledgement; raises when a record failed."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": acks == "all",
                         "queue.buffering.max.messages": 1_000_000})
    failed: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(str(err))
    value = b"x" * size
    started = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    left = producer.flush(120)
    took = time.monotonic() - started
    if failed or left:
        raise RuntimeError(f"{len(failed)} records failed ({failed[:3]}), {left} not delivered")
    return took


def measure(name: str, bootstrap: str, topic: str, args: argparse.Namespace, acks: str,
            pids: dict[str, int]) -> dict[str, float]:
    cpu0 = {k: _cpu_seconds(p) for k, p in pids.items()}
    busy0 = _system_busy()
    took = produce(bootstrap, topic, args.records, args.size, acks)
    busy = _system_busy() - busy0
    cpu = {k: _cpu_seconds(p) - cpu0[k] for k, p in pids.items()}
    ours = sum(cpu.values())
    row = {"rate": args.records / took, "seconds": took, **{f"cpu {k}": v for k, v in cpu.items()},
           "others": max(busy - ours, 0) / took / 2}
    split = ", ".join(f"{k} {v:.2f} s" for k, v in cpu.items())
    print(f"  {name}: {row['rate']:,.0f} rec/s ({took:.2f} s); CPU {split}; "
          f"everything else {row['others']:.0%} of the 2 cores", flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a property of the three brokers (repeatable), e.g. "
                             "max.incremental.fetch.session.cache.slots=0 for full follower fetches")
    args = parser.parse_args()
    if (why := available()) is not None:
        print(why, file=sys.stderr)
        return 2
    single_rates: list[float] = []
    rf3_rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, ZooKeeperServer(Path(tmp) / "zk") as zk:
        single = BrokerProcess(Path(tmp) / "single").start()
        brokers = {i: cluster_broker(Path(tmp), zk.connect + "/bench", i, args.session_timeout_ms, *args.broker_config)
                   for i in IDS}
        try:
            every = [b.start() for b in brokers.values()]
            wait_until(lambda: agreed_controller(every, IDS), "three brokers and a controller", timeout=30)
            cluster_bootstrap = ",".join(b.bootstrap for b in every)
            assert single.proc is not None and zk.proc is not None
            for r in range(args.rounds):
                print(f"round {r + 1}", flush=True)
                topic = unique("single")
                admin = AdminClient({"bootstrap.servers": single.bootstrap})
                admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
                single_rates.append(measure("acks=1, one broker", single.bootstrap, topic, args, "1",
                                            {"broker": single.proc.pid, "producer": os.getpid()})["rate"])
                topic = unique("rf3")
                admin = AdminClient({"bootstrap.servers": cluster_bootstrap})
                admin.create_topics([NewTopic(topic, args.partitions, 3, config={"min.insync.replicas": "2"})]
                                    )[topic].result(30)
                wait_until(lambda t=topic: agreed_topic(every, t, lambda v: len(v) == args.partitions  # type: ignore[misc]
                                                        and all(len(p[3]) == 3 for p in v.values())),
                           "the replicated topic on every broker", timeout=30)
                pids = {f"broker {i}": b.proc.pid for i, b in brokers.items() if b.proc is not None}
                pids["zookeeper"] = zk.proc.pid
                pids["producer"] = os.getpid()
                rf3_rates.append(measure("acks=all, RF 3 on three brokers", cluster_bootstrap, topic, args, "all",
                                         pids)["rate"])
        finally:
            single.kill()
            for b in brokers.values():
                b.kill()
    one, rf3 = statistics.median(single_rates), statistics.median(rf3_rates)
    print(f"\nmedian: acks=1 one broker {one:,.0f} rec/s; acks=all RF 3 {rf3:,.0f} rec/s; "
          f"ratio {rf3 / one:.2f} (goal >= 0.4)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
