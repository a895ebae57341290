"""One local Spark session (local[2]) for the whole test run: starting one costs 5-7 s; one
emulator per test module, on the app's own queue definitions."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from servicebus_emulator.testing import run_emulator

from .queues import APP_CONFIG


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tests-spark")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def connection_string() -> Iterator[str]:
    """The connection string of an emulator serving the app's queues (this module's own)."""
    with run_emulator(APP_CONFIG) as emulator:
        yield emulator.connection_string
