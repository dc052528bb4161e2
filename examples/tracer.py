"""TRACER: regret-matching controllers learn when a reviewer should speak; GSPO trains what it says.

    python examples/tracer.py                # simulated proposer and reviewer: the controllers alone
    python examples/tracer.py --llm          # a tiny offline LM in both roles: controllers + GSPO (LoRA)

In ``councilzoo/review-v0`` a proposer answers and a reviewer, each round, speaks (costs a call,
may correct or harm) or skips. A regret-matching controller (RM+) per role picks speak/skip from
counterfactual action values, obtained by branching each episode at the decision. With ``--llm``
the utterances are trained too, by GSPO on TRL's ``GRPOTrainer``. The learned policy is then
compared with fixed protocols on held-out problems.
"""

import argparse
import tempfile

from councilzoo.config import load_config
from councilzoo.learners import TracerConfig, TracerLearner

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--llm", action="store_true", help="a tiny offline LM speaks; its utterances train")
parser.add_argument("--out", default="runs/example_tracer", help="output folder (replaced)")
args = parser.parse_args()

config = {
    "seed": 0,
    "output_dir": args.out,
    "env": {"num_agents": 2, "rounds": 5, "lam": 0.05, "cost_unit": "calls"},  # reward: correct - lam x calls
    "controller": {"variant": "rm+", "values": "counterfactual"},
    "baselines": ["always_speak", "never_review", "alternate"],
    "data": {"dataset": "synthetic:numeric", "eval": ["synthetic:numeric"], "num_problems": 256,
             "eval_limit": 128},
}
if not args.llm:
    config |= {
        "max_steps": 20,
        "problems_per_step": 64,
        "agents": {"kind": "simulated", "simulated": {
            "proposer": {"skill": 0.55},
            # catches most errors but sometimes flags a right answer, so speaking can harm
            "reviewer": {"skill": 0.6, "catch_prob": 0.8, "false_alarm_prob": 0.15, "swayed_prob": 0.3}}},
    }
else:
    from councilzoo.testing import build_tiny_model  # an offline ~1M-parameter Qwen3; any model folder works

    model = build_tiny_model(tempfile.mkdtemp(prefix="tiny-lm-"))
    config |= {
        "max_steps": 3,
        "problems_per_step": 4,
        "env": {"num_agents": 2, "rounds": 3, "lam": 0.01, "cost_unit": "calls"},
        "agents": {"kind": "llm", "model": str(model), "share_model": True, "max_new_tokens": 16,
                   "device": "cpu"},
        "generation": {"enabled": True, "num_candidates": 4, "turns_per_step": 4,
                       "trainer": {"learning_rate": 1e-3},  # any trl.GRPOConfig field
                       "peft": {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"]}},
        "data": {"dataset": "synthetic:numeric", "eval": ["synthetic:numeric"], "num_problems": 32,
                 "eval_limit": 8},
    }

# trains, then prints the learned policy beside the fixed protocols and checks the regret bound
TracerLearner(load_config(config, TracerConfig)).train(overwrite=True)
