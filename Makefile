# One command to install and run a broker, one to install everything and test.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: serve test install bench lint

$(PY):
	python3 -m venv $(VENV)

install: $(PY)
	$(PY) -m pip install -q -e '.[test,spark]'

serve: install
	$(VENV)/bin/odradek serve --data-dir ./data

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint
	$(PY) -m pytest -q -p no:cacheprovider

bench: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/run.py
