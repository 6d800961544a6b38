"""Source-offset stores. Keys are Kafka Connect's: the JSON array ``["<connector>", {partition}]``;
values are the offset map as JSON. The file store backs standalone mode; the Kafka
store (``connect-offsets`` topic) backs distributed mode."""

from __future__ import annotations

import asyncio
import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..api.errors import ConnectException

__all__ = ["FileOffsetStore", "MemoryOffsetStore", "OffsetStore", "offset_key", "offset_value", "parse_offset_key"]


def offset_key(connector: str, partition: dict[str, Any]) -> str:
    return json.dumps([connector, partition], separators=(",", ":"), sort_keys=True)


def offset_value(offset: dict[str, Any] | None) -> bytes | None:
    """An offset as the offsets topic holds it: compact JSON (None: a tombstone, the offset reset)."""
    return None if offset is None else json.dumps(offset, separators=(",", ":")).encode()


def parse_offset_key(key: str) -> tuple[str, dict[str, Any]] | None:
    try:
        value = json.loads(key)
    except ValueError:
        return None
    if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict):
        return value[0], value[1]
    return None


class OffsetStore(ABC):
    """Latest offset per (connector, source partition)."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, Any] | None] = {}

    async def start(self) -> None:  # noqa: B027 - optional hook
        """Load what is stored."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""

    def get(self, connector: str, partition: dict[str, Any]) -> dict[str, Any] | None:
        return self.data.get(offset_key(connector, partition))

    async def set(self, connector: str, offsets: dict[str, dict[str, Any] | None]) -> None:
        """Store ``{offset_key: offset}`` (None resets); durable once this returns."""
        self.remember(offsets)
        await self._persist(offsets)

    def remember(self, offsets: dict[str, dict[str, Any] | None]) -> None:
        """Take ``{offset_key: offset}`` into this view only: they were made durable elsewhere (an exactly-once
        source task writes them in its own transaction)."""
        for key, value in offsets.items():
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value

    @abstractmethod
    async def _persist(self, offsets: dict[str, dict[str, Any] | None]) -> None: ...

    def connector_offsets(self, connector: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        out = []
        for key, value in self.data.items():
            parsed = parse_offset_key(key)
            if parsed is not None and parsed[0] == connector and value is not None:
                out.append((parsed[1], value))
        return out


class OffsetStoreError(ConnectException):
    """Stored offsets cannot be read: the worker must not start without them."""


class MemoryOffsetStore(OffsetStore):
    async def _persist(self, offsets: dict[str, dict[str, Any] | None]) -> None:
        return None


class FileOffsetStore(OffsetStore):
    """Offsets in one JSON file (``offset.storage.file.filename``), replaced atomically."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Load the stored offsets. A file that cannot be read as offsets stops the worker: starting
        without them would send every source connector's records again."""
        if not self.path.exists():
            return
        try:
            text = self.path.read_text(encoding="utf-8")
            data = json.loads(text) if text.strip() else {}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise OffsetStoreError(self._unusable(f"it cannot be read as JSON ({exc})")) from None
        if not isinstance(data, dict) or not all(isinstance(v, dict) or v is None for v in data.values()):
            raise OffsetStoreError(self._unusable("it is JSON but not an object of offsets"))
        self.data = data

    def _unusable(self, why: str) -> str:
        return (f"The offsets file {self.path} (offset.storage.file.filename) is unusable: {why}. Restore it from "
                f"a backup, or move it away to start every source connector from the beginning (their records "
                f"would be sent again); the worker does not start until then.")

    async def _persist(self, offsets: dict[str, dict[str, Any] | None]) -> None:
        async with self._lock:
            snapshot = json.dumps(self.data, separators=(",", ":"))
            await asyncio.to_thread(self._write, snapshot)

    def _write(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
