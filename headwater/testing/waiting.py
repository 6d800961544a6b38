"""Waiting for a condition in tests, failing with what was expected and what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["WaitTimeout", "wait_until"]

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """A condition did not hold in time; the message says what was awaited and what was last seen."""

    def __init__(self, what: str, timeout: float, last: Any) -> None:
        shown = last if isinstance(last, str) else repr(last)
        super().__init__(f"timed out after {timeout:g}s waiting for {what}; last seen: {shown}")
        self.what, self.timeout, self.last = what, timeout, last


def wait_until(check: Callable[[], T], what: str, timeout: float = 30.0, interval: float = 0.05,
               seen: Callable[[], Any] | None = None) -> T:
    """Call ``check`` until it returns something truthy, and return that. An AssertionError raised by
    ``check`` counts as not yet. On timeout raise WaitTimeout naming ``what`` and the last value seen:
    ``seen()`` when given, else the last result (or assertion) of ``check``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            last: Any = check()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(what, timeout, seen() if seen is not None else last)
        time.sleep(interval)
