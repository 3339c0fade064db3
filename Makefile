# The two commands of the README. Each one installs what it needs first.
VENV ?= .venv
STAMP := $(VENV)/.edgebuild-installed

.PHONY: setup quickstart test test-fast lint bench docs

$(STAMP): pyproject.toml scripts/setup.sh
	VENV=$(VENV) bash scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

quickstart: $(STAMP)
	$(VENV)/bin/edgebuild run recipes/quickstart.yaml

lint: $(STAMP)
	$(VENV)/bin/ruff check edgebuild tests benchmarks recipes
	$(VENV)/bin/mypy edgebuild
	$(VENV)/bin/lint-imports

# Two workers (pytest-xdist); tests/conftest.py keeps a module's tests on one worker. The
# 30 slowest tests are printed on every run: the suite's time is a budget (docs/testing.md).
PYTEST_PARALLEL := -n 2

test: lint
	$(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) --durations=30

# The developer's loop: unit tests and the integration tests that take seconds (no full
# recipe runs: those are marked slow, tests/unit/test_markers.py checks it).
test-fast: $(STAMP)
	$(VENV)/bin/ruff check edgebuild tests benchmarks recipes
	$(VENV)/bin/python -m pytest -m "not slow" $(PYTEST_PARALLEL) --durations=10

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/cli_speed.py

docs: $(STAMP)
	$(VENV)/bin/python scripts/gen_docs.py
