# Every target installs what it needs first (venv, pip, npm), so a fresh clone needs only
# Python 3.11 and Node 20 on PATH.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup test lint clean

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Three workers, whole files per worker: most tests wait on the broker (lock expiry, timers),
# so even 2 cores finish in about half the serial time. Each worker starts its own Azurite,
# emulator and Spark session on free ports.
PYTEST_WORKERS ?= 3
test: setup
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache

# The whole app locally: Azurite, the Service Bus emulator and the local Functions host.
.PHONY: up
up: setup
	$(PY) -m localdev.stack

# The whole story end to end on this machine: imports a catalogue with the Spark job, submits
# orders (some designed to fail), archives the dead letters, replays the outage. Exit code 0
# only when it came out as expected.
.PHONY: demo
demo: setup
	$(PY) -m localdev.demo
