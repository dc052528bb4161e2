"""RegretMatcher: the RM / RM+ regret bound for any payoff sequence, and the matcher's contracts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.testing.regret import check_no_regret, played_regret, run_sequence, utility_sequences
from councilzoo.theory import RegretMatcher, regret_bound

RTOL = 1e-9


@pytest.mark.parametrize("variant", ["rm", "rm+"])
def test_no_regret_on_any_bounded_sequence(variant):
    """For ANY bounded sequence, oblivious or adaptive: max_a R_T(a) <= Delta sqrt(A T) (RM and
    RM+), recomputed from the played policies; and self-play's CCE gap within the bound / T."""
    check_no_regret(lambda S, A: RegretMatcher(S, A, variant=variant))


@pytest.mark.parametrize("variant", ["rm", "rm+"])
@given(seq=utility_sequences())
def test_tracked_regret_is_the_true_regret_and_obeys_the_norm_bound(variant, seq):
    """max_a R_T(a) <= ||[R_T]+||_2 <= Delta sqrt(A T); RM+'s clipped Q obeys the same bound."""
    T, S, A = seq.shape
    m = RegretMatcher(S, A, variant=variant)
    policies, values = run_sequence(m, seq)
    bound = regret_bound(seq.delta, A, T)
    assert np.all(m.visits == T)
    assert np.all(np.linalg.norm(np.maximum(m.external_regrets, 0), axis=1) <= bound * (1 + RTOL))
    assert np.all(np.linalg.norm(np.maximum(m.regrets, 0), axis=1) <= bound * (1 + RTOL))
    np.testing.assert_allclose(m.cumulative_regret(), played_regret(policies, values), rtol=1e-9,
                               atol=1e-9 * seq.delta * T)


def test_regret_bound_formula():
    assert regret_bound(2.0, 2, 8) == pytest.approx(8.0)
    np.testing.assert_allclose(regret_bound(1.0, 4, np.array([0, 1, 9])), [0.0, 2.0, 6.0])
    with pytest.raises(ValueError, match="delta"):
        regret_bound(-1.0, 2, 3)


def test_policy_is_regret_matching():
    m = RegretMatcher(1, 3, variant="rm")
    np.testing.assert_allclose(m.strategy(), [[1 / 3] * 3])  # zero regrets -> uniform
    m.update([0], [[3.0, 0.0, 0.0]])  # r = (2, -1, -1)
    np.testing.assert_allclose(m.strategy(), [[1.0, 0.0, 0.0]])
    m.update([0], [[0.0, 2.0, 1.0]])  # played (1,0,0): r = (0, 2, 1) -> R = (2, 1, 0)
    np.testing.assert_allclose(m.strategy(), [[2 / 3, 1 / 3, 0.0]])
    np.testing.assert_allclose(m.average_strategy(), [[2 / 3, 1 / 6, 1 / 6]])


def test_rm_plus_does_not_lock_in_after_one_bad_update():
    """TRACER's release flaw: one early bad value locks plain RM into skip for ~50 visits after
    speak becomes better; RM+ starts speaking at the first better value."""
    rm, rm_plus = RegretMatcher(1, 2, variant="rm"), RegretMatcher(1, 2, variant="rm+")
    for m in (rm, rm_plus):
        m.update([0], [[1.0, -100.0]])  # r = (50.5, -50.5)
        m.update([0], [[0.0, 1.0]])
    assert rm_plus.strategy()[0, 1] > 0 and rm.strategy()[0, 1] == 0.0
    for m in (rm, rm_plus):
        for _ in range(30):
            m.update([0], [[0.0, 1.0]])
    assert rm_plus.strategy()[0, 1] > 0.3 and rm.strategy()[0, 1] == 0.0


def test_linear_averaging_weights_visit_t_by_t():
    m = RegretMatcher(1, 2, variant="rm+", averaging="linear")
    m.update([0], [[1.0, 0.0]])  # played uniform with weight 1
    m.update([0], [[1.0, 0.0]])  # played (1, 0) with weight 2
    np.testing.assert_allclose(m.strategy_sums, [[2.5, 0.5]])
    np.testing.assert_allclose(m.average_strategy(), [[2.5 / 3, 0.5 / 3]])


