"""Checkpoints: exact round trip, LoRA adapters, atomic writes, no unpickling of arbitrary objects."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from councilzoo.learners import checkpoint as ckpt
from councilzoo.learners.checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)


def _model_and_optimizer(seed: int):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def test_round_trip_restores_weights_optimizer_rng_and_arrays(tmp_path):
    model, optimizer, scheduler = _model_and_optimizer(0)
    gen = torch.Generator().manual_seed(7)
    arrays = {"regret": np.arange(6, dtype=np.float64).reshape(2, 3), "strategy": np.ones(3, np.float32)}
    path = save_checkpoint(
        tmp_path,
        5,
        models={"a": model},
        states={"a": {"optimizer": optimizer, "scheduler": scheduler}},
        state={"data_position": 40},
        arrays=arrays,
        generators={"sampling": gen},
    )
    expected_draw, expected_gen = torch.rand(3), torch.rand(3, generator=gen)

    other, other_opt, other_sched = _model_and_optimizer(1)
    other_gen = torch.Generator().manual_seed(0)
    loaded = load_checkpoint(
        path,
        models={"a": other},
        states={"a": {"optimizer": other_opt, "scheduler": other_sched}},
        generators={"sampling": other_gen},
    )
    assert loaded.step == 5 and loaded.state["data_position"] == 40
    for key, value in arrays.items():
        np.testing.assert_array_equal(loaded.arrays[key], value)
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), other.state_dict().values(), strict=True)
    )
    assert str(other_opt.state_dict()) == str(optimizer.state_dict())
    assert other_sched.get_last_lr() == scheduler.get_last_lr()
    assert torch.equal(torch.rand(3), expected_draw) and torch.equal(
        torch.rand(3, generator=other_gen), expected_gen
    )


def test_lora_checkpoint_holds_adapters_only(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from councilzoo.learners.policy_update import LoraSettings, apply_lora

    model = apply_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraSettings(r=2, alpha=4))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.fill_(0.01)
    path = save_checkpoint(tmp_path, 1, models={"m": model})
    assert (path / "m" / "adapter.safetensors").is_file() and not (path / "m" / "model.safetensors").exists()
    fresh = apply_lora(AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraSettings(r=2, alpha=4))
    load_checkpoint(path, models={"m": fresh})
    assert all(
        torch.equal(a, b)
        for a, b in zip(model.state_dict().values(), fresh.state_dict().values(), strict=True)
    )


def test_crash_mid_write_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    model, optimizer, _ = _model_and_optimizer(0)
    good = save_checkpoint(tmp_path, 1, models={"a": model}, states={"a": {"optimizer": optimizer}})

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_numpy", crash)  # fails after the weights are written
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, models={"a": model}, arrays={"x": np.zeros(2)})
    assert latest_checkpoint(tmp_path) == good and list_checkpoints(tmp_path) == [good]
    assert load_checkpoint(good, models={"a": model}).step == 1


def test_keep_last_prunes_old_checkpoints(tmp_path):
    model, _, _ = _model_and_optimizer(0)
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, models={"a": model}, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000002", "step-000003"]


class _Evil:
    def __reduce__(self):
        return (print, ("unpickled arbitrary code",))


def test_loading_never_unpickles_arbitrary_objects(tmp_path):
    model, optimizer, _ = _model_and_optimizer(0)
    path = save_checkpoint(tmp_path, 1, states={"a": {"optimizer": optimizer}})
    with open(path / "a" / "optimizer.pt", "wb") as f:
        pickle.dump({"state": _Evil()}, f)
    with pytest.raises(pickle.UnpicklingError):
        load_checkpoint(path, states={"a": {"optimizer": optimizer}})
