"""Scraping a broker's ``metrics.listener`` (its Prometheus text format) in the tests: where it serves, the
samples of one scrape, and a figure among them."""

from __future__ import annotations

import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from headwater.testing import wait_until

from .brokerproc import BrokerProcess

_METRICS_AT = re.compile(r"Prometheus metrics at (http://\S+/metrics)")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def metrics_url(broker: BrokerProcess) -> str:
    """The scrape URL the broker logged in its current run (port 0 asked: the one bound)."""
    m = wait_until(lambda: _METRICS_AT.search(broker.log_text(since_start=True)), "the metrics log line", 30,
                   log=lambda: broker.log_text(True))
    return m.group(1)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Summed over the samples of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, have), v in samples.items() if n == name and want <= have)
