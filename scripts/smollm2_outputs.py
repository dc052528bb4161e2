"""Record real replies of a real model to synthetic:word_problems for the labelled fixtures
tests/fixtures/smollm2_outputs.jsonl and gemma_outputs.jsonl (labels are added by hand; see
docs/real_models.md):

    python scripts/smollm2_outputs.py --out outputs.jsonl [--problems 40] [--model gemma-3-270m]

Each problem (test split, seed 0, difficulty levels 0 to 1 in turn) is answered three ways, through
the package's own member prompt. SmolLM2-135M-Instruct: concise style greedy and sampled
(temperature 0.8, 40 new tokens), and default style greedy with 64 new tokens (replies that run
into the cap). Gemma-3-270M (a base model): few_shot style greedy and sampled at the training
temperature 1.0, and concise style greedy (no worked examples), 32 new tokens, stopped where it
starts the next question.
"""

from __future__ import annotations

import argparse
import json

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators import TransformersGenerator
from councilzoo.agents.prompts import member_prompt
from councilzoo.real_models import recommended_agent
from councilzoo.tasks import load_problems

RUNS = {  # model -> (prompt style, temperature, max new tokens)
    "smollm2-135m-instruct": (("concise", 0.0, 40), ("concise", 0.8, 40), ("default", 0.0, 64)),
    "gemma-3-270m": (("few_shot", 0.0, 32), ("few_shot", 1.0, 32), ("concise", 0.0, 32)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--model", choices=list(RUNS), default="smollm2-135m-instruct")
    args = parser.parse_args()
    levels = (0.0, 0.25, 0.5, 0.75, 1.0)
    per_level = -(-args.problems // len(levels))
    problems = [
        p for d in levels
        for p in load_problems("synthetic:word_problems", "test", limit=per_level, difficulty=d)
    ][: args.problems]  # fmt: skip
    gen = TransformersGenerator(args.model, batch_size=64)
    stop = tuple(recommended_agent(args.model)["sampling"].get("stop", ()))
    with open(args.out, "w") as sink:
        for style, temperature, tokens in RUNS[args.model]:
            prompts = [member_prompt(p, 0, style=style) for p in problems]
            sampling = Sampling(max_new_tokens=tokens, temperature=temperature, seed=0, stop=stop)
            for problem, (c,) in zip(problems, gen.generate(prompts, n=1, sampling=sampling), strict=True):
                row = {"problem": problem.id, "question": problem.question, "gold": problem.answer,
                       "style": style, "temperature": temperature, "max_new_tokens": tokens,
                       "finish_reason": c.finish_reason, "text": c.text}  # fmt: skip
                sink.write(json.dumps(row) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
