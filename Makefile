# `make demo`: set up .venv and fit the default hierarchical BNN on moons.
# `make test`: set up .venv and run the test suite on two workers (what .ci/run calls).
# `make docs`: the documentation site in docs/_build/html, every gallery notebook executed, warnings as errors.
# `make mnist`: the Bayesian CNN on MNIST (about 16 min on 2 cores; MNIST_DIR or a download).
# `make bbb`: Bayes by Backprop, 2x400 MLP on MNIST, with pruning (about 15 min on 2 cores).
# `make regression`: the two 1-D regression experiments with their beta sweep.
# `make all-priors`: the 16 prior x hyperprior pairs on moons and on circles, compared by LOO.
# PYTHON may be set to any Python >= 3.12; otherwise the first found is used.
SHELL := /bin/bash
VENV := .venv
PYTHON ?= $(shell for p in python3.12 python3.13 python3 \
	$$HOME/.pyenv/versions/3.12*/bin/python3 $$HOME/.pyenv/versions/3.13*/bin/python3; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && { echo $$p; break; }; done)

.PHONY: demo test docs all-priors mnist bbb regression clean
# Python writes each module's bytecode into .venv when it first imports it, whatever the shell
# says (PYTHONDONTWRITEBYTECODE=1 would make every test process compile its imports anew).
export PYTHONDONTWRITEBYTECODE :=

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: no Python >= 3.12 found; set PYTHON=/path/to/python3.12" >&2; exit 2; }
	$(PYTHON) -m venv $(VENV)
	@# No bytecode at install: pip would compile all 10,000 modules one at a time, most of them never
	@# imported (the packages' own tests); each is compiled when first imported (the export of PYTHONDONTWRITEBYTECODE above).
	$(VENV)/bin/python -m pip install -q --no-compile -e '.[test]'
	touch $@

$(VENV)/.docs-installed: $(VENV)/.installed
	$(VENV)/bin/python -m pip install -q --no-compile -e '.[test,docs]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/bnn-zoo moons

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q -n 2

docs: $(VENV)/.docs-installed
	$(VENV)/bin/python docs/run_notebooks.py
	$(VENV)/bin/sphinx-build -W --keep-going -j auto -b html docs docs/_build/html

all-priors: $(VENV)/.installed
	$(VENV)/bin/bnn-zoo toy --all-priors

mnist: $(VENV)/.installed
	$(VENV)/bin/bnn-zoo mnist-cnn --lr-decay-epochs 23

bbb: $(VENV)/.installed
	$(VENV)/bin/bnn-zoo mnist-bbb --prune

regression: $(VENV)/.installed
	$(VENV)/bin/bnn-zoo regression

clean:
	rm -rf $(VENV) results docs/_build docs/api
