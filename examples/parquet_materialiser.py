"""Continuously materialise topic "orders" (JSON values) into a Parquet table partitioned by date."""

from pyspark.sql import SparkSession

from odradek.spark.pipelines import Trigger, materialise_to_parquet, progress_summary

spark = SparkSession.builder.master("local[2]").getOrCreate()
query = materialise_to_parquet(
    spark,
    bootstrap_servers="localhost:9092",
    source_options={"subscribe": "orders", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "100000"},
    output="/tmp/orders",
    checkpoint="/tmp/orders-checkpoint",
    value_schema="user string, amount double",
    trigger=Trigger(processing_time="10 seconds"),
)
while not query.awaitTermination(10):
    print(progress_summary(query))
