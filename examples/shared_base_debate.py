"""Three debaters on one base model: a LoRA adapter each, one copy of the base, one generate call a round.

    python examples/shared_base_debate.py                              # fresh adapters (start as the base)
    python examples/shared_base_debate.py --adapters A_DIR B_DIR C_DIR # trained adapters, e.g. a shared-base
        # Co-RL run's members/<name>/final/<name> (configs/corl_shared_base_cpu.yaml)

The base is the shipped tiny LM ``solver-qwen-a`` (two-digit addition). ``AdapterGenerator`` holds it
once with the three adapters; each debater's ``LLMAgent`` gets a seat of it (``seat(name)``), and the
rollout engine decodes the three debaters' turns of a round in ONE ``model.generate`` call, each row
through its own adapter (PEFT's mixed-batch inference). Prints the debate's accuracy and how many
generate calls the episodes took against the turns they played.
"""

import argparse

import councilzoo  # noqa: F401  (registers the games)
from councilzoo.agents.base import Sampling
from councilzoo.agents.generators.adapters import AdapterGenerator
from councilzoo.agents.llm import LLMAgent
from councilzoo.repro import tiny_lms
from councilzoo.repro.comed import solver_prompt
from councilzoo.rollout.engine import RolloutEngine
from councilzoo.tasks import answers_equivalent

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--adapters", nargs=3, metavar="DIR", help="three adapter folders (default: fresh LoRA)")
parser.add_argument("--problems", type=int, default=24, help="test problems")
args = parser.parse_args()

names = ["ada", "bo", "cy"]
fresh = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]}
sources = dict(zip(names, args.adapters, strict=True)) if args.adapters else dict.fromkeys(names, fresh)
shared = AdapterGenerator(str(tiny_lms.tiny_lm("solver-qwen-a")), sources, batch_size=512)
sampling = Sampling(max_new_tokens=tiny_lms.MAX_NEW_TOKENS, temperature=1.0)
debaters = {f"peer_{i}": LLMAgent(shared.seat(name), sampling=sampling, render=solver_prompt, name=name)
            for i, name in enumerate(names)}

problems = tiny_lms.addition_problems("test", args.problems)
engine = RolloutEngine("councilzoo/debate-v0", debaters, num_envs=len(problems), progress=False,
                       env_kwargs={"problems": problems, "num_agents": 3, "rounds": 2})
records = engine.run(problems)
right = sum(answers_equivalent(r.final_answer, p.answer, p.kind)
            for r, p in zip(records, problems, strict=True))
turns = sum(len(r.turns) for r in records)
print(f"debate of {names} on one base: accuracy {right}/{len(problems)}")
print(f"{turns} turns in {engine.stats.generate_calls} generate calls "
      f"(rows a call: {engine.stats.batch_sizes}); base parameters held once: "
      f"{sum(p.numel() for n, p in shared.model.named_parameters() if 'lora_' not in n):,}")
