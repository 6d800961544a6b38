"""``tune_malloc``: record-heavy processes keep buffers of a few megabytes in the heap (reused) instead of
mapping fresh pages for each, under glibc; a user's own malloc settings are left alone."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GLIBC = (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")

# a fresh interpreter: allocate a 4 MiB buffer, print the bytes glibc holds in mmapped chunks (mallinfo2)
# and whether tune_malloc applied its thresholds first
PROBE = """
import ctypes, sys
from headwater.process import tune_malloc
applied = tune_malloc() if sys.argv[1] == "tune" else None
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
before = mallinfo2().hblkhd
buffer = bytearray(4 << 20)
print(applied, mallinfo2().hblkhd - before)
"""


def probe(mode: str, **env: str) -> tuple[str, int]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    out = subprocess.run([sys.executable, "-c", PROBE, mode], env={**clean, **env}, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_big_buffers_come_from_the_heap_once_tuned() -> None:
    assert probe("plain") == ("None", pytest.approx(4 << 20, rel=0.01))  # glibc's default: mapped afresh
    assert probe("tune") == ("True", 0)  # from the heap: freed buffers are reused, no page faults


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_the_users_own_malloc_settings_are_kept() -> None:
    tunables = "glibc.malloc.mmap_threshold=131072"
    assert probe("tune", GLIBC_TUNABLES=tunables) == ("False", pytest.approx(4 << 20, rel=0.01))
    assert probe("tune", MALLOC_ARENA_MAX="2")[0] == "False"
