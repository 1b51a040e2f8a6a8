"""Registers the "odradek" Spark data source: Spark imports every top-level
`pyspark_*` module and registers its DefaultSource, so no register call is needed."""

from odradek.spark.source import OdradekDataSource as DefaultSource

__all__ = ["DefaultSource"]
