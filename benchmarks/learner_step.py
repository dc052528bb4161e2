"""Our GSPO/GRPO update step vs TRL's GRPOTrainer on the same tiny model and batch.

Both sides start from identical weights and see the identical batch (2 prompts x 4 samples x 16
tokens, GSPO: importance_sampling_level="sequence"). One step = forward, loss, backward, grad clip,
AdamW step. TRL's side is ``GRPOTrainer.compute_loss`` + ``accelerator.backward`` (its
``training_step`` without ``_prepare_inputs``, which would generate) plus its optimizer step (generation and
reward scoring excluded on both sides). Prints a table and writes benchmarks/results/learner_step.json.

    python benchmarks/learner_step.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from councilzoo.learners.policy_update import (
    PolicyUpdateConfig,
    PolicyUpdater,
    RolloutBatch,
    completion_logps,
    group_advantages,
    policy_loss,
)
from councilzoo.testing import build_tiny_model

B, G, P, T = 8, 4, 16, 16


def _trl_trainer(model_dir: Path, out: Path):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        per_device_train_batch_size=B,
        num_generations=G,
        max_completion_length=T,
        importance_sampling_level="sequence",
        loss_type="grpo",
        learning_rate=1e-4,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        report_to="none",
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir),
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["q"] * B}),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )
    trainer.create_optimizer()
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    reps = 5 if parser.parse_args().quick else 30
    torch.set_num_threads(1)
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_tiny_model(Path(tmp) / "tiny")
        g = torch.Generator().manual_seed(0)
        vocab = AutoModelForCausalLM.from_pretrained(model_dir).config.vocab_size
        batch = RolloutBatch(
            torch.randint(5, vocab, (B, P), generator=g),
            torch.ones(B, P, dtype=torch.long),
            torch.randint(5, vocab, (B, T), generator=g),
            torch.ones(B, T, dtype=torch.long),
            G,
        )
        rewards = torch.tensor([1.0, 0, 0, 1, 0, 1, 0, 0])
        cfg = PolicyUpdateConfig(importance_sampling_level="sequence", learning_rate=1e-4, max_grad_norm=1.0)
        ours = PolicyUpdater(AutoModelForCausalLM.from_pretrained(model_dir), cfg)
        trainer = _trl_trainer(model_dir, Path(tmp) / "trl")
        inputs = {
            "prompt_ids": batch.prompt_ids,
            "prompt_mask": batch.prompt_mask,
            "completion_ids": batch.completion_ids,
            "completion_mask": batch.completion_mask,
            "advantages": group_advantages(rewards, G),
        }

        # Loss and gradient difference on identical weights, before any step.
        logps, _ = completion_logps(
            ours.model, batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask
        )
        loss, _ = policy_loss(logps, logps.detach(), inputs["advantages"], batch.completion_mask, cfg)
        loss.backward()
        trl_loss = trainer.compute_loss(trainer.model, inputs)
        trl_loss.backward()
        grad_diff = max(
            float((a.grad - b.grad).abs().max())
            for a, b in zip(ours.model.parameters(), trainer.model.parameters(), strict=True)
        )
        loss_diff = abs(float(loss.detach()) - float(trl_loss.detach()))
        ours.optimizer.zero_grad()
        trainer.model.zero_grad()

        def ours_step():
            ours.step(batch, rewards)

        def trl_step():
            # Trainer.training_step minus _prepare_inputs (which would generate): loss + backward
            trainer.accelerator.backward(trainer.compute_loss(trainer.model, inputs))
            torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 1.0)
            trainer.optimizer.step()
            trainer.optimizer.zero_grad()

        times = {"councilzoo PolicyUpdater.step": [], "TRL GRPOTrainer loss+backward+step": []}
        for fn in (ours_step, trl_step, ours_step, trl_step):  # warm-up
            fn()
        for _ in range(reps):  # interleaved, so machine noise hits both alike
            for name, fn in zip(times, (ours_step, trl_step), strict=True):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)

    medians = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    ratio = medians["councilzoo PolicyUpdater.step"] / medians["TRL GRPOTrainer loss+backward+step"]
    rows = [{"step": k, "median_ms": round(v, 2), "reps": reps} for k, v in medians.items()]
    print(f"{'step':34s} {'median ms':>10s}")
    for row in rows:
        print(f"{row['step']:34s} {row['median_ms']:10.2f}")
    print(
        f"time ratio (ours / TRL) = {ratio:.3f}  (target <= 1.1); |loss diff| = {loss_diff:.2e}; "
        f"max |grad diff| = {grad_diff:.2e}"
    )
    summary = {
        "time_ratio": round(ratio, 4),
        "target": 1.1,
        "loss_abs_diff": loss_diff,
        "max_grad_abs_diff": grad_diff,
        "batch": f"{B // G} prompts x {G} samples, prompt {P} + completion {T} tokens",
    }
    out = Path(__file__).parent / "results" / "learner_step.json"
    out.write_text(json.dumps({"table": rows, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
