"""Controller checkpoints: exact round trip, atomic writes, pruning, no unpickling of arbitrary objects."""

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

ARRAYS = {"regret": np.arange(6, dtype=np.float64).reshape(2, 3), "strategy": np.ones(3, np.float32)}


def test_round_trip_restores_state_arrays_and_the_torch_rng(tmp_path):
    torch.manual_seed(3)
    path = save_checkpoint(tmp_path, 5, state={"data_position": 40}, arrays=ARRAYS)
    expected_draw = torch.rand(3)
    torch.manual_seed(0)
    loaded = load_checkpoint(path)
    assert loaded.step == 5 and loaded.state["data_position"] == 40
    for key, value in ARRAYS.items():
        np.testing.assert_array_equal(loaded.arrays[key], value)
        assert loaded.arrays[key].dtype == value.dtype
    assert torch.equal(torch.rand(3), expected_draw)


def test_crash_mid_write_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    good = save_checkpoint(tmp_path, 1, arrays=ARRAYS)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(ckpt, "save_numpy", crash)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, arrays=ARRAYS)
    assert latest_checkpoint(tmp_path) == good and list_checkpoints(tmp_path) == [good]
    assert load_checkpoint(good).step == 1


def test_keep_last_prunes_old_checkpoints(tmp_path):
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, arrays=ARRAYS, keep_last=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == ["step-000002", "step-000003"]


class _Evil:
    def __reduce__(self):
        return (print, ("unpickled arbitrary code",))


def test_loading_never_unpickles_arbitrary_objects(tmp_path):
    path = save_checkpoint(tmp_path, 1, arrays=ARRAYS)
    with open(path / "rng.pt", "wb") as f:
        pickle.dump({"torch": _Evil()}, f)
    with pytest.raises(pickle.UnpicklingError):
        load_checkpoint(path)


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda p: (p / "arrays.safetensors").write_bytes(b"x"), "arrays.safetensors has 1 bytes"),
        (lambda p: (p / "rng.pt").unlink(), "rng.pt is missing"),
        (lambda p: (p / "state.json").write_text((p / "state.json").read_text().replace("7", "8")), "sha256"),
        (lambda p: (p / ckpt.MANIFEST).unlink(), "no manifest.json"),
        (lambda p: (p / ckpt.MANIFEST).write_text("{"), "unreadable"),
    ],
)
def test_a_damaged_latest_checkpoint_is_named_and_the_previous_one_used(tmp_path, damage, problem):
    good = save_checkpoint(tmp_path, 7, arrays=ARRAYS)
    latest = save_checkpoint(tmp_path, 17, arrays=ARRAYS)
    assert ckpt.checkpoint_problem(latest) is None
    damage(latest)
    assert problem in ckpt.checkpoint_problem(latest)
    with pytest.warns(ckpt.DamagedCheckpointWarning, match=f"step-000017 is damaged.*{problem}"):
        assert latest_checkpoint(tmp_path) == good
