"""Co-RL on CPU: two tiny models of different families teach each other without labels.

    python examples/corl_cpu.py [--out runs/example_corl] [--steps 6]

Each member samples G answers to its own paraphrase of every item; its label is the plurality of
its answers; under the ``ring`` rule member n is rewarded against member n+1's label (played as
``councilzoo/cohort-v0``). Every member is its own TRL ``GRPOTrainer`` in its own process, started
and stopped together by ``CoRL.train``. The members here are tiny random models (Qwen3 and Llama
architecture, built offline and warmed up to state an answer as ``\\boxed{X}``); on a GPU put a
hub name under ``model:`` instead (configs/corl_gpu_qwen_llama.yaml).
"""

import argparse

from councilzoo.config import load_config
from councilzoo.learners import CoRL, CoRLConfig

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--out", default="runs/example_corl", help="output folder (replaced)")
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

config = load_config(
    {
        "members": [
            # a real model instead: {"name": "qwen", "model": "Qwen/Qwen3-0.6B", "view": 0}
            {"name": "qwen", "tiny_family": "qwen3", "view": 0},
            {"name": "llama", "tiny_family": "llama", "view": 1},
        ],
        "reward_rule": "ring",  # ring | peer_majority
        "num_generations": 4,  # G completions per prompt
        "prompts_per_step": 4,
        "max_steps": args.steps,
        "max_completion_length": 16,
        "seed": 0,
        "output_dir": args.out,
        "save_steps": args.steps,
        "report_to": ["none"],
        "data": {"dataset": "synthetic:multiple_choice", "num_problems": 32, "difficulty": 0.2},
        # any trl.GRPOConfig field; sequence-level importance sampling makes GRPO GSPO
        "trainer": {"importance_sampling_level": "sequence", "learning_rate": 1e-3},
    },
    CoRLConfig,
)
rows = CoRL(config).train(overwrite=True)  # the final metrics row of each member
for member, row in zip(config.members, rows, strict=True):
    # label_accuracy: how often the member's own plurality label is right (gold read for logging only)
    print(f"{member.name}: reward {row['reward']:.3f}, label accuracy {row['label_accuracy']:.3f}, "
          f"agreement with its peer {row['agreement']:.3f}")
print(f"checkpoints and logs under {args.out}/")
