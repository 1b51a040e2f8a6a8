"""Batch read and write with the "odradek" format, as with Spark's Kafka source and sink."""

from pyspark.sql import SparkSession

BOOTSTRAP = "localhost:9092"

spark = SparkSession.builder.master("local[2]").getOrCreate()

spark.createDataFrame([("alice", "hello"), ("bob", "world")], "key string, value string") \
    .write.format("odradek").option("kafka.bootstrap.servers", BOOTSTRAP).option("topic", "greetings").mode("append").save()

df = (
    spark.read.format("odradek")
    .option("kafka.bootstrap.servers", BOOTSTRAP)
    .option("subscribe", "greetings")
    .option("startingOffsets", "earliest")
    .option("endingOffsets", "latest")
    .load()
)
df.selectExpr("CAST(key AS STRING)", "CAST(value AS STRING)", "partition", "offset", "timestamp").show()
