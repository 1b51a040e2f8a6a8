"""Broker metrics: counters kept while working, Prometheus families computed when scraped.

``stats`` holds the plain counters and imports nothing of ours, so every layer may
count into it. ``collectors`` (Kafka's MBeans as Prometheus families), ``http``
(GET /metrics on the event loop) and ``service`` (the broker component) read the
broker's parts and sit below ``server``, which starts them; they never import
``server`` or ``cli``. The names and their Kafka MBeans are in docs/metrics.md.
"""
