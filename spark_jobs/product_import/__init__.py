"""Fan a product catalogue into the import queue as ordered sessions (see job.py).

Import the Spark parts from ``spark_jobs.product_import.job``; ``manifest`` has no pyspark
dependency so the function app can read manifests.
"""
