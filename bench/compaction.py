"""Compaction benchmark: clean a compacted partition log in-process and print a table.

1M records over 100k keys (100 records per batch, ~100-byte values, random keys), written to a
PartitionLog with 8 MiB segments, then one cleaner pass (``clean_partition``) is timed;
then 20% more updates are appended and the incremental pass (clean part + new dirty part)
is timed. Reported: input MB/s (bytes of the segments read and rewritten per second),
records/s, sizes and segment counts before and after.

    .venv/bin/python bench/compaction.py [--records N] [--keys K] [--codec none,lz4,...]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from headwater.broker.config.broker_config import TopicConfig
from headwater.broker.log import PartitionLog
from headwater.broker.log.cleaner import clean_partition
from headwater.kafka.compression import CODEC_IDS
from headwater.kafka.records import Record, build_batch, parse_header

BATCH = 100
SEGMENT_BYTES = 8 << 20
T0 = 1_700_000_000_000


def fill(log: PartitionLog, n: int, keys: int, codec: int, rng: random.Random, tag: str) -> float:
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        # Values: a counter plus 40 random bytes as hex (compresses about 2:1, like real payloads).
        records = [
            Record(offset=i, timestamp=T0 + start + i, key=b"key-%06d" % rng.randrange(keys),
                   value=b"%s-%09d-" % (tag.encode(), start + i) + rng.randbytes(40).hex().encode())
            for i in range(min(BATCH, n - start))
        ]
        batch = bytearray(build_batch(records, codec=codec))
        log.append(batch, parse_header(batch))
    return time.perf_counter() - started


def run(records: int, keys: int, codec_name: str, directory: Path) -> list[tuple]:
    codec = CODEC_IDS[codec_name]
    config = TopicConfig(**{"cleanup.policy": "compact", "segment.bytes": SEGMENT_BYTES})
    path = directory / f"bench-{codec_name}"
    log = PartitionLog.open(path, config, clock=lambda: T0)
    rng = random.Random(42)
    fill(log, records, keys, codec, rng, "a")
    rows = []
    for label, extra in (("full", 0), ("incremental", records // 5)):
        if extra:
            fill(log, extra, keys, codec, rng, "b")
        size_before, segs_before = log.size_bytes, len(log.segments)
        result = clean_partition(log, T0, force=True)  # the dirty ratio is reported, not required
        assert result is not None and result.committed
        rows.append((
            codec_name, label, f"{result.dirty_ratio:.2f}", f"{result.records_read:,}",
            f"{result.bytes_before / 1e6:.1f}",
            f"{log.size_bytes / 1e6:.1f}", f"{size_before / 1e6:.1f}", f"{segs_before} -> {len(log.segments)}",
            f"{result.records_kept:,}", f"{result.seconds:.2f}", f"{result.mb_per_s:.1f}",
            f"{result.records_read / result.seconds / 1e3:.0f}k",
        ))
    log.close()
    shutil.rmtree(path, ignore_errors=True)
    return rows


HEADERS = ("codec", "pass", "dirty ratio", "records cleaned", "MB cleaned", "log MB after", "log MB before", "segments",
           "records kept", "seconds", "MB/s", "records/s")


def print_table(rows: list[tuple]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(HEADERS, *rows, strict=True)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--codec", default="none,lz4")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the logs (default: a temp dir)")
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="hw-compaction-"))
    rows = []
    for codec in args.codec.split(","):
        rows += run(args.records, args.keys, codec, directory)
    print(f"{args.records:,} records over {args.keys:,} keys, {BATCH} records/batch, "
          f"segment.bytes={SEGMENT_BYTES >> 20} MiB; incremental = +{args.records // 5:,} updates")
    print_table(rows)
    if args.dir is None:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
