# Every target installs what it needs first (venv, packages, npm), so a fresh clone needs only
# Python 3.13 (on PATH or under pyenv: tools/find-python) and Node 20 on PATH.
PYTHON ?= $(shell tools/find-python)
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov

.PHONY: setup run-deps test lint clean prerequisites chromium screenshots

# What the app, the local stack and the demo need; `setup` adds checkov for tests/infra and
# Chromium for the console's browser tests. Both install two things at a time: npm's work
# overlaps uv's and checkov's.
# The local host talks to Microsoft's Python worker in the Functions RPC protocol, compiled here
# from Microsoft's published build of it (rpc_build.py, packages/functions-local-host/README.md).
LOCAL_HOST := packages/functions-local-host
RPC_PROTOS := $(LOCAL_HOST)/src/functions_local_host/_rpc/SOURCE
CONSOLE_HTMX := shared/entrypoints/console/static/htmx.min.js
RUN_DEPS := $(VENV)/.installed node_modules/.installed $(RPC_PROTOS) $(CONSOLE_HTMX)
setup: prerequisites
	@$(MAKE) --no-print-directory -s -j2 $(RUN_DEPS) $(CHECKOV_VENV)/.installed chromium
run-deps: prerequisites
	@$(MAKE) --no-print-directory -s -j2 $(RUN_DEPS)

# Checked before anything installs, each missing one named with what to install: Python 3.13
# (tools/find-python, run above for PYTHON, has said how) and Node.js NODE_MAJOR or later with
# npm (package.json's engines).
NODE_MAJOR := 20
prerequisites:
	@missing=0; \
	test -n "$(PYTHON)" || missing=1; \
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then \
	  echo "Node.js $(NODE_MAJOR) or later, with npm, is needed and node or npm is not on PATH." >&2; \
	  echo "Install it (your package manager, nvm, or nodejs.org): Azurite and the emulator's" >&2; \
	  echo "JavaScript tests run on it." >&2; \
	  missing=1; \
	elif test "$$(node -p 'process.versions.node.split(".")[0]')" -lt $(NODE_MAJOR); then \
	  echo "Node.js $(NODE_MAJOR) or later is needed; node on PATH is $$(node --version)." >&2; \
	  missing=1; \
	fi; \
	exit $$missing

# uv installs the packages: first from its cache alone (--offline: under a second when the cache
# holds them, as on any machine that installed them once), else downloading what is missing (about
# a minute cold); pip is the fallback when uv cannot be installed. A venv made by another Python
# version is replaced. requirements-dev.txt installs the Service Bus emulator's package editable
# (its build backend, setuptools, comes from the same cache), so a change to its pyproject.toml
# reinstalls.
UV = $(VENV)/bin/uv
EMULATOR_PACKAGE := packages/servicebus-emulator/pyproject.toml
$(VENV)/.installed: requirements.txt requirements-dev.txt $(LOCAL_HOST)/pyproject.toml $(EMULATOR_PACKAGE) | prerequisites
	@$(PY) -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null \
	  || { echo "==> $(VENV): new venv with $(PYTHON) (about 5 s)"; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }
	@echo "==> $(VENV): installing the app's and the tests' packages with uv"
	@if test -x $(UV) || $(PY) -m pip install --quiet --disable-pip-version-check uv; then \
	  $(UV) pip install --quiet --offline --python $(PY) -r requirements-dev.txt 2>/dev/null \
	  || { echo "==> $(VENV): uv's cache lacks some packages: downloading them (about a minute)"; \
	       $(UV) pip install --python $(PY) -r requirements-dev.txt; }; \
	else \
	  echo "==> uv unavailable: pip instead (about 2 min cold)"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt; \
	fi
	@touch $@

$(RPC_PROTOS): $(VENV)/.installed $(LOCAL_HOST)/src/functions_local_host/rpc_build.py
	@$(PY) $(LOCAL_HOST)/src/functions_local_host/rpc_build.py --force

node_modules/.installed: package.json package-lock.json | prerequisites
	@echo "==> node_modules: installing Azurite with npm (about 20 s from npm's cache, longer when it downloads)"
	@npm ci --no-audit --no-fund --loglevel=error --prefer-offline
	@touch $@

# The console's hypermedia library comes from the npm package that package-lock.json pins. The
# copy is committed, so `func azure functionapp publish` and `azd deploy` ship it from any
# checkout (docs/console.md); this refreshes it when the pinned version changes.
$(CONSOLE_HTMX): node_modules/.installed
	@cmp -s node_modules/htmx.org/dist/htmx.min.js $@ \
	  || { cp node_modules/htmx.org/dist/htmx.min.js $@; echo "==> $@: copied from node_modules/htmx.org"; }
	@touch $@

