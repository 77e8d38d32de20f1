# One task runner for people and CI (.ci/run calls `make test`).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
export HF_HUB_OFFLINE := 1
export LITELLM_LOCAL_MODEL_COST_MAP := True

# Demo knobs: by default the first 20 dev instances with their first support_new variant, all 15 templates,
# otc and patch: 600 dialogues, ~10 min on 2 idle cores. The whole dev set: DEMO_ARGS="--variants 3"
# (5,400 dialogues); a quick look: DEMO_ARGS="--limit 3 --variants 1".
DEMO_ARGS ?= --limit 20 --variants 1

.PHONY: install demo test test-fast lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel
	# torch first and pinned: the CPU wheel (an unpinned torch pulls GBs of CUDA packages)
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install  ## start the proxy on the embedded model, replay the KEIC dev set with otc,patch, print the table
	$(BIN)/keproxy demo --out demo-out $(DEMO_ARGS)

test: install  ## every test: fast tier and the end-to-end tier on the real local model
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not e2e"

lint: install
	$(BIN)/ruff check keproxy tests
	$(BIN)/ruff format --check keproxy tests
	$(BIN)/mypy

format: install
	$(BIN)/ruff format keproxy tests
	$(BIN)/ruff check --fix keproxy tests

clean:
	rm -rf $(VENV) .keproxy demo-out .pytest_cache .mypy_cache .ruff_cache
