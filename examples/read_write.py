"""Batch read and write with the "odradek" format, as with Spark's Kafka source and sink."""

import os

from pyspark.sql import SparkSession

from odradek.spark import use_this_python

BOOTSTRAP = os.environ.get("ODRADEK_BOOTSTRAP_SERVERS", "localhost:9092")
TOPIC = os.environ.get("ODRADEK_EXAMPLE_TOPIC", "greetings")

use_this_python()  # Spark's Python workers must import odradek: run them on this interpreter
spark = SparkSession.builder.master("local[2]").getOrCreate()

spark.createDataFrame(
    [("alice", "hello"), ("bob", "world")], "key string, value string"
).write.format("odradek").option("kafka.bootstrap.servers", BOOTSTRAP).option("topic", TOPIC).mode(
    "append"
).save()

df = (
    spark.read.format("odradek")
    .option("kafka.bootstrap.servers", BOOTSTRAP)
    .option("subscribe", TOPIC)
    .option("startingOffsets", "earliest")
    .option("endingOffsets", "latest")
    .load()
)
df.selectExpr(
    "CAST(key AS STRING)", "CAST(value AS STRING)", "partition", "offset", "timestamp"
).show()
