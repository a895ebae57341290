"""Fan a product catalogue into the import queue as ordered sessions (see job.py).

Import the Spark parts from ``spark_jobs.product_import.job``. The manifest's schema and table
live in ``shared`` (the function app reads them and never imports spark_jobs);
``manifest`` re-exports them for the job.
"""