def test_exploration_mixes_in_uniform():
    m = RegretMatcher(1, 4, exploration=0.2)
    m.update([0], [[1.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(m.strategy(), [[0.85, 0.05, 0.05, 0.05]])


def test_subset_update_leaves_other_states_untrained():
    m = RegretMatcher(5, 2)
    m.update(np.array([3, 1]), np.array([[1.0, 0.0], [0.0, 1.0]]))
    np.testing.assert_array_equal(m.visits, [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(m.strategy_sums[[0, 2, 4]], 0.0)
    np.testing.assert_allclose(m.average_strategy([0]), [[0.5, 0.5]])  # untrained -> uniform
    np.testing.assert_allclose(m.strategy([3, 1]), [[1.0, 0.0], [0.0, 1.0]])
    m.update([], np.zeros((0, 2)))  # an empty batch is a no-op
    np.testing.assert_array_equal(m.visits, [0, 1, 0, 1, 0])


@given(states=st.lists(st.integers(0, 3), min_size=1, max_size=12), seed=st.integers(0, 2**16))
def test_repeated_states_apply_in_order(states, seed):
    values = np.random.default_rng(seed).normal(size=(len(states), 3))
    batched, sequential = RegretMatcher(4, 3), RegretMatcher(4, 3)
    batched.update(np.array(states), values)
    for s, v in zip(states, values, strict=True):
        sequential.update(np.array([s]), v[None])
    for key in ("regrets", "external_regrets", "strategy_sums", "visits"):
        value = sequential.state_dict()[key]
        np.testing.assert_array_equal(batched.state_dict()[key], value, err_msg=key)


def test_save_load_round_trip_is_exact(tmp_path):
    rng = np.random.default_rng(0)
    m = RegretMatcher(6, 3, variant="rm+", averaging="linear", exploration=0.01, seed=7)
    for _ in range(20):
        states = rng.integers(6, size=4)
        m.update(states, rng.normal(size=(4, 3)))
    m.sample_actions()
    m.save(tmp_path / "rm.npz")
    restored = RegretMatcher.load(tmp_path / "rm.npz")
    for key in ("regrets", "external_regrets", "strategy_sums", "visits"):
        np.testing.assert_array_equal(getattr(restored, key), getattr(m, key))
    assert (restored.variant, restored.averaging, restored.exploration) == ("rm+", "linear", 0.01)
    values = rng.normal(size=(6, 3))
    m.update(None, values)
    restored.update(None, values)
    np.testing.assert_array_equal(restored.strategy(), m.strategy())
    np.testing.assert_array_equal(restored.sample_actions(), m.sample_actions())
    with np.load(tmp_path / "rm.npz", allow_pickle=False) as f:
        assert set(f.files) >= {"regrets", "strategy_sums", "visits"}


def test_sample_actions_follows_policy():
    m = RegretMatcher(20000, 3, seed=0)
    m.update(None, np.tile([[1.0, 0.5, 0.0]], (20000, 1)))  # R = (0.5, 0, -0.5) -> (1, 0, 0)
    assert np.all(m.sample_actions() == 0)
    m = RegretMatcher(20000, 3, seed=0)
    counts = np.bincount(m.sample_actions(), minlength=3) / 20000
    np.testing.assert_allclose(counts, 1 / 3, atol=0.02)


def test_bad_input_is_rejected_before_any_work():
    m = RegretMatcher(3, 2)
    with pytest.raises(ValueError, match="variant"):
        RegretMatcher(3, 2, variant="cfr")
    with pytest.raises(ValueError, match="states must lie"):
        m.update(np.array([3]), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="action_values must have shape"):
        m.update(np.array([0, 1]), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        m.update(np.array([0]), np.array([[np.nan, 0.0]]))
    with pytest.raises(ValueError, match="integer"):
        m.strategy(np.array([0.5]))
    assert np.all(m.visits == 0)
    with pytest.raises(ValueError, match="shape"):
        RegretMatcher(4, 2).load_state_dict(m.state_dict())