# tests/console drive Debian's Chromium with Playwright at this path (Playwright's own browser
# download cannot run here). Installing it needs root, as in CI.
CHROMIUM := /usr/bin/chromium
chromium:
	@test -x $(CHROMIUM) || { \
	  echo "==> chromium: $(CHROMIUM) is missing: installing Debian's package for tests/console (about 1 min)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	  || { echo "Could not install chromium: run 'apt-get install -y chromium' as root."; exit 1; }; }

# checkov pins packaging<24, which the app's venv cannot hold: it gets a venv of its own.
CHECKOV_REQUIREMENT := checkov>=3.2,<4
$(CHECKOV_VENV)/.installed: $(VENV)/.installed
	@echo "==> $(CHECKOV_VENV): installing checkov for tests/infra (about 30 s cold)"
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	@$(UV) pip install --quiet --offline --python $(CHECKOV_VENV)/bin/python '$(CHECKOV_REQUIREMENT)' 2>/dev/null \
	  || $(UV) pip install --quiet --python $(CHECKOV_VENV)/bin/python '$(CHECKOV_REQUIREMENT)' 2>/dev/null \
	  || $(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check '$(CHECKOV_REQUIREMENT)'
	@echo '$(CHECKOV_REQUIREMENT)' > $@

# Four workers, whole files per worker: most tests wait on the broker (lock expiry, timers),
# so even 2 cores finish in well under half the serial time (about 17 minutes on 2 cores, 21
# with three workers). Each worker starts its own Azurite, emulator and Spark session on free
# ports.
PYTEST_WORKERS ?= 4
test: setup
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile

# Find the tests that fail only on a busy machine: RUNS runs of pytest over TESTS beside LOAD
# processes that each spin a core, then the tests that failed in any run (tools/flaky.py).
# Exit status 1 when any did. The hogs stop when the runs end. TESTS empty: pytest's testpaths,
# the whole suite (tests/ and the emulator's packages/servicebus-emulator/tests).
RUNS ?= 3
LOAD ?= 2
TESTS ?=
.PHONY: flaky
flaky: setup
	$(PY) tools/flaky.py --runs $(RUNS) --load $(LOAD) -- $(TESTS) -n $(PYTEST_WORKERS) --dist loadfile -q

# The console's browser tests, saving their screenshots where the README and docs/console.md
# show them (docs/images/console/) instead of .artifacts/console/.
screenshots: setup
	CONSOLE_SCREENSHOTS=docs/images/console $(PY) -m pytest tests/console -q

# lint-imports checks the import contracts in pyproject.toml: what may import what.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	@# Each package's tests are top-level modules (conftest, helpers) of their folder: one run each.
	$(VENV)/bin/mypy packages/servicebus-emulator/tests
	$(VENV)/bin/mypy packages/functions-local-host/tests
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) $(CHECKOV_VENV) node_modules $(LOCAL_HOST)/src/functions_local_host/_rpc .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

# The whole app locally: Azurite, the Service Bus emulator, an SMTP sink and the local
# Functions host, on the standard ports, with their data kept in .data/ across restarts.
.PHONY: up reset
up: run-deps
	@$(PY) -m localdev.up $(if $(INSTANCES),--instances $(INSTANCES))

# Start clean: deletes .data/ (refused while `make up` runs).
reset:
	@if test -x $(PY); then $(PY) -m localdev.up --reset; else rm -rf .data && echo "Deleted .data/"; fi

# The whole story end to end on this machine: imports a catalogue with the Spark job, submits
# orders (some designed to fail), archives the dead letters, replays the outage. Exit code 0
# only when it came out as expected.
.PHONY: demo
demo: run-deps
	@$(PY) -m localdev.demo

# The Python SDK's own samples, for packages/servicebus-emulator/tests/test_python_samples.py (it
# runs the topic and subscription ones against the emulator): from the azure-servicebus sdist on
# PyPI, 7.11.4 being the last release whose samples take a connection string; unpacked into the
# git-ignored venv.
SERVICEBUS_SAMPLES_VERSION := 7.11.4
SERVICEBUS_SAMPLES := $(VENV)/servicebus-samples-$(SERVICEBUS_SAMPLES_VERSION)
setup: $(SERVICEBUS_SAMPLES)/.installed
$(SERVICEBUS_SAMPLES)/.installed: | $(VENV)/.installed
	@echo "==> $(SERVICEBUS_SAMPLES): the samples of the azure-servicebus $(SERVICEBUS_SAMPLES_VERSION) sdist"
	@rm -rf $(SERVICEBUS_SAMPLES) && mkdir -p $(SERVICEBUS_SAMPLES)
	@$(PY) -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
	  'azure-servicebus==$(SERVICEBUS_SAMPLES_VERSION)' -d $(SERVICEBUS_SAMPLES)
	@tar -xzf $(SERVICEBUS_SAMPLES)/azure*servicebus-$(SERVICEBUS_SAMPLES_VERSION).tar.gz \
	  -C $(SERVICEBUS_SAMPLES) --strip-components=1 --wildcards '*/samples/*'
	@touch $@
