"""Producer ids for idempotent producers.

Ids are reserved in blocks: the end of the current block is persisted before any id
from it is handed out, so a restart resumes past every id ever given.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ProducerIdManager"]

BLOCK = 1000


class ProducerIdManager:
    def __init__(self, log_dir: Path) -> None:
        self.path = log_dir / "producer-id-block"
        self._next = int(self.path.read_text()) if self.path.exists() else 0
        self._block_end = self._next

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                f.write(str(self._block_end))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        pid = self._next
        self._next += 1
        return pid
