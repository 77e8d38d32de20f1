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

.PHONY: install nli pg e2e-deps demo test test-fast lint format clean

# The offline default NLI backend: all-MiniLM-L6-v2 fine-tuned as a 3-way cross-encoder (seeded, ~6-10 min on
# 2 cores). A build artifact, not committed; rebuilt when the training code changes (`keproxy train nli` also
# skips a folder whose manifest has the same config hash).
NLI_DIR := artifacts/nli-minilm
NLI_MANIFEST := $(NLI_DIR)/keproxy-nli.json

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel
	# torch first and pinned: the CPU wheel (an unpinned torch pulls GBs of CUDA packages)
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# Training reads ../shared/data; a clone without it skips the build (tests that need the model skip too).
$(NLI_MANIFEST): $(STAMP) keproxy/train/nli.py keproxy/train/nli_data.py keproxy/train/nli_edits.py
	@if $(BIN)/python -c "import sys; from keproxy.datasets import shared_data_dir; sys.exit(shared_data_dir() is None)"; \
	then $(BIN)/keproxy train nli --out $(NLI_DIR); \
	else echo "no ../shared/data: the NLI cross-encoder is not built (its tests skip)"; fi

nli: $(NLI_MANIFEST)  ## build the offline NLI cross-encoder (cached)

demo: install  ## start the proxy on the embedded model, replay the KEIC dev set with otc,patch, print the table
	$(BIN)/keproxy demo --out demo-out $(DEMO_ARGS)

# The postgres tests start a throwaway server from Debian's binaries; as root, install them when missing
# (best effort: without them those tests skip).
pg:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
	{ apt-get install -y -q postgresql >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
	  apt-get install -y -q postgresql >/dev/null 2>&1; } || echo "postgresql not installed: its tests skip"; }

# The /demo page's browser test (tests/test_demo_e2e.py) drives Debian's chromium with playwright-core from npm,
# pinned in tests/e2e/package-lock.json. Best effort, like pg: as root, chromium is installed when missing;
# without node, the package or the browser that test skips.
E2E_DIR := tests/e2e
E2E_STAMP := $(E2E_DIR)/node_modules/.installed-stamp

$(E2E_STAMP): $(E2E_DIR)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then echo "no npm: the demo browser test skips"; \
	elif npm ci --prefix $(E2E_DIR) --no-audit --no-fund --silent; then touch $@; \
	else echo "npm ci failed: the demo browser test skips"; fi

e2e-deps: $(E2E_STAMP)  ## playwright-core (npm) and Debian's chromium for the /demo browser test
	@[ -x /usr/bin/chromium ] || [ "$$(id -u)" != 0 ] || \
	{ apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
	  apt-get install -y -q chromium >/dev/null 2>&1; } || echo "chromium not installed: the demo browser test skips"; }

test: install nli pg e2e-deps  ## every test: fast tier and the end-to-end tier on the real local model
	$(BIN)/python -m pytest -q

test-fast: install nli pg
	$(BIN)/python -m pytest -q -m "not e2e"

lint: install
	$(BIN)/ruff check keproxy tests
	$(BIN)/ruff format --check keproxy tests
	$(BIN)/mypy

format: install
	$(BIN)/ruff format keproxy tests
	$(BIN)/ruff check --fix keproxy tests

# Proxy benchmark (bench/proxies.py): the LiteLLM proxy peer runs from its own venv, so keproxy's stays as is.
# `make bench` is the full run (~8 min on 2 cores); BENCH_ARGS="--smoke" for a ~3 min check.
BENCH_VENV ?= .bench-venv
BENCH_ARGS ?=

bench-deps: install  ## the LiteLLM proxy's venv (litellm[proxy]==1.106.2) for bench/proxies.py
	$(BIN)/python bench/proxies.py --setup --litellm-venv $(BENCH_VENV)

bench: bench-deps  ## proxy overhead: direct, keproxy (3 configurations), LiteLLM proxy -> bench/results/proxies.md
	$(BIN)/python bench/proxies.py --litellm-venv $(BENCH_VENV) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) artifacts .keproxy demo-out .pytest_cache .mypy_cache .ruff_cache
