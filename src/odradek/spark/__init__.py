"""PySpark source and sink for Kafka topics, written with PySpark's Python Data Source API.

Spark's own Kafka connector is a JVM package; this one is registered as the
"odradek" format (the name "kafka" belongs to Spark) and speaks to any
Kafka-compatible broker: metadata through librdkafka (confluent-kafka), data
through its own Fetch and Produce requests on whole record batches, or through
librdkafka when a kafka.* option asks for something only librdkafka does.
"""

from __future__ import annotations

import os
import sys

FORMAT_NAME = "odradek"


def use_this_python() -> None:
    """Let Spark's Python workers run this interpreter, unless PYSPARK_PYTHON says otherwise.

    Spark starts its workers with PYSPARK_PYTHON, else whatever `python3` is on
    the PATH, which after `pip install odradek[spark]` into a virtualenv is often
    an interpreter that cannot import pyspark_odradek. Call before the
    SparkSession is created: Spark reads the variable when its context starts.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


__all__ = ["FORMAT_NAME", "use_this_python"]
