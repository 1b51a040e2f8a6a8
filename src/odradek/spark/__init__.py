"""PySpark source and sink for Kafka topics, written with PySpark's Python Data Source API.

Spark's own Kafka connector is a JVM package; this one is registered as the
"odradek" format (the name "kafka" belongs to Spark) and speaks to any
Kafka-compatible broker through librdkafka (confluent-kafka).
"""

from __future__ import annotations

FORMAT_NAME = "odradek"

__all__ = ["FORMAT_NAME"]
