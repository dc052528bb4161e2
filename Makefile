# One entry point for setup, the demo and the tests (see README.md).
#   make demo   set up .venv and run `councilzoo demo` offline on CPU
#   make test   set up .venv (+ .venv-vllm for the vLLM tier), lint, run every test tier
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU machines take the local CPU wheel; GPU machines: make setup TORCH_SPEC="torch>=2.6,<2.15"
TORCH_SPEC ?= torch==2.13.0
EXTRAS ?= dev,openai

.PHONY: setup demo test lint test-core test-vllm vllm-env clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	touch $@

demo: setup
	$(VENV)/bin/councilzoo demo --out demo-out

lint: setup
	$(VENV)/bin/ruff check .

test-core: setup
	$(VENV)/bin/pytest -q -m "not vllm"

vllm-env:
	bash scripts/setup_vllm_env.sh

test-vllm: setup vllm-env
	$(VENV)/bin/pytest -q -m vllm

# The vLLM environment (a ~2.5 GB install, mostly download) is built while the core tiers run.
test: lint
	$(MAKE) -j2 --output-sync=target test-core vllm-env
	$(MAKE) test-vllm

clean:
	rm -rf $(VENV) .venv-vllm demo-out .pytest_cache .ruff_cache
