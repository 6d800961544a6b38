"""Produce-to-consume latency through the broker: the quick check to run before submitting (~30 s).

A confluent-kafka (librdkafka) producer process sends 100-byte records carrying their send time at
10,000 msg/s for 10 s (``linger.ms=0``, ``acks=1``); a confluent-kafka consumer process
(``fetch.min.bytes=1``, ``fetch.wait.max.ms=100``, ``poll()`` per message) computes receive - send.
The broker runs as its own process (tests/support/brokerproc.py's ``BrokerProcess``, temp log dir, default
settings: no ACL, no quota). The first second is warm-up and not counted. The workload pieces are
``bench/broker_throughput.py``'s latency run; this prints p50/p90/p99/max per run, and the cores
the broker and everything else took (the machine's cores are shared: "other" is load from outside).

``--against REV`` (repeatable) also starts a broker from another commit (its tree taken with
``git archive``) and alternates runs between them, so all see the same machine load; compare medians.

    make bench-latency
    python bench/latency.py --runs 3 --against main
    python bench/latency.py --profile /tmp/latency-profile    # py-spy on the broker during the runs
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import broker_throughput as bt

ROOT = Path(__file__).resolve().parent.parent
# The repository's top-level folders and the headwater.* packages they install as (setup.py's ROOTS)
PACKAGE_FOLDERS = ("broker", "connect", "connectors")


def source_tree(rev: str, into: Path) -> Path:
    """A directory to put on PYTHONPATH so that ``headwater`` imports commit ``rev`` of this repository:
    ``git archive`` of the commit, and a ``headwater/`` of links laid out as setup.py installs it."""
    src = into / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True,
                             check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--against {rev}: git archive failed: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(src, filter="data")
    if not (src / "headwater" / "__main__.py").exists():
        raise SystemExit(f"--against {rev}: that commit has no headwater/ package (older layout)")
    tree = into / "tree" / "headwater"
    tree.mkdir(parents=True)
    for item in (src / "headwater").iterdir():
        (tree / item.name).symlink_to(item)
    for folder in PACKAGE_FOLDERS:
        (tree / folder).symlink_to(src / folder)
    return tree.parent


@contextlib.contextmanager
def python_path(path: Path | None) -> Iterator[None]:
    """PYTHONPATH for the processes started inside (the broker); the clients never import headwater."""
    old = os.environ.get("PYTHONPATH")
    if path is not None:
        os.environ["PYTHONPATH"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def check_imports(name: str, tree: Path | None) -> None:
    """Fail unless a broker started here now would import ``headwater.broker`` from ``tree`` (None: the
    installed checkout), so that a comparison never measures one tree twice."""
    found = subprocess.run([sys.executable, "-c", "import headwater.broker as b; print(list(b.__path__)[0])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    want = (tree / "headwater" / "broker") if tree is not None else ROOT / "broker"
    if Path(found).resolve() != want.resolve():
        raise SystemExit(f"{name}: headwater.broker would come from {found}, not {want}")


def measure(broker: Any, args: argparse.Namespace, topic: str) -> dict[str, float]:
    """One latency run against ``broker``, with the cores it and the rest of the machine used."""
    pid = broker.proc.pid
    cpu0, sys0, t0 = bt._cpu_seconds(pid), bt._system_busy(), time.perf_counter()
    lat = bt.run_latency(broker.bootstrap, args.rate, args.seconds, args.record_size, args.warmup,
                         args.linger_ms, topic=topic)
    elapsed = time.perf_counter() - t0
    broker_cpu = bt._cpu_seconds(pid) - cpu0
    lat["broker_cores"] = broker_cpu / elapsed
    # the broker's CPU per request it answered: what the request path costs, whatever the machine's load
    lat["us_per_request"] = broker_cpu / max(1, lat["produce_requests"] + lat["consumer_requests"]) * 1e6
    others = bt._system_busy() - sys0 - broker_cpu
    lat["other_cores"] = max(0.0, others / elapsed - lat["producer_cores"] - lat["consumer_cores"])
    return lat


COLUMNS = ("p50", "p90", "p99", "max")
BUSY_CORES = 0.25  # more CPU than this taken by other processes during a run: its times are disturbed


def row(label: str, lat: dict[str, float]) -> str:
    figures = " ".join(f"{lat[c]:>8.2f}" for c in COLUMNS)
    requests = lat["produce_requests"] + lat["consumer_requests"]
    return (f"{label:<22} {figures} {lat['received']:>9,.0f} {requests:>9,.0f} {lat['us_per_request']:>7.1f} "
            f"{lat['broker_cores']:>7.2f} {lat['other_cores']:>6.2f}")


def report(runs: dict[str, list[dict[str, float]]], args: argparse.Namespace) -> None:
    print()
    print(f"latency: {args.rate:,} msg/s of {args.record_size} B for {args.seconds:g} s, linger.ms={args.linger_ms:g}, "
          f"acks=1, consumer fetch.wait.max.ms=100; first {args.warmup:g} s not counted; times in ms")
    print(f"{'run':<22} " + " ".join(f"{c:>8}" for c in COLUMNS)
          + f" {'received':>9} {'requests':>9} {'us/req':>7} {'broker':>7} {'other':>6}   (cores)")
    for name, lats in runs.items():
        for i, lat in enumerate(lats):
            print(row(f"{name} #{i + 1}", lat))
    busiest = max(lat["other_cores"] for lats in runs.values() for lat in lats)
    if busiest > BUSY_CORES:
        print(f"note: other processes took up to {busiest:.2f} cores during a run: the clients and the broker "
              "waited for CPU, so the times say as much about the machine as about the broker; compare trees "
              "with --against (same load), and us/req (the broker's CPU per request)")
    if args.runs > 1 or len(runs) > 1:
        print()
        for name, lats in runs.items():
            median = {k: statistics.median(lat[k] for lat in lats)
                      for k in (*COLUMNS, "received", "produce_requests", "consumer_requests", "us_per_request",
                                "broker_cores", "other_cores")}
            spread = ", ".join(f"{c} {min(lat[c] for lat in lats):.2f}-{max(lat[c] for lat in lats):.2f}"
                               for c in ("p50", "p99"))
            print(row(f"{name} median", median) + f"   range: {spread}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="runs per broker (alternating with --against)")
    parser.add_argument("--rate", type=int, default=10_000, help="messages per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each run")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds at the start of a run not counted")
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--linger-ms", type=float, default=0.0, help="the producer's linger.ms")
    parser.add_argument("--against", metavar="REV", action="append", default=[],
                        help="also measure the broker of this commit, alternating (may be repeated)")
    parser.add_argument("--profile", metavar="DIR", help="record the broker (this tree's) with py-spy during its runs")
    parser.add_argument("--profile-rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--wait-quiet", type=float, default=0, metavar="SECONDS",
                        help="before each run wait up to this long for the machine to be nearly idle")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker property override")
    args = parser.parse_args(argv)

    BrokerProcess = bt._load_broker_process()
    tmp = Path(tempfile.mkdtemp(prefix="hw-latency-"))
    overrides = ["num.partitions=1", "auto.create.topics.enable=false", *args.set]
    brokers: dict[str, Any] = {}
    try:
        trees: dict[str, Path | None] = {"this tree": None}
        for i, rev in enumerate(args.against):
            trees[rev] = source_tree(rev, tmp / f"against-{i}")
        for i, (name, tree) in enumerate(trees.items()):
            # from outside the checkout: `python -m` puts the working directory first on sys.path, where
            # this tree's headwater/ would win over PYTHONPATH's
            with python_path(tree), contextlib.chdir(tmp):
                check_imports(name, tree)
                brokers[name] = BrokerProcess(tmp / f"data-{i}", *overrides, log_file=tmp / f"broker-{i}.log").start()
            print(f"{name}: broker pid {brokers[name].proc.pid} on {brokers[name].bootstrap}", file=sys.stderr)
        spy = None
        if args.profile:
            out = Path(args.profile)
            out.mkdir(parents=True, exist_ok=True)
            raw = out / "latency-broker.txt"
            spy = bt.start_py_spy(brokers["this tree"].proc.pid, raw, args.profile_rate)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in brokers}
        for n in range(args.runs):
            for name, broker in brokers.items():
                if args.wait_quiet:
                    bt.wait_for_quiet(args.wait_quiet)
                lat = measure(broker, args, topic=f"latency-{n}")
                runs[name].append(lat)
                print(f"{name} #{n + 1}: p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms", file=sys.stderr)
        if spy is not None:
            bt.stop_py_spy(spy)
        report(runs, args)
        if spy is not None:
            print()
            print(f"py-spy profile of this tree's broker ({raw}):")
            for line in bt.summarize_collapsed(raw):
                print("  " + line)
    finally:
        for broker in brokers.values():
            try:
                broker.stop(30)
            except Exception:
                broker.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
