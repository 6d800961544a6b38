"""Durations of repeated operations (offset commits, rebalances), kept as Kafka's metrics keep them:
a total count, and the average and maximum over a recent window (Kafka's ``*-avg-time-ms`` and
``*-max-time-ms`` are over ``metrics.sample.window.ms`` samples; here the last ``window`` runs)."""

from __future__ import annotations

import time
from collections import deque

__all__ = ["Durations"]


class Durations:
    def __init__(self, window: int = 64) -> None:
        self.recent: deque[float] = deque(maxlen=window)
        self.total = 0
        self.failures = 0
        self.started: float | None = None
        self.last_finished: float | None = None  # time.time() of the last completion

    def begin(self) -> None:
        """An operation starts (a second begin before end keeps the first start: one rebalance may
        take several JoinGroup rounds)."""
        if self.started is None:
            self.started = time.monotonic()

    def end(self, ok: bool = True) -> None:
        if self.started is None:
            return
        elapsed_ms = (time.monotonic() - self.started) * 1000
        self.started = None
        if ok:
            self.add(elapsed_ms)
        else:
            self.failures += 1

    def add(self, elapsed_ms: float) -> None:
        self.recent.append(elapsed_ms)
        self.total += 1
        self.last_finished = time.time()

    @property
    def running(self) -> bool:
        return self.started is not None

    def avg_ms(self) -> float:
        return sum(self.recent) / len(self.recent) if self.recent else 0.0

    def max_ms(self) -> float:
        return max(self.recent, default=0.0)

    def since_last_ms(self) -> float | None:
        """Milliseconds since the last completion, None if none completed yet (Kafka answers -1)."""
        return None if self.last_finished is None else (time.time() - self.last_finished) * 1000
