"""The TRL surface councilzoo builds on: ``engine.trainer_class``, a ``GRPOTrainer`` subclass with
extension points written to be upstreamed (``generation_hooks``, ``log_metric``, ``adapter``). The
private names it rests on are checked here against the installed TRL and transformers, so a
release that renames or reshapes them fails this file, not a training run (docs/ARCHITECTURE.md
lists them)."""

from __future__ import annotations

import inspect

from councilzoo.learners import engine


def test_trl_keeps_the_private_names_the_subclass_rests_on():
    from trl import GRPOTrainer

    generate = inspect.signature(GRPOTrainer._generate_and_score_completions)
    assert list(generate.parameters) == ["self", "inputs"]
    init = inspect.getsource(GRPOTrainer.__init__)
    assert 'self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}' in init
    log = inspect.getsource(GRPOTrainer.log)
    assert "self._metrics[mode]" in log and "self._metrics[mode].clear()" in log  # averaged, then reset
    training_step = inspect.getsource(GRPOTrainer._prepare_inputs)
    assert "self._generate_and_score_completions(" in training_step
    save = inspect.signature(GRPOTrainer._save)  # an adapter's trainer saves its adapter only
    assert list(save.parameters) == ["self", "output_dir", "state_dict"]
    assert "self._save(" in inspect.getsource(GRPOTrainer.save_model)  # checkpoints and final/ alike


def test_a_hook_sees_each_round_and_a_logged_metric_reaches_the_row(tiny_model_dir, tmp_path):
    """One optimizer step of a real trainer: the hook gets the round's batch (4 completions), and a
    figure given to ``log_metric`` is in the step's row as TRL's own metrics are."""
    run = engine.RunSettings(tmp_path, max_steps=1, seed=0, save_steps=0, report_to=["none"])
    args = run.grpo_config(engine.Round(2, 2, max_completion_length=4), "surface",
                           {"learning_rate": 1e-3, "logging_steps": 1})  # fmt: skip
    rows = [{"prompt": [{"role": "user", "content": f"say {i}"}]} for i in range(2)]

    def length_reward(completions, **_):
        return [float(len(engine.completion_text(c))) for c in completions]

    trainer = engine.build_trainer(str(tiny_model_dir), str(tiny_model_dir), args, rows, [length_reward])
    seen = []
    trainer.generation_hooks.append(lambda out: seen.append(out["completion_mask"].shape[0]))
    trainer.generation_hooks.append(lambda out: trainer.log_metric("rounds_seen", float(len(seen))))
    trainer.train()
    assert seen == [4]  # 2 prompts x 2 completions, one round
    [row] = [r for r in trainer.state.log_history if "reward" in r]
    assert row["rounds_seen"] == 1.0
