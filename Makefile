# One command to install and run a broker, one to install everything and test.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: serve test install install-zookeeper install-openssl install-chromium install-kafkajs bench lint

# Cluster mode (zookeeper.connect) and its tests run Debian's ZooKeeper server from this script.
ZKSERVER := /usr/share/zookeeper/bin/zkServer.sh

$(PY):
	python3 -m venv $(VENV)

install: $(PY) install-zookeeper install-openssl install-chromium install-kafkajs
	$(PY) -m pip install -q -e '.[test,spark,plot,console,oauth]'

# $(call debian_package,CHECK,PACKAGE,WHAT NEEDS IT): when the shell test CHECK fails, install
# the Debian PACKAGE as root, or say how to and fail.
define debian_package
	@if ! $(1); then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(2); \
		else \
			echo "missing: Debian package $(2), needed by $(3);" \
				"install it as root with: apt-get update && apt-get install -y $(2)" >&2; \
			exit 1; \
		fi; \
	fi
endef

install-zookeeper:
	$(call debian_package,[ -x $(ZKSERVER) ],zookeeper,cluster mode and its tests)

# The TLS tests and benchmarks make their certificates with the openssl command.
install-openssl:
	$(call debian_package,command -v openssl >/dev/null,openssl,the TLS tests and benchmarks)

# The console's browser tests run Debian's chromium headless through its chromium-driver.
# Unlike ZooKeeper, a missing browser does not stop the install: those tests skip and say why.
install-chromium:
	@if ! { command -v chromium && command -v chromedriver; } >/dev/null; then \
		if [ "$$(id -u)" = 0 ]; then \
			apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; \
		else \
			echo "note: Debian packages chromium and chromium-driver are missing, so the console's" \
				"browser tests will be skipped; as root: apt-get install -y chromium chromium-driver" >&2; \
		fi; \
	fi

# KafkaJS, the Node.js client the tests in tests/kafkajs drive, at the version its lock file pins,
# from the npm registry with the machine's npm. Without npm those tests skip and say why.
install-kafkajs:
	@if command -v npm >/dev/null; then \
		npm ci --prefix tests/kafkajs --no-audit --no-fund --loglevel=error; \
	else \
		echo "note: npm (Node.js) is missing, so the KafkaJS tests will be skipped" >&2; \
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
