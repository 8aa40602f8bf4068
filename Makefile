# The two set-up commands of the README: `make render` and `make test`; `make bench` measures performance.
VENV ?= .venv
PY := $(VENV)/bin/python
# Packages go in with uv, pinned, which pip installs first (only when something is to be installed): from its
# cache uv hard-links them into the virtualenv, in parallel, where pip would unpack every wheel again (torch's
# with its CUDA libraries comes to gigabytes). Measured in docs/performance.md.
UV_VERSION := 0.13.8
UV := $(VENV)/bin/uv
PIP := $(UV) --version 2>/dev/null | grep -qx 'uv $(UV_VERSION)' \
	|| $(PY) -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION); \
	$(UV) pip install --quiet --python $(PY)
STACK ?= dev
# The oldest and the newest Python that requires-python admits. `make test` runs on them the tests of what differs
# between versions, not the whole fast suite (scripts/test-other-pythons names them and says why): every module
# imported and the lazy imports (syntax, typing), argument refusals, the hostile inputs that meet the interpreter's
# limits and Unicode database, the CLI (argparse, a closed pipe), Pulumi's runtime under mocks (asyncio), run-local's
# helpers (os, socket, ioctls), each version's wheels of PyYAML, grpcio, pydantic, cryptography, pulumi-policy and
# Kubeflow's models, the programs `trainjobs import` prints, the generated docs and schema (byte-identical) and the
# docs' Python blocks; in two parts per version. The derivation rules, schemas, scheduling tables, corpus of bad
# inputs, properties and size and speed tests compute the same on every version and run on the main Python only.
OTHER_PYTHONS ?= 3.10 3.13
# Parallel test workers. More than a 2-core machine's cores: the end-to-end tests' two workers mostly wait on
# their pods, and the longest tests each keep one worker: the two end-to-end groups, each other Python's tests,
# the installed wheel's, torchtune's (tests/conftest.py).
TEST_WORKERS ?= 6
OUT ?= rendered/$(STACK)

.PHONY: render test $(OTHER_PYTHONS:%=venv-%) test-system-deps bench clean cluster cluster-down cluster-controllers test-cluster

$(PY):
	python3 -m venv $(VENV)

# The library alone: enough to render.
# Byte-compiled as pip does (uv would not by default): where PYTHONDONTWRITEBYTECODE is set, every render would
# compile pulumi's and the others' modules again.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) --compile-bytecode -e .
	touch $@

# Test tools and what the end-to-end tests run in emulated pods (torch's CPU build, ...). Not byte-compiled: the
# tests run without PYTHONDONTWRITEBYTECODE, so the first process to import a module writes its bytecode, for
# what they import only (a few thousand of the virtualenv's 17,000 modules; measured in docs/performance.md).
$(VENV)/.installed-test: pyproject.toml $(VENV)/.installed
	$(PIP) -e '.[test,e2e]'
	touch $@

render: $(VENV)/.installed
	$(VENV)/bin/trainjobs render stacks/__main__.py --stack $(STACK) --out $(OUT)

# What the tests need is installed side by side (a make of its own, -j): the test and e2e extras, each other Python's
# virtualenv (scripts/test-other-pythons --install, from one wheel), the system packages and Mermaid. On a fresh
# clone the extras take the longest; the rest used to wait for them, and the other Pythons' virtualenvs were built
# within the tests, one after the other. The tests write the library's and their own bytecode (pytest's rewritten
# asserts) even where the environment says not to (PYTHONDONTWRITEBYTECODE): else each worker and each process the
# tests start compiles them again.
test: $(VENV)/.installed
	$(MAKE) --no-print-directory -j $(words $(OTHER_PYTHONS) extras system) $(VENV)/.installed-test \
		$(OTHER_PYTHONS:%=venv-%) test-system-deps
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -n $(TEST_WORKERS) --other-pythons "$(OTHER_PYTHONS)" $(PYTEST_ARGS)

$(OTHER_PYTHONS:%=venv-%): venv-%: $(VENV)/.installed
	scripts/test-other-pythons --install $*

test-system-deps:
	scripts/install-e2e-deps
	scripts/install-mermaid

# About 13 minutes on a quiet 2-core machine (the launcher section needs root and sshd); not part of `make test`.
# BENCH_ARGS="--only register" for one section, "--run-local" to add run-local vs bare torchrun and at 3 and 40
# MPI hosts (needs root and the e2e packages). See docs/performance.md.
bench: $(VENV)/.installed
	$(PY) bench/run.py $(BENCH_ARGS)

# The real engine on this machine (docs/real-engine.md): builds the Pulumi CLI, the Kubernetes provider and a
# control plane from Go modules (cached in ~/.cache/trainjobs-engine; the first build takes long), starts them
# with state in .cluster/, prints the export lines (also in .cluster/env). `make cluster-down` stops it all.
cluster:
	scripts/engine/cluster.sh up

# The same cluster with the JobSet and Kueue controllers from their modules, their webhooks on loopback, and the
# queues the example stacks name (docs/real-engine.md); `make cluster` keeps to the small one. `make test-cluster`
# uses it (tests/cluster/test_kueue_controller.py needs it).
cluster-controllers:
	TRAINJOBS_CLUSTER_CONTROLLERS=jobset,kueue scripts/engine/cluster.sh up

cluster-down:
	scripts/engine/cluster.sh down

# The controllers `make test-cluster` starts the cluster with (CLUSTER_CONTROLLERS= for the small cluster).
CLUSTER_CONTROLLERS ?= jobset,kueue

# How many pytest-xdist workers run the real-engine suite against the one cluster: its tests mostly wait, so more
# than the cores (docs/performance.md); tests/cluster/conftest.py groups those that share something cluster-wide.
CLUSTER_WORKERS ?= 6

# The real-engine suite (tests/cluster), on the cluster of `make cluster-controllers`, started if needed; with
# PYTEST_ARGS naming test files (tests/cluster/test_x.py), those alone.
test-cluster: $(VENV)/.installed-test
	TRAINJOBS_CLUSTER_CONTROLLERS=$(CLUSTER_CONTROLLERS) scripts/engine/cluster.sh up > /dev/null
	. "$${TRAINJOBS_CLUSTER_DIR:-.cluster}/env" && TRAINJOBS_CLUSTER_TESTS=1 $(PY) -m pytest \
		$(if $(filter tests/%,$(PYTEST_ARGS)),,tests/cluster) -n $(CLUSTER_WORKERS) --dist loadgroup $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(OTHER_PYTHONS:%=.venv-%) $(OTHER_PYTHONS:%=.venv-%.lock) .venv-wheel rendered .pytest_cache
