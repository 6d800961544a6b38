"""The figures behind the worker's /metrics: durations over a window, task figures flattened, and the
samples tasks export under names of their own (one family per name, label names kept consistent)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from headwater.connect.api import MetricSample
from headwater.connect.rest.metrics import _exported, _numbers
from headwater.connect.runtime.timings import Durations
from headwater.connect.status import TaskId


def test_durations_keep_a_window_and_one_rebalance_across_rounds() -> None:
    d = Durations(window=3)
    for ms in (10, 20, 30, 40):
        d.add(ms)
    assert d.total == 4 and d.avg_ms() == 30 and d.max_ms() == 40  # the first fell out of the window
    d.begin()
    first = d.started
    time.sleep(0.01)
    d.begin()  # a second JoinGroup round of the same rebalance keeps the first start
    assert d.started == first and d.running
    d.end()
    assert not d.running and d.total == 5 and d.recent[-1] >= 10
    assert d.since_last_ms() is not None and d.since_last_ms() < 60_000  # since the end, not the epoch
    d.begin()
    d.end(ok=False)
    assert d.failures == 1 and d.total == 5
    assert Durations().since_last_ms() is None and Durations().avg_ms() == 0


def test_nested_task_figures_are_flattened_with_dots() -> None:
    figures = {"phase": "streaming", "streaming": {"events": 3, "retained.wal.bytes": 42, "lsn": "0/1"},
               "ok": True, "lag": {"t-0": {"records": 5}}}
    assert dict(_numbers(figures)) == {"streaming.events": 3, "streaming.retained.wal.bytes": 42, "ok": 1,
                                       "lag.t-0.records": 5}


def test_exported_samples_make_one_family_per_name_and_skip_other_label_names() -> None:
    samples = {TaskId("c", 0): [MetricSample("x_count", 5, {"topic": "a"}, counter=True),
                                MetricSample("x_latency_ms", 1.5, {"topic": "a"})],
               TaskId("c", 1): [MetricSample("x_count", 7, {"topic": "b"}, counter=True),
                                MetricSample("x_count", 9, {"other": "label"}, counter=True)]}
    worker = SimpleNamespace(record_tasks=lambda: [(t, SimpleNamespace(exported_metrics=lambda t=t: samples[t]))
                                                   for t in sorted(samples)])
    families = {f.name: f for f in _exported(worker)}
    assert set(families) == {"x_count", "x_latency_ms"} and families["x_count"].type == "counter"
    got = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in families["x_count"].samples
           if s.name.endswith("_total")}
    assert got == {("x_count_total", (("connector", "c"), ("task", "0"), ("topic", "a"))): 5,
                   ("x_count_total", (("connector", "c"), ("task", "1"), ("topic", "b"))): 7}
