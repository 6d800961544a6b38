"""Small broker state (topic metadata, ACLs, client quotas) kept as JSON files in the log directory, each
replaced atomically on every change: written beside, fsynced, renamed over, and the directory fsynced, so
a crash leaves either the old file or the new one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["read_json", "write_json"]


def read_json(path: Path) -> Any:
    """The file's JSON, or None when it does not exist."""
    if not path.exists():
        return None
    return json.loads(path.read_text())


def write_json(path: Path, data: Any, mode: int = 0o666) -> None:
    """Replace ``path`` with ``data``; ``mode`` applies from the file's creation on, so a secret is never
    readable by others even for a moment (the default leaves it to the umask)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    if mode != 0o666:
        os.fchmod(fd, mode)  # a leftover of a crash keeps the permissions it was created with
    with open(fd, "w") as f:
        # One-shot and compact, so the C encoder writes it: json.dump (or any indent) takes the pure-Python
        # encoder, which made each topic created cost time in proportion to the topics already there.
        f.write(json.dumps(data, sort_keys=True, separators=(",", ":")))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
