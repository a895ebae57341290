"""Spark jobs that feed the function app's queues (run on Databricks, or local Spark)."""
