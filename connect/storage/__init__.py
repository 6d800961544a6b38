"""Where the runtime keeps source offsets, connector configs and statuses."""

from .offsets import FileOffsetStore, MemoryOffsetStore, OffsetStore, OffsetStoreError, offset_key

__all__ = ["FileOffsetStore", "MemoryOffsetStore", "OffsetStore", "OffsetStoreError", "offset_key"]
