#!/usr/bin/env bash
# Prepared check of the Co-RL engine on a GPU machine without internet, in under 8 minutes:
# builds two ~100M-parameter random models locally (Qwen3 and Llama configs, tokenizer trained
# by councilzoo.testing), trains a 2-member Co-RL cohort 3 steps in bf16 with vLLM colocated
# through the real command (`python -m councilzoo.cli train corl CONFIG`), then reports peak GPU
# memory (nvidia-smi, vLLM's reserved pool included), tokens/s (TRL's num_tokens and step_time) and
# the fraction of non-embedding weights each member changed (bf16 keeps fp32 master weights, so ~1),
# then TRACER 2 steps on the first model with LoRA (adapters must load with peft), then a cohort of
# two tiny vision-language models (Qwen2.5-VL and Idefics3 configs) 2 steps on synthetic image
# problems (bf16 on the GPU; models written by the trainer must load again).
# Each member gets its own GPU when there are 2+, else both share GPU 0 at lower vLLM memory.
# Where vLLM is not installed (an image that cannot install it offline), TRL generates with
# transformers instead, and the environment phase says so.
#
# Usage: scripts/gpu_check.sh [OUT_DIR]        (default: a fresh temporary folder)
# Env:   PYTHON (default python3; councilzoo is imported through the caller's PYTHONPATH)
#        GPU_CHECK_CPU=1: dry run on CPU (tiny models, no vLLM, use_cpu, 2 steps)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
OUT="${1:-$(mktemp -d -t councilzoo-gpu-check.XXXXXX)}"
CPU="${GPU_CHECK_CPU:-0}"
mkdir -p "$OUT"
cd "$ROOT"
# No network: everything is local, and nothing may try the hub or a tracker.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=disabled
# transformers 5.2x loads hub kernels by default on a GPU (from_pretrained's use_kernels=None):
# offline, that fails at the first model.train() unless the kernels are cached, so they are off.
export USE_HUB_KERNELS=0
export VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
if [[ $CPU == 1 ]]; then
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # two members share the cores; more threads spin
fi
export PYTHON OUT CPU GPU_CHECK_OUT="$OUT" GPU_CHECK_CPU="$CPU"
SUMMARY=()

# phase NAME SECONDS FUNCTION [SIGNAL]: run FUNCTION (exported) under `timeout`, print and record
# PASS/FAIL; stop at the first FAIL. The train phase is stopped with SIGINT, so the launcher's
# cleanup stops every member's world (they run in their own sessions).
phase() {
    local name="$1" limit="$2" fn="$3" sig="${4:-TERM}" start status=0
    echo "=== phase: $name (timeout ${limit}s) ==="
    start=$SECONDS
    timeout --signal="$sig" --kill-after=30 "$limit" bash -c "$fn" || status=$?
    local line
    if [[ $status == 0 ]]; then
        line="PASS $name ($((SECONDS - start)) s)"
    elif [[ $status == 124 || $status == 137 ]]; then
        line="FAIL $name (timed out after ${limit} s)"
    else
        line="FAIL $name (exit status $status)"
    fi
    echo "$line"
    SUMMARY+=("$line")
    if [[ $status != 0 ]]; then
        printf '%s\n' "--- summary ---" "${SUMMARY[@]}"
        exit 1
    fi
}

check_environment() {
    if [[ $CPU != 1 ]]; then nvidia-smi -L; fi
    "$PYTHON" - <<'PY'
import os

import torch
import trl

import councilzoo

print(f"councilzoo {councilzoo.__file__}, torch {torch.__version__}, trl {trl.__version__}")
if os.environ["GPU_CHECK_CPU"] == "1":
    print("dry run on CPU: tiny models, no vLLM")
else:
    import importlib.util

    assert torch.cuda.is_available(), "no CUDA device visible"
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    if importlib.util.find_spec("vllm") is not None:
        import vllm

        print(f"vllm {vllm.__version__}; {len(names)} GPU(s): {names}")
    else:
        print(f"vllm not installed: TRL generates with transformers; {len(names)} GPU(s): {names}")
PY
}

