"""Count records per key per minute from "clicks" into "click-counts", dropping state past a watermark."""

import os

from pyspark.sql import SparkSession

from odradek.spark import use_this_python
from odradek.spark.pipelines import Trigger, progress_summary, windowed_counts

use_this_python()  # Spark's Python workers must import odradek: run them on this interpreter
spark = SparkSession.builder.master("local[2]").getOrCreate()
query = windowed_counts(
    spark,
    bootstrap_servers=os.environ.get("ODRADEK_BOOTSTRAP_SERVERS", "localhost:9092"),
    source_topic="clicks",
    sink_topic="click-counts",
    checkpoint="/tmp/click-counts-checkpoint",
    window="1 minute",
    watermark="2 minutes",
    trigger=Trigger(processing_time="5 seconds"),
)
while not query.awaitTermination(5):
    print(progress_summary(query))
