# Single entry points: setup, demo, airflow (the UI), test, lint, bench.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo airflow registry-standin test lint format docs docs-build bench-transfer bench-pipeline bench-cache-seed bench-quantize bench-bytes bench-sweep bench-hosts bench-farm bench-file-paging bench-dag-parse bench-forms bench-channels bench-warm-start bench-upgrade bench-demo bench-smoke-protocol bench-measurement-noise clean

setup: $(STAMP)

# requirements-deploy.txt: the Celery + PostgreSQL extras (the deployment tests start a real deployment)
# pip stays quiet (its log goes to $(VENV)/pip.log); a line every 10 s says the install is alive.
$(STAMP): requirements.txt requirements-runtime.txt requirements-deploy.txt constraints.txt pyproject.toml
	@echo "setup: installing the Python packages into $(VENV) (about 2 minutes the first time; log $(VENV)/pip.log)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@( $(PY) -m pip install --quiet --upgrade "pip>=24" \
	  && $(PY) -m pip install --quiet -r requirements.txt -r requirements-deploy.txt -c constraints.txt \
	  && $(PY) -m pip install --quiet --no-deps --no-build-isolation -e . ) >$(VENV)/pip.log 2>&1 & pid=$$!; \
	  s=0; while kill -0 $$pid 2>/dev/null; do sleep 1; s=$$((s + 1)); \
	    if [ $$((s % 10)) -eq 0 ]; then echo "setup: still installing ($${s}s)"; fi; done; \
	  if wait $$pid; then echo "setup: done in $${s}s"; else tail -n 20 $(VENV)/pip.log; exit 1; fi
	@touch $(STAMP)

demo: setup
	$(PY) -m neuronforge.interfaces.demo

# docs/optimum-registry.md on a machine without a Hub account or Neuron SDK: a LOCAL STAND-IN (tests/fakes:
# a fake Hub on 127.0.0.1 and the fake Neuron SDK 2.26.1) until Ctrl+C; `. .neuronforge/standin/env.sh` uses it
registry-standin: setup
	$(PY) -m tests.fakes.standin

# The Airflow UI of this checkout on http://127.0.0.1:$(PORT) (prints the login; Ctrl+C stops it)
PORT ?= 8080
airflow: setup
	$(PY) -m neuronforge.interfaces.cli airflow --port $(PORT)

# neuronforge_toolchain runs in the SDK images' own Pythons: 3.10 is the oldest (SDK 2.21.1, the LMI image);
# launch_fetch runs in a serving image's python3, embedded in the launch scripts: 3.8 (its annotations are
# never evaluated: `from __future__ import annotations`)
VERMIN := $(VENV)/bin/vermin -t=3.10- --violations --no-tips --eval-annotations neuronforge_toolchain && \
	$(VENV)/bin/vermin -t=3.8- --violations --no-tips neuronforge/artifacts/launch_fetch.py

# Every script a serving host runs (neuronforge/artifacts/launch_templates/), shellchecked as the profiles and a
# release channel render it, and as rendered from values holding every shell metacharacter (tests/launch_scripts.py)
SHELLCHECK := PYTHONPATH=. $(PY) -m tests.launch_scripts shellcheck

# The suite on TEST_WORKERS processes (pytest-xdist): each test module stays on one worker, so the servers
# a module's fixtures start are started once there (the deployment test's one deployment included).
# Three on a 2-core machine: much of the suite waits (servers starting, polls, subprocesses), so a third
# worker fills the idle cores. Measured on 2026-11-30 (4 338 tests, one machine, the same code): 62 min
# with 3 workers; CI ran the same suite on 2 in 85 min, two minutes under its limit (docs/development.md).
TEST_WORKERS ?= 3
test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/hadolint docker/*.Dockerfile
	$(SHELLCHECK)
	$(VERMIN)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/hadolint docker/*.Dockerfile
	$(SHELLCHECK)
	$(VERMIN)

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# The documentation site (mkdocs.yml, docs/): served with live reload on http://127.0.0.1:8000
docs: setup
	$(VENV)/bin/mkdocs serve

# The same site as static files in site/, failing on any warning (a broken link, a page not in the nav)
docs-build: setup
	$(VENV)/bin/mkdocs build --strict

bench-pipeline: setup
	$(PY) bench/pipeline.py

bench-smoke-protocol: setup
	$(PY) bench/smoke_protocol.py

bench-quantize: setup
	$(PY) bench/quantize.py

bench-cache-seed: setup
	$(PY) bench/cache_seed.py

bench-bytes: setup
	$(PY) bench/bytes_moved.py

bench-transfer: setup
	$(PY) bench/transfer.py

bench-sweep: setup
	$(PY) bench/sweep.py

bench-file-paging: setup
	$(PY) bench/file_store_paging.py

bench-farm: setup
	$(PY) bench/farm_scale.py

# .neuronforge/: what `make demo`, `make airflow` and every documented example wrote (Airflow home, store, work
# dir, sweep files, resolved channels); test-artifacts/: kept test outputs; site/: `make docs-build`;
# build/, *.egg-info, __pycache__/: what `pip install -e .` and Python leave. Afterwards `git status --ignored`
# shows nothing (tests/test_docs.py runs every documented example, then this).
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis .neuronforge test-artifacts site build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

bench-hosts: setup
	$(PY) bench/neuron_host_time.py --model $(BENCH_ARGS)

bench-dag-parse: setup
	$(PY) bench/dag_parse.py --against a16237d --against 84cc6b1

bench-forms: setup
	$(PY) bench/forms_middleware.py

bench-channels: setup
	$(PY) bench/channels.py

bench-warm-start: setup
	$(PY) bench/warm_start.py

bench-upgrade: setup
	$(PY) bench/upgrade_cost.py $(BENCH_ARGS)

# make demo's steps timed in a fresh clone, with the machine's load (the README's times); BENCH_ARGS=--setup
# times the install too
# the protocol's noise per figure and repetition count on this machine, false regressions of the default gate
bench-measurement-noise: setup
	$(PY) bench/measurement_noise.py $(BENCH_ARGS)

bench-demo: setup
	$(PY) bench/demo.py $(BENCH_ARGS)
