# The two commands: `make run` starts the whole console, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Every install takes the versions CI tested from constraints.txt; `make lock` refreshes them.
PIP := $(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt
PRODUCT_STAMP := $(VENV)/.product-stamp
TEST_STAMP := $(VENV)/.test-stamp
LOCK_VENV := .lock-venv
CHROMIUM := /usr/bin/chromium
# Four on two cores: a test waits on real processes (a web server, workers, Chromium) most of its time, and two workers
# kept the CPU 62 % busy. Four took the SQLite pass from 12:49 to 10:10 and the PostgreSQL one from 11:16 to 9:47
# (session 41; CI had reached 27 minutes). The two failures four first showed were real: a claim's start read before
# its wait for a lock, and tests sharing one Redis database (now one each, tests/conftest.py).
PYTEST_WORKERS ?= 4

.PHONY: run test lint install lock chromium postgresql clean

# The product's own dependencies: all `make run` needs.
$(PRODUCT_STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -e .
	touch $@

# The test extras (pytest, Playwright, ruff) on top, for `make test` and `make lint`.
$(TEST_STAMP): $(PRODUCT_STAMP)
	$(PIP) -e '.[test]'
	touch $@

install: $(TEST_STAMP)

run: $(PRODUCT_STAMP)
	$(BIN)/rebound up

# Resolve pyproject.toml's ranges afresh in a new venv, ignoring the old pins, and write what was installed.
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	{ echo "# The versions every install uses (make run, make test, CI): pip install -c constraints.txt."; \
	  echo "# Regenerate with 'make lock': a fresh venv, pip install -e '.[test]' within pyproject.toml's"; \
	  echo "# ranges, then pip freeze --exclude-editable. Run the tests before committing a new one."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable; } > constraints.txt
	rm -rf $(LOCK_VENV)

# Install a Debian package unless its program is there: $(call apt,program,package,why).
apt = @test -x $(1) || { \
	  echo "Installing Debian's $(2) $(3)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(2); }

# Debian's Chromium drives the browser tests; Playwright's own download cannot work offline.
chromium:
	$(call apt,$(CHROMIUM),chromium,for the browser tests)

# The PostgreSQL pass starts a private cluster of its own (tests/pg_cluster.py) with Debian's server programs.
postgresql:
	$(call apt,$(or $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb)),/usr/lib/postgresql/none),postgresql,for the PostgreSQL pass)

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

# The whole suite on SQLite, then every test that touches the database again on PostgreSQL. The project's bytecode is
# compiled once first, and the tests may write theirs: with PYTHONDONTWRITEBYTECODE set (as on this machine) every
# worker, web server and CLI process a test starts compiled the project again (a worker registered after 2.4-2.7 s
# without the bytecode, 1.5-1.8 s with it), and each pytest process rewrote and compiled every test module to collect
# them (15 s, 5.5 s with pytest's cached rewrites).
test: export PYTHONDONTWRITEBYTECODE =
test: $(TEST_STAMP) chromium postgresql lint
	$(BIN)/python -m compileall -q -j 0 console jobs tests bench > /dev/null
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -q
	REBOUND_TEST_DATABASE=postgresql $(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -q

clean:
	rm -rf $(VENV) $(LOCK_VENV) instance tests/artifacts
