"""Evaluate collaboration protocols (single model, self-consistency, debate, COMED, ...) with your own models.

    python examples/evaluate_protocols.py          # the shipped tiny LMs on transformers, CPU
    python examples/evaluate_protocols.py --endpoint http://127.0.0.1:8000/v1 --model NAME
                                                   # any OpenAI-compatible server (vllm serve NAME, ...)

A council is a dict (or an agents YAML file, ``councilzoo eval --agents FILE``): named models, then
the seats they take. COMED's anchor answers first, its probe (``peers[0]``) checks, its verifier
decides; COMED's thresholds are fitted on the dev problems, never on the test ones. By default the
seats are the tiny LMs shipped in ``councilzoo/data/tiny_lms`` (trained on two-digit addition): a
no-carry specialist anchors, a carry specialist probes, a trained verifier picks.
"""

import argparse

from councilzoo.config import load_config
from councilzoo.evaluation.council import CouncilConfig
from councilzoo.evaluation.harness import Evaluation, print_table
from councilzoo.repro.tiny_lms import addition_problems, tiny_lm

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--endpoint", help="an OpenAI-compatible /v1 URL (default: the local tiny LMs)")
parser.add_argument("--model", default="my-model", help="the served model's name (with --endpoint)")
parser.add_argument("--test", type=int, default=40, help="test problems")
parser.add_argument("--dev", type=int, default=40, help="dev problems, to fit COMED's thresholds on")
args = parser.parse_args()

sampling = {"sampling": {"max_new_tokens": 12, "temperature": 1.0}}
if args.endpoint:  # every seat is one served model; vLLM: `vllm serve NAME`, then --endpoint http://HOST:8000/v1
    served = {"type": "openai", "kwargs": {"model": args.model, "base_url": args.endpoint}, "agent": sampling}
    models = {"anchor": served, "probe": served, "verifier": served}
else:  # in-process transformers on CPU (any local folder or hub name: {"type": "transformers", ...})
    # The tiny LMs were fine-tuned on a prompt of their own (the question alone), so their seats are
    # built by a "package.module:function" that returns an LLMAgent over a TransformersGenerator.
    tiny = [("anchor", "solver-nocarry", False), ("probe", "solver-carry", False),
            ("verifier", "verifier-strong", True)]
    models = {
        seat: {"type": "councilzoo.repro.comed:solver_agent",
               "kwargs": {"model": str(tiny_lm(name)), "name": seat, "seed": i, "picking": picking,
                          "temperature": 0.0 if picking else 1.0}}
        for i, (seat, name, picking) in enumerate(tiny)
    }

council = load_config(
    {
        "models": models,
        "anchor": "anchor",
        "peers": ["probe", "anchor", "probe"],  # peers[0] is COMED's probe; debate uses all three
        "verifier": "verifier",
        "samples": 3,  # the anchor's self-consistency samples
        "debate_rounds": 2,
        "comed": {"lam": 0.02, "cost_unit": "calls", "dev_size": args.dev},
    },
    CouncilConfig,
)
test, dev = addition_problems("test", args.test, seed=0), addition_problems("dev", args.dev, seed=0)
evaluation = Evaluation(council, test, dev, progress=False, seed=0)
rows = evaluation.rows(["single", "self_consistency", "debate", "always_verify", "comed"])
print_table(rows, title=f"{len(test)} test problems, fitted on {len(dev)} dev problems")
best = max(rows, key=lambda r: r["accuracy"])
print(f"most accurate: {best['protocol']} ({best['accuracy']:.3f}, {best['calls']:.2f} calls/question)")
