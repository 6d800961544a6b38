"""TLS against plaintext on one broker (prints a table; not a test).

One broker with a PLAINTEXT and an SSL listener (tests/support/securebroker.py: certificates made on the
spot, TLS 1.3). In the same run, alternating listener by listener to share the machine's state fairly:

- produce: N records of ``--record-size`` bytes with kcat (acks=1, linger.ms=5, batch.size=1 MiB) into a
  topic of its own per round, timed from kcat's start to its exit, then the end offset checked;
- consume: the same records read back with ``kcat -C -o beginning -c N -e``, timed the same way.

MB/s is record bytes over wall time; the ratio is TLS over plaintext (goal: at least 0.6). Each phase waits
up to ``--wait-quiet`` seconds for the machine to be idle first (it may be shared).

    python bench/tls.py                    # 200k records of 1 KiB, 3 rounds
    python bench/tls.py --records 50000 --repeat 1
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from broker_throughput import wait_for_quiet  # noqa: E402
from support.securebroker import SecureBroker, start_secure_broker  # noqa: E402

KCAT = shutil.which("kcat") or "/usr/bin/kcat"
KCAT_PRODUCE = ["-X", "linger.ms=5", "-X", "batch.size=1048576", "-X", "acks=1",
                "-X", "queue.buffering.max.kbytes=1048576"]


def _kcat(secure: SecureBroker, listener: str) -> list[str]:
    conf = secure.confluent(listener)
    args = [KCAT, "-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        args += ["-X", f"{k}={v}"]
    return args


def _end_offset(secure: SecureBroker, topic: str) -> int:
    done = subprocess.run([*_kcat(secure, "PLAINTEXT"), "-Q", "-t", f"{topic}:0:-1"], capture_output=True,
                          text=True, timeout=60, check=True)
    return int(done.stdout.split()[-1])


def _round(secure: SecureBroker, listener: str, payload: Path, records: int, quiet: float) -> tuple[float, float]:
    """(produce seconds, consume seconds) over ``listener``."""
    topic = f"tls-bench-{listener.lower()}-{time.monotonic_ns()}"
    args = _kcat(secure, listener)
    wait_for_quiet(quiet)
    started = time.perf_counter()
    with payload.open("rb") as data:
        subprocess.run([*args, *KCAT_PRODUCE, "-P", "-t", topic, "-p", "0"], stdin=data, check=True, timeout=600,
                       capture_output=True)
    produced = time.perf_counter() - started
    assert _end_offset(secure, topic) == records, "records missing after produce"
    wait_for_quiet(quiet)
    started = time.perf_counter()
    done = subprocess.run([*args, "-C", "-t", topic, "-o", "beginning", "-c", str(records), "-e", "-q", "-f", "\\n"],
                          check=True, timeout=600, capture_output=True)
    consumed = time.perf_counter() - started
    assert done.stdout.count(b"\n") == records, "records missing after consume"
    return produced, consumed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wait-quiet", type=float, default=20.0)
    args = parser.parse_args()
    mb = args.records * args.record_size / 1e6
    with tempfile.TemporaryDirectory(prefix="hw-tls-bench-") as tmp:
        payload = Path(tmp) / "records"
        line = b"x" * (args.record_size - 1) + b"\n"  # kcat splits on newlines: record_size - 1 bytes each
        payload.write_bytes(line * args.records)
        secure = start_secure_broker(Path(tmp))
        try:
            times: dict[str, list[tuple[float, float]]] = {"PLAINTEXT": [], "SSL": []}
            for _ in range(args.repeat):
                for listener in ("PLAINTEXT", "SSL"):
                    times[listener].append(_round(secure, listener, payload, args.records, args.wait_quiet))
        finally:
            secure.proc.stop()
    print(f"{args.records} records of {args.record_size} B ({mb:.1f} MB), {args.repeat} rounds, median; "
          f"load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    print(f"{'phase':<9}{'PLAINTEXT MB/s':>16}{'SSL MB/s':>12}{'SSL/PLAINTEXT':>15}")
    for index, phase in enumerate(("produce", "consume")):
        plain = mb / statistics.median(t[index] for t in times["PLAINTEXT"])
        tls = mb / statistics.median(t[index] for t in times["SSL"])
        print(f"{phase:<9}{plain:>16.1f}{tls:>12.1f}{tls / plain:>15.2f}")


if __name__ == "__main__":
    main()
