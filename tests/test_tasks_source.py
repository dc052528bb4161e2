"""The one problem source: disjoint synthetic splits, the same items for the same (seed, split)."""

from __future__ import annotations

import pytest

from councilzoo.tasks import load_problems, split_seed


def test_synthetic_splits_are_disjoint_and_reproducible():
    ids = {
        s: {p.id for p in load_problems("synthetic:numeric", s, seed=3, limit=50)}
        for s in ("train", "dev", "test")
    }
    for a in ids:
        for b in ids:
            assert a == b or not ids[a] & ids[b], (a, b)
    again = [p.id for p in load_problems("synthetic:numeric", "train", seed=3, limit=50)]
    assert again == sorted(ids["train"], key=again.index)
    assert len({split_seed(3, s) for s in ("train", "dev", "test")}) == 3


def test_bad_sources_fail_before_work(tmp_path):
    with pytest.raises(ValueError, match="kind must be one of"):
        load_problems("synthetic:essay")
    with pytest.raises(ValueError, match=r"unknown split 'tset'; synthetic sets have \['test'"):
        load_problems("synthetic:numeric", "tset")
    with pytest.raises(ValueError, match="1,000,000,000 problems asked"):
        load_problems("synthetic:numeric", limit=10**9)
    with pytest.raises(ValueError, match="limit must be >= 1"):
        load_problems("synthetic:numeric", limit=0)
    with pytest.raises(ValueError, match="does not exist"):
        load_problems("jsonl", path=str(tmp_path / "none.jsonl"))
