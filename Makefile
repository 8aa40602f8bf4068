# The two set-up commands of the README: `make render` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
STACK ?= dev
OUT ?= rendered/$(STACK)

.PHONY: render test clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,e2e]'
	touch $@

render: $(VENV)/.installed
	$(VENV)/bin/trainjobs render stacks/__main__.py --stack $(STACK) --out $(OUT)

test: $(VENV)/.installed
	scripts/install-e2e-deps
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) rendered .pytest_cache
