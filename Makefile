# Thin wrappers over scripts/ (which also work without make).
.PHONY: help env build lab test student bench lite clean distclean

VENV ?= .venv
PY := $(VENV)/bin/python
LAB_ARGS ?=      # e.g. make lab LAB_ARGS="--port 8899"
PYTEST_ARGS ?=   # e.g. make test PYTEST_ARGS="-x -q"

help:
	@echo "make lab        JupyterLab on notebooks/ (creates .venv on first use)"
	@echo "make build      recompile the per-packet modules after editing them (setup.py)"
	@echo "make test       all tests: unit, browser, binder env, nbval  (scripts/test.sh)"
	@echo "make student    student/ copies (answers stubbed) and solutions/ answer keys"
	@echo "make bench      run benchmarks/*.py"
	@echo "make lite       _site/: the collection for the browser (JupyterLite; serve it with"
	@echo "                python -m http.server -d _site 8000, online only: Pyodide's CDN)"
	@echo "make clean      remove caches, build files and screenshots (keeps .venv)"
	@echo "make distclean  clean + remove .venv"

env:
	bash scripts/setup-env.sh

build: env
	$(PY) setup.py -q build_ext --inplace
	@$(PY) -c 'import routelab.accel as a; print(a.status())'

lab:
	bash scripts/lab.sh $(LAB_ARGS)

test:
	bash scripts/test.sh $(PYTEST_ARGS)

student: env
	$(PY) scripts/student.py

bench: env
	@set -e; found=0; for f in benchmarks/*.py; do \
	  [ -e "$$f" ] || continue; found=1; \
	  echo "== $$f"; $(PY) "$$f"; \
	done; [ $$found = 1 ] || echo "no benchmarks/*.py yet"

lite: env
	$(PY) scripts/build_lite.py --output _site

clean:
	rm -rf screenshots student solutions .pytest_cache .hypothesis build dist *.egg-info .ci-state _site
	find . -path ./$(VENV) -prune -o \( -name __pycache__ -o -name .ipynb_checkpoints \) -type d -print0 | xargs -0 -r rm -rf

distclean: clean
	rm -rf $(VENV)
