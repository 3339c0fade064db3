# The two commands of the README. Each one installs what it needs first.
VENV ?= .venv
STAMP := $(VENV)/.edgebuild-installed

.PHONY: setup quickstart test lint bench docs

$(STAMP): pyproject.toml scripts/setup.sh
	VENV=$(VENV) bash scripts/setup.sh
	touch $(STAMP)

setup: $(STAMP)

quickstart: $(STAMP)
	$(VENV)/bin/edgebuild run recipes/quickstart.yaml

lint: $(STAMP)
	$(VENV)/bin/ruff check edgebuild tests benchmarks recipes
	$(VENV)/bin/mypy edgebuild

test: lint
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/cli_speed.py

docs: $(STAMP)
	$(VENV)/bin/python scripts/gen_docs.py
