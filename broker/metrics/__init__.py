"""What the broker counts (``stats.py``: plain ints the request path adds to) and how Prometheus reads it
(``prometheus.py``: the collector and its endpoint, imported only when metrics are served)."""