build_models() {
    "$PYTHON" - <<'PY'
import json
import os
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from councilzoo.tiny_models import warm_up
from councilzoo.tasks import synthetic_problems
from councilzoo.testing import build_tiny_model

out = Path(os.environ["GPU_CHECK_OUT"]) / "models"
cpu = os.environ["GPU_CHECK_CPU"] == "1"
# ~108M parameters: 10 layers x 5.9M + 2 x 32000 x 768 (untied embeddings); CPU: the default tiny model.
size = {} if cpu else dict(hidden_size=768, num_layers=10, num_heads=12, head_dim=64, vocab_size=32000)
items = synthetic_problems("multiple_choice", 64, 0, 0.2)
counts = {}
for seed, (name, family) in enumerate((("qwen", "qwen3"), ("llama", "llama"))):
    base = build_tiny_model(out / f"{name}-base", family=family, seed=seed, **size)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    if not cpu:
        model.cuda()
    # Random models state no answers; a few SFT steps teach "\boxed{X}" so labels and rewards vary.
    warm_up(model, tokenizer, items, steps=40, seed=seed, lr=1e-3 if not cpu else 3e-3)
    model.cpu().save_pretrained(out / name)
    tokenizer.save_pretrained(out / name)
    counts[name] = sum(p.numel() for p in model.parameters())
    print(f"{name}: {family}, {counts[name] / 1e6:.1f}M parameters, vocab {len(tokenizer)} -> {out / name}")
(out / "params.json").write_text(json.dumps(counts))
PY
}

write_config() {
    "$PYTHON" - <<'PY'
import os
import socket
from pathlib import Path

import yaml

out = Path(os.environ["GPU_CHECK_OUT"])
cpu = os.environ["GPU_CHECK_CPU"] == "1"
trainer = {"bf16": True, "learning_rate": 1e-6, "temperature": 1.0, "logging_steps": 1}
if cpu:
    trainer["use_cpu"] = True
    devices, shape = [None, None], dict(num_generations=4, prompts_per_step=2, max_completion_length=16)
    steps = 2
else:
    import importlib.util

    import torch

    gpus = torch.cuda.device_count()
    devices = ["0", "1"] if gpus >= 2 else ["0", "0"]
    memory = 0.3 if gpus >= 2 else 0.15  # two colocated vLLM engines on one GPU: half each
    if importlib.util.find_spec("vllm") is not None:
        trainer.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=memory)
    shape = dict(num_generations=8, prompts_per_step=8, max_completion_length=256)
    steps = 3
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
members = [
    {"name": name, "model": str(out / "models" / name), "view": view}
    | ({"devices": dev} if dev is not None else {})
    for view, (name, dev) in enumerate(zip(("qwen", "llama"), devices, strict=True))
]
config = {
    "members": members,
    "reward_rule": "ring",
    **shape,
    "max_steps": steps,
    "seed": 0,
    "output_dir": str(out / "run"),
    "save_steps": 0,
    "report_to": ["none"],
    "data": {"dataset": "synthetic:multiple_choice", "num_problems": 64, "difficulty": 0.2},
    "distributed": {"port": port},
    "trainer": trainer,
}
(out / "corl.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
print((out / "corl.yaml").read_text(), end="")
PY
}

train() {
    local poller=""
    if [[ $CPU != 1 ]]; then
        timeout 600 nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 \
            > "$OUT/gpu_memory.csv" &
        poller=$!
    fi
    local status=0
    "$PYTHON" -m councilzoo.cli train corl "$OUT/corl.yaml" --overwrite || status=$?
    if [[ -n $poller ]]; then kill "$poller" 2>/dev/null || true; fi
    return "$status"
}

report() {
    "$PYTHON" - <<'PY'
import csv
import os
from pathlib import Path

import yaml
from safetensors.torch import load_file

from councilzoo.learners.logging import read_metrics

out = Path(os.environ["GPU_CHECK_OUT"])
config = yaml.safe_load((out / "corl.yaml").read_text())
failures = []
memory = out / "gpu_memory.csv"
if memory.is_file():
    peak: dict[str, int] = {}
    for index, used in csv.reader(memory.open()):
        peak[index.strip()] = max(peak.get(index.strip(), 0), int(used))
    print("peak GPU memory (nvidia-smi, MiB): " + ", ".join(f"GPU {i}: {m}" for i, m in sorted(peak.items())))
else:
    print("peak GPU memory: n/a (CPU dry run)")
for member in config["members"]:
    name = member["name"]
    rows = [r for r in read_metrics(out / "run" / "members" / name / "metrics.jsonl") if "step_time" in r]
    if len(rows) != config["max_steps"]:
        failures.append(f"{name}: {len(rows)} logged steps, expected {config['max_steps']}")
        continue
    # step_time: TRL's training_step (generation, reward, loss, backward); num_tokens: cumulative.
    later = rows[1:] or rows
    tokens = rows[-1]["num_tokens"] - (rows[0]["num_tokens"] if len(rows) > 1 else 0)
    tokens_per_s = tokens / sum(r["step_time"] for r in later)
    before = load_file(Path(member["model"]) / "model.safetensors")
    after = load_file(out / "run" / "members" / name / "final" / "model.safetensors")
    weights = [k for k in before if "embed_tokens" not in k]  # rows of unseen tokens get no gradient
    changed = sum(int((before[k] != after[k].to(before[k].dtype)).sum()) for k in weights)
    fraction = changed / sum(before[k].numel() for k in weights)
    dtype = next(iter(after.values())).dtype
    print(f"{name}: {len(rows)} steps, reward {rows[-1].get('reward'):.3f}, "
          f"label_accuracy {rows[-1].get('label_accuracy', float('nan')):.3f}, "
          f"{tokens_per_s:.0f} tokens/s (steps after the first), "
          f"non-embedding weights changed {fraction:.4f} "
          f"(saved {dtype})")
    if not tokens_per_s > 0:
        failures.append(f"{name}: no tokens/s")
    # bf16 keeps fp32 master weights: a 1e-6 step moves nearly every weight (pure bf16 would not).
    if fraction < 0.5:
        failures.append(f"{name}: only {fraction:.4f} of the weights changed")
if failures:
    raise SystemExit("; ".join(failures))
PY
}

