# The two commands: `make run` starts the whole console, `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
CHROMIUM := /usr/bin/chromium
# Two cores here; more processes than cores only adds contention.
PYTEST_WORKERS ?= 2

.PHONY: run test lint install chromium clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/rebound up

# Debian's Chromium drives the browser tests; Playwright's own download cannot work offline.
chromium:
	@test -x $(CHROMIUM) || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) chromium lint
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile -q

clean:
	rm -rf $(VENV) instance tests/artifacts
