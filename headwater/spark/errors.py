"""The root of what the Spark source for topics raises."""

from __future__ import annotations

__all__ = ["SparkSourceError"]


class SparkSourceError(Exception):
    """What the ``headwater`` source could not do: an option it cannot take, a read the cluster refused,
    fetched bytes that are not record batches. Each subclass keeps the builtin base it had (ValueError,
    RuntimeError), so callers that caught those still do."""