tracer() {
    # TRACER 2 steps on the first model: controllers by regret matching, utterances by GSPO on
    # TRL's GRPOTrainer with LoRA (bf16 on a GPU); the adapters must load with peft afterwards.
    "$PYTHON" - <<'PY'
import os
import subprocess
import sys
from pathlib import Path

import yaml

out = Path(os.environ["GPU_CHECK_OUT"])
cpu = os.environ["GPU_CHECK_CPU"] == "1"
model = yaml.safe_load((out / "corl.yaml").read_text())["members"][0]["model"]
config = {
    "max_steps": 2, "problems_per_step": 4, "output_dir": str(out / "tracer"), "save_steps": 0,
    "env": {"rounds": 3, "lam": 0.01}, "baselines": ["never_review"],
    "agents": {"kind": "llm", "model": model, "max_new_tokens": 32 if cpu else 128,
               "device": "cpu" if cpu else "cuda"},
    "generation": {"enabled": True, "num_candidates": 4, "turns_per_step": 4,
                   "trainer": {"learning_rate": 1e-5, **({} if cpu else {"bf16": True})},
                   "peft": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}},
    "data": {"synthetic_size": 16, "eval_limit": 4},
}
(out / "tracer.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
subprocess.run([sys.executable, "-m", "councilzoo.cli", "train", "tracer", str(out / "tracer.yaml"),
                "--overwrite"], check=True)
from peft import PeftModel
from transformers import AutoModelForCausalLM

PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model), out / "tracer" / "final")
print("tracer: 2 steps, adapters in", out / "tracer" / "final", "load with peft")
PY
}

vlm_cohort() {
    # Two tiny random VLM families, built offline, trained 2 steps by the same learner engine.
    "$PYTHON" - <<'PY'
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

out = Path(os.environ["GPU_CHECK_OUT"])
cpu = os.environ["GPU_CHECK_CPU"] == "1"
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
config = {
    "members": [{"name": "qwen25vl", "tiny_family": "qwen2_5_vl", "view": 0, "tiny_warmup_steps": 20},
                {"name": "idefics3", "tiny_family": "idefics3", "view": 1, "tiny_warmup_steps": 20}],
    "reward_rule": "ring", "num_generations": 4, "prompts_per_step": 2, "max_completion_length": 16,
    "max_steps": 2, "seed": 0, "output_dir": str(out / "vlm"), "save_steps": 0, "report_to": ["none"],
    "data": {"dataset": "synthetic:visual", "num_problems": 16, "difficulty": 0.2},
    "distributed": {"port": port},
    "trainer": {"learning_rate": 1e-4, "logging_steps": 1, **({"use_cpu": True} if cpu else {"bf16": True})},
}
(out / "vlm.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
subprocess.run([sys.executable, "-m", "councilzoo.cli", "train", "corl", str(out / "vlm.yaml"), "--overwrite"],
               check=True)
from transformers import AutoModelForImageTextToText, AutoProcessor

for member in config["members"]:
    final = out / "vlm" / "members" / member["name"] / "final"
    AutoModelForImageTextToText.from_pretrained(final), AutoProcessor.from_pretrained(final)
    print(f"vlm {member['name']}: 2 steps, model in {final} loads")
PY
}

export -f check_environment build_models write_config train report tracer vlm_cohort
# GPU limits add up to under 10 minutes (575 s); the CPU dry run may take longer on a busy machine.
phase environment 30 check_environment
phase models 90 build_models
phase config 15 write_config
phase train "$([[ $CPU == 1 ]] && echo 600 || echo 240)" train INT
phase report 20 report
phase tracer "$([[ $CPU == 1 ]] && echo 600 || echo 90)" tracer
phase vlm "$([[ $CPU == 1 ]] && echo 600 || echo 90)" vlm_cohort
printf '%s\n' "--- summary ---" "${SUMMARY[@]}"
echo "outputs in $OUT"
