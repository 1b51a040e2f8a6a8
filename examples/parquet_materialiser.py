"""Continuously materialise topic "orders" (JSON values) into a Parquet table partitioned by date."""

import os

from pyspark.sql import SparkSession

from odradek.spark import use_this_python
from odradek.spark.pipelines import Trigger, materialise_to_parquet, progress_summary

use_this_python()  # Spark's Python workers must import odradek: run them on this interpreter
spark = SparkSession.builder.master("local[2]").getOrCreate()
query = materialise_to_parquet(
    spark,
    bootstrap_servers=os.environ.get("ODRADEK_BOOTSTRAP_SERVERS", "localhost:9092"),
    source_options={
        "subscribe": "orders",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "100000",
    },
    output="/tmp/orders",
    checkpoint="/tmp/orders-checkpoint",
    value_schema="user string, amount double",
    trigger=Trigger(processing_time="10 seconds"),
)
while not query.awaitTermination(10):
    print(progress_summary(query))
