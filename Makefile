# The two set-up commands of the README:
#   make demo   creates .venv, installs promptcache with its extras, runs the main job
#   make test   creates .venv, installs promptcache with its extras, runs the test suite
# torch is pinned here (a CPU build lies on the build machines' disk; an open range would pull
# a multi-GB CUDA build).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
TORCH  := torch==2.13.0

.PHONY: demo test install lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet -e '.[local,plot,dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/promptcache demo

test: $(STAMP)
	@rm -f $(VENV)/.pytest-rc
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; echo $$rc > $(VENV)/.pytest-rc; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check promptcache tests bench
	$(BIN)/mypy

bench: $(STAMP)
	for b in bench/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
