# Two commands do all set-up on a fresh machine:
#   make demo   the dashboard + one worker on the embedded default, loaded with real DeerFlow threads
#   make test   install and run the whole test suite (needs PostgreSQL and Redis; see README)
#   make check  the fast tier (no browser, no slow sweeps) in parallel workers: the developer loop
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test check install install-test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[test]"
	touch $@

install: $(VENV)/.installed

install-test: $(VENV)/.installed-test

demo: install
	./scripts/demo.sh

# pytest-xdist workers for make test and make check (make test WORKERS=0 runs serially, in one process);
# docs/operations.md has the wall times.
# --dist loadgroup keeps the xdist_group tests (tests/conftest.py: the rabbitmq ones) on one worker.
WORKERS ?= 4
XDIST := -n $(WORKERS) --dist loadgroup
TEST_ARGS ?=

# Bytecode caches on for the suite even where the environment sets PYTHONDONTWRITEBYTECODE: without them every
# xdist worker rewrites and compiles all 530 test modules (10 s of collection instead of 4) and every manage.py
# or Celery subprocess compiles the project again.
test check: export PYTHONDONTWRITEBYTECODE =

test: install-test
	./scripts/ensure-chromium.sh
	$(PY) -m pytest $(XDIST) --durations=30 $(TEST_ARGS)

check: install-test
	$(PY) -m pytest $(XDIST) -m "not slow and not browser" $(TEST_ARGS)

# Scale and speed benchmarks (issue 6): scratch Postgres databases, results in benchmarks/results/.
# BENCH_ARGS="--scale small" for a quick run.
# Production settings (DEBUG off: it logs every query), with a key of the run's own unless one is set.
bench: install
	DJANGO_SECRET_KEY="$${DJANGO_SECRET_KEY:-bench-$$($(PY) -c 'import secrets; print(secrets.token_hex(32))')}" \
		$(PY) manage.py run_benchmarks $(BENCH_ARGS)

# ruff (the rules of pyproject.toml: E501 at 120 columns everywhere), the stricter 110-column limit on the
# trees listed here, and mypy (pyproject.toml [tool.mypy]: django-stubs; strict on every deerflow package). .ci/run runs it.
LINE_LENGTH_PATHS := deerflow/runtime deerflow/reader/__init__.py deerflow/reader/gates.py deerflow/reader/reader.py \
	deerflow/reader/views.py deerflow/_langgraph_compat.py dashboard/fragments.py \
	tests/dashboard/test_web_conventions.py tests/deerflow/test_langgraph_compat.py tests/backends.py \
	tests/deerflow/convert/conftest.py tests/deerflow/retention/conftest.py

lint: install-test
	$(VENV)/bin/ruff check deerflow dashboard tests benchmarks
	$(VENV)/bin/ruff check --line-length 110 $(LINE_LENGTH_PATHS)
	$(VENV)/bin/mypy

clean:
	rm -rf var/demo
