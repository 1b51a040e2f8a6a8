# One command to install and run a broker, one to install everything and test.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: serve test install install-zookeeper install-openssl bench lint

# Cluster mode (zookeeper.connect) and its tests run Debian's ZooKeeper server from this script.
ZKSERVER := /usr/share/zookeeper/bin/zkServer.sh

$(PY):
	python3 -m venv $(VENV)

install: $(PY) install-zookeeper install-openssl
	$(PY) -m pip install -q -e '.[test,spark]'

install-zookeeper:
	@if [ ! -x $(ZKSERVER) ]; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y zookeeper; \
		else \
			echo "missing: $(ZKSERVER) (Debian package zookeeper, needed by cluster mode and its tests);" \
				"install it as root with: apt-get update && apt-get install -y zookeeper" >&2; \
			exit 1; \
		fi; \
	fi

# The TLS tests and benchmarks make their certificates with the openssl command.
install-openssl:
	@if ! command -v openssl >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openssl; \
		else \
			echo "missing: openssl (Debian package openssl, needed by the TLS tests and benchmarks);" \
				"install it as root with: apt-get update && apt-get install -y openssl" >&2; \
			exit 1; \
		fi; \
	fi

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
