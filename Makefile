# Every target installs what it needs first (venv, packages, npm), so a fresh clone needs only
# Python 3.13 (on PATH or under pyenv: tools/find-python) and Node 20 on PATH.
PYTHON ?= $(shell tools/find-python)
VENV ?= .venv
PY := $(VENV)/bin/python
CHECKOV_VENV := .venv-checkov

.PHONY: setup test lint clean python chromium

# What the app, the local stack and the demo need; `setup` adds checkov for tests/infra and
# Chromium for the console's browser tests.
# The local host talks to Microsoft's Python worker in the Functions RPC protocol, compiled here
# from Microsoft's published build of it (localdev/host/rpc_build.py, localdev/host/README.md).
RPC_PROTOS := localdev/host/_rpc/SOURCE
CONSOLE_HTMX := shared/console/static/htmx.min.js
RUN_DEPS := $(VENV)/.installed node_modules/.installed $(RPC_PROTOS) $(CONSOLE_HTMX)
setup: $(RUN_DEPS) $(CHECKOV_VENV)/.installed chromium

python:
	@test -n "$(PYTHON)" || { tools/find-python; exit 1; }

# uv installs the packages in about a tenth of pip's time; pip is the fallback when uv cannot be
# installed. A venv made by another Python version is replaced.
$(VENV)/.installed: requirements.txt requirements-dev.txt | python
	@$(PY) -c 'import sys; assert sys.version_info[:2] == (3, 13)' 2>/dev/null \
	  || { echo "==> $(VENV): new venv with $(PYTHON)"; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }
	@echo "==> $(VENV): installing the app's and the tests' packages (about 40 s cold, with uv)"
	@if $(PY) -m pip install --quiet --disable-pip-version-check uv; then \
	  $(VENV)/bin/uv pip install --quiet --python $(PY) -r requirements-dev.txt; \
	else \
	  echo "==> uv unavailable: pip instead (about 2 min cold)"; \
	  $(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt; \
	fi
	@touch $@

$(RPC_PROTOS): $(VENV)/.installed localdev/host/rpc_build.py
	@$(PY) localdev/host/rpc_build.py --force

node_modules/.installed: package.json package-lock.json
	@echo "==> node_modules: installing Azurite (about 30 s cold)"
	@npm ci --no-audit --no-fund --loglevel=error --prefer-offline
	@touch $@

# The console's hypermedia library comes from the npm package that package-lock.json pins. The
# copy is committed, so `func azure functionapp publish` and `azd deploy` ship it from any
# checkout (docs/console.md); this refreshes it when the pinned version changes.
$(CONSOLE_HTMX): node_modules/.installed
	@cmp -s node_modules/htmx.org/dist/htmx.min.js $@ \
	  || { cp node_modules/htmx.org/dist/htmx.min.js $@; echo "==> $@: copied from node_modules/htmx.org"; }
	@touch $@

# tests/console drive Debian's Chromium with Playwright (Playwright's own browser download
# cannot run here). Installing it needs root, as in CI.
chromium:
	@command -v chromium >/dev/null || { \
	  echo "==> chromium: installing Debian's package for tests/console (about 1 min)"; \
	  apt-get update -qq && apt-get install -y -qq chromium >/dev/null \
	  || { echo "Could not install chromium: run 'apt-get install -y chromium' as root."; exit 1; }; }

# checkov pins packaging<24, which the app's venv cannot hold: it gets a venv of its own.
CHECKOV_REQUIREMENT := checkov>=3.2,<4
$(CHECKOV_VENV)/.installed: $(VENV)/.installed
	@echo "==> $(CHECKOV_VENV): installing checkov for tests/infra (about 30 s cold)"
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	@$(VENV)/bin/uv pip install --quiet --python $(CHECKOV_VENV)/bin/python '$(CHECKOV_REQUIREMENT)' 2>/dev/null \
	  || $(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check '$(CHECKOV_REQUIREMENT)'
	@echo '$(CHECKOV_REQUIREMENT)' > $@

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
	rm -rf $(VENV) $(CHECKOV_VENV) node_modules localdev/host/_rpc .pytest_cache .mypy_cache .ruff_cache

# The whole app locally: Azurite, the Service Bus emulator and the local Functions host.
.PHONY: up
up: $(RUN_DEPS)
	$(PY) -m localdev.stack

# The whole story end to end on this machine: imports a catalogue with the Spark job, submits
# orders (some designed to fail), archives the dead letters, replays the outage. Exit code 0
# only when it came out as expected.
.PHONY: demo
demo: $(RUN_DEPS)
	$(PY) -m localdev.demo
