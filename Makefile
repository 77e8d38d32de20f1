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

.PHONY: litellm-proxy-deps install nli pg e2e-deps clients-deps clients-report demo test test-fast test-no-shared lint format clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel
	# torch first and pinned: the CPU wheel (an unpinned torch pulls GBs of CUDA packages)
	$(BIN)/pip install --quiet "torch==2.13.0"
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The offline default NLI backend ships in the package (keproxy/data/models/nli-minilm: a LoRA adapter and head
# on the packaged all-MiniLM-L6-v2, with its manifest). `make nli` rebuilds it from the repository's data
# (fixed steps, seeds and threads; ~8 min on 2 cores) into artifacts/ and prints its scores beside the shipped
# manifest's: they agree to 3 decimals.
nli: install  ## rebuild the NLI adapter from the repository (reproduces the shipped one)
	$(BIN)/keproxy train nli --out artifacts/nli-minilm --compare-shipped

demo: install  ## start the proxy on the embedded model, replay the KEIC dev set with otc,patch, print the table
	$(BIN)/keproxy demo --out demo-out $(DEMO_ARGS)

# The postgres tests start a throwaway server from Debian's binaries; as root, install them when missing
# (best effort: without them those tests skip).
pg:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
	{ apt-get install -y -q postgresql >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && \
	  apt-get install -y -q postgresql >/dev/null 2>&1; } || echo "postgresql not installed: its tests skip"; }

# The /demo page's browser test (tests/proxy/test_demo_e2e.py) drives Debian's chromium with playwright-core from npm,
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

# The real-client suite (tests/clients) drives keproxy with the openai npm SDK too, pinned in
# tests/clients/package-lock.json. Best effort, like e2e-deps: without node or npm those tests skip.
CLIENTS_DIR := tests/clients
CLIENTS_STAMP := $(CLIENTS_DIR)/node_modules/.installed-stamp

$(CLIENTS_STAMP): $(CLIENTS_DIR)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then echo "no npm: the node client tests skip"; \
	elif npm ci --prefix $(CLIENTS_DIR) --no-audit --no-fund --silent; then touch $@; \
	else echo "npm ci failed: the node client tests skip"; fi

clients-deps: $(CLIENTS_STAMP)  ## the openai npm SDK for the real-client suite (tests/clients)

clients-report: install clients-deps  ## the real-client suite (openai Python + npm SDKs) as a client x case table
	$(BIN)/python tests/clients/report.py

# `make test` runs the suite as it finds the machine (with ../shared/data when it is there) and then, when
# there was shared data, again with it hidden (KEPROXY_SHARED_DATA names a folder that does not exist), as
# anyone who clones the project alone has it: a test that needs a shared file must skip, never fail, and the
# default system must work without it. The second pass runs the test files that looked the shared folder up in
# the first (KEPROXY_SHARED_DATA_LOG, read by tests/shared_lookups.py): any other test ran the same code in
# both passes. `make test-no-shared` runs the whole suite without it.
NO_SHARED := KEPROXY_SHARED_DATA=/nonexistent/keproxy-shared-hidden
SHARED_LOG := $(CURDIR)/.pytest-shared-lookups.log

test: install pg e2e-deps clients-deps litellm-proxy-deps  ## every test, with ../shared and (what read it) without
	@rm -f $(SHARED_LOG)
	KEPROXY_SHARED_DATA_LOG=$(SHARED_LOG) $(BIN)/python -m pytest -q
	@if $(BIN)/python -c "import sys; from keproxy.datasets import shared_data_dir; sys.exit(shared_data_dir() is None)"; \
	then files="$$($(BIN)/python tests/shared_lookups.py $(SHARED_LOG))"; \
	echo "== with the shared data hidden, the test files that read it: $$(echo $$files | wc -w) =="; \
	$(NO_SHARED) $(BIN)/python -m pytest -q -p no:cacheprovider $$files; \
	else echo "no shared data here: the run above already had none"; fi

test-no-shared: install pg e2e-deps clients-deps litellm-proxy-deps  ## the suite as a clone without ../shared sees it
	$(NO_SHARED) $(BIN)/python -m pytest -q

test-fast: install pg clients-deps
	$(BIN)/python -m pytest -q -m "not e2e"

lint: install
	$(BIN)/ruff check keproxy tests
	$(BIN)/ruff format --check keproxy tests
	$(BIN)/mypy
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff format keproxy tests
	$(BIN)/ruff check --fix keproxy tests

# Proxy benchmark (bench/proxies.py): the LiteLLM proxy peer runs from its own venv, so keproxy's stays as is.
# `make bench` is the full run (~8 min on 2 cores); BENCH_ARGS="--smoke" for a ~3 min check.
BENCH_VENV ?= .bench-venv
BENCH_ARGS ?=

# The real LiteLLM proxy that tests/integrations/test_litellm_proxy.py loads keproxy's guardrail into: the same
# venv as the benchmark's peer. Best effort, like pg: without it that test skips and says why.
litellm-proxy-deps: install
	@$(BIN)/python bench/proxies.py --setup --litellm-venv $(BENCH_VENV) >/dev/null 2>&1 || \
	echo "LiteLLM proxy venv not built: tests/integrations/test_litellm_proxy.py skips"

bench-deps: install  ## the LiteLLM proxy's venv (litellm[proxy]==1.106.2) for bench/proxies.py
	$(BIN)/python bench/proxies.py --setup --litellm-venv $(BENCH_VENV)

bench: bench-deps  ## proxy overhead: direct, keproxy (3 configurations), LiteLLM proxy -> bench/results/proxies.md
	$(BIN)/python bench/proxies.py --litellm-venv $(BENCH_VENV) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) artifacts .keproxy demo-out .pytest_cache .mypy_cache .ruff_cache
