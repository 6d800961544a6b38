"""The order in which `make test` hands its test files to the pytest-xdist workers: the longest first.

``--dist loadfile`` keeps a file's tests on one worker (module fixtures start once) and, left to itself,
hands the files out by their number of tests, most first: the cluster, connector and Spark modules, two
or three tests of a minute each, then come last, and the run ends when the worker that drew the last of
them finishes it while the other has long run out of work. Handed out longest first (the classic
longest-processing-time rule), the short files fill in at the end and both workers finish together.

A file's length is the sum of its tests' durations (setup, call and teardown) as the last run that ran
each test measured them, kept in pytest's cache (``.pytest_cache``, under ``CACHE_KEY``); on a fresh clone
the durations of the suite's slowest tests in test_seconds.json beside this module (one loaded 2-core run:
relative figures) stand in. A test known to neither counts ``UNKNOWN_SLOW`` seconds in a module that
tests/support/markers.py calls slow, ``UNKNOWN_QUICK`` elsewhere. The recording runs in the controlling
process only (the workers' reports reach it), once the session ends.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

from .markers import needs

__all__ = ["CACHE_KEY", "DurationRecorder", "LongestFileFirst", "make_scheduler", "record_durations"]

CACHE_KEY = "headwater/test-seconds"
SEED = Path(__file__).with_name("test_seconds.json")
UNKNOWN_SLOW = 3.0  # seconds of a test not yet timed, in a module that starts processes of its own
UNKNOWN_QUICK = 0.2


class LongestFileFirst(LoadFileScheduling):
    """``--dist loadfile`` handing out the longest file left each time a worker asks for more."""

    def __init__(self, config: pytest.Config, log: Any = None, seconds: dict[str, float] | None = None) -> None:
        super().__init__(config, log)
        self.seconds = seconds if seconds is not None else {}
        self.rootpath = config.rootpath
        self._slow: dict[str, bool] = {}

    def test_seconds(self, nodeid: str) -> float:
        """The test's measured duration, or the guess for an untimed test of its file."""
        known = self.seconds.get(nodeid)
        if known is not None:
            return known
        file = self._split_scope(nodeid)
        if file not in self._slow:
            self._slow[file] = "slow" in needs((), self.rootpath / file)
        return UNKNOWN_SLOW if self._slow[file] else UNKNOWN_QUICK

    def file_seconds(self, work_unit: dict[str, bool]) -> float:
        """The expected length of a file's tests not yet run."""
        return sum(self.test_seconds(nodeid) for nodeid, done in work_unit.items() if not done)

    def _assign_work_unit(self, node: Any) -> None:
        # xdist hands out the work queue's first file: put the longest one there
        longest = max(self.workqueue, key=lambda scope: self.file_seconds(self.workqueue[scope]))
        self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)


class DurationRecorder:
    """Adds up each test's setup, call and teardown durations; writes them into the cache at the end."""

    def __init__(self, cache: pytest.Cache) -> None:
        self.cache = cache
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "setup":
            self.seconds[report.nodeid] = 0.0
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        if self.seconds:
            known = self.cache.get(CACHE_KEY, {})
            self.cache.set(CACHE_KEY, {**known, **{k: round(v, 2) for k, v in self.seconds.items()}})


def make_scheduler(config: pytest.Config, log: Any) -> LongestFileFirst | None:
    """The scheduler for ``--dist loadfile`` (None: xdist's own for the other modes)."""
    cache: pytest.Cache | None = getattr(config, "cache", None)  # none with -p no:cacheprovider
    if config.getoption("dist") != "loadfile":
        return None
    return LongestFileFirst(config, log, {**json.loads(SEED.read_text()),
                                          **(cache.get(CACHE_KEY, {}) if cache is not None else {})})


def record_durations(config: pytest.Config) -> None:
    """Register the recorder in the controlling (or only) process, where every report arrives."""
    cache: pytest.Cache | None = getattr(config, "cache", None)  # none with -p no:cacheprovider
    if cache is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(DurationRecorder(cache), "headwater-test-seconds")

