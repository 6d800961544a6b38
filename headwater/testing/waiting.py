"""Waiting for a condition in tests, failing with what was expected and what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["NOT_YET", "WaitTimeout", "wait_until"]

T = TypeVar("T")

# What a check may raise while the system is still converging: an assertion not yet true, an answer
# whose list or key is not filled in yet (no task, no committed offset), a connection refused or a
# call timed out while a process starts or is loaded. Any other exception is a bug and is raised at once.
NOT_YET: tuple[type[BaseException], ...] = (AssertionError, LookupError, OSError)


class WaitTimeout(AssertionError):
    """A condition did not hold in time; the message says what was awaited and what was last seen."""

    def __init__(self, what: str, timeout: float, last: Any, log: str = "") -> None:
        shown = last if isinstance(last, str) else repr(last)
        tail = f"\n--- log tail ---\n{log[-4000:]}" if log else ""
        super().__init__(f"timed out after {timeout:g}s waiting for {what}; last seen: {shown}{tail}")
        self.what, self.timeout, self.last = what, timeout, last


def wait_until(check: Callable[[], T | None], what: str, timeout: float = 30.0, interval: float = 0.05,
               seen: Callable[[], Any] | None = None, log: Callable[[], str] | None = None,
               not_yet: tuple[type[BaseException], ...] = NOT_YET) -> T:
    """Call ``check`` until it returns something truthy, and return that. An exception of a kind in
    ``not_yet`` (by default NOT_YET) raised by ``check`` counts as not yet. On timeout raise WaitTimeout
    naming ``what`` and the last value seen: ``seen()`` when given, else the last result (or exception,
    which becomes the WaitTimeout's cause) of ``check``; the tail of ``log()``, when given, is appended."""
    deadline = time.monotonic() + timeout
    while True:
        error: BaseException | None = None
        try:
            last: Any = check()
        except not_yet as exc:
            last = error = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise WaitTimeout(what, timeout, seen() if seen is not None else last,
                              log() if log is not None else "") from error
        time.sleep(interval)
