"""Printing results: aligned tables for people, JSON for scripts, progress on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["fail", "print_json", "progress", "table"]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Columns as wide as their widest cell; numbers right-aligned, as kafka-consumer-groups prints them."""
    cells = [[("-" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [all(isinstance(row[i], int) and not isinstance(row[i], bool) or row[i] is None for row in rows)
               and bool(rows) for i in range(len(headers))]
    for row in [list(headers)] + cells:
        print("  ".join((c.rjust(w) if num else c.ljust(w)) for c, w, num in zip(row, widths, numeric, strict=True))
              .rstrip())


def print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


def progress(done: int, total: int, what: str) -> None:
    """A progress line on stderr that rewrites itself (a terminal) or is printed every 10% (a file)."""
    if total <= 0:
        return
    if sys.stderr.isatty():
        print(f"\r{what}: {done}/{total}", end="\n" if done >= total else "", file=sys.stderr, flush=True)
    elif done == total or done % max(1, total // 10) == 0:
        print(f"{what}: {done}/{total}", file=sys.stderr, flush=True)


def fail(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code
