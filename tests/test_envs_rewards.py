"""Reward rules of the cohort game: every rule, ties, unlabeled items, ring vs peer_majority."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from councilzoo.envs.rewards import RULES, compute_rewards, own_label, peer_majority_label

ANSWERS = st.lists(
    st.lists(st.sampled_from(["1", "2", "3", None]), min_size=1, max_size=5), min_size=2, max_size=4
)


def test_ground_truth_scores_against_gold_and_is_unlabeled_without_it():
    result = compute_rewards("ground_truth", [["4", "4.0", "5", None]], "numeric", gold="4")
    assert result.rewards == [[1.0, 1.0, 0.0, 0.0]]
    assert result.labels == ["4"] and result.unlabeled == [False]
    missing = compute_rewards("ground_truth", [["4", "5"]], "numeric", gold=None)
    assert missing.rewards == [[0.0, 0.0]] and missing.unlabeled == [True]


def test_self_majority_is_ttrl_with_first_seen_tie_rule():
    result = compute_rewards("self_majority", [["7", "8", "8"], ["2", "3"]], "numeric")
    assert result.labels == ["8", "2"]  # "2" vs "3" tie keeps the first-seen answer
    assert result.rewards == [[0.0, 1.0, 1.0], [1.0, 0.0]]


def test_ring_for_two_members_is_mutual_supervision():
    result = compute_rewards("ring", [["1", "1", "2"], ["2", "2", "2"]], "numeric")
    assert result.labels == ["2", "1"]
    assert result.rewards == [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]


def test_ring_and_peer_majority_differ_for_three_members():
    answers = [["5", "5"], ["6", "6"], ["5", "5", "6"]]  # own labels: 5, 6, 5
    ring = compute_rewards("ring", answers, "numeric")
    assert ring.labels == ["6", "5", "5"]  # A <- B, B <- C, C <- A
    peer = compute_rewards("peer_majority", answers, "numeric")
    # member 0's peers say 6 and 5: a tie -> unlabeled; member 1's peers both say 5; member 2's tie.
    assert peer.labels == [None, "5", None]
    assert peer.unlabeled == [True, False, True]
    assert peer.rewards == [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0]]


def test_unlabeled_member_gives_every_sample_zero():
    result = compute_rewards("ring", [["3", "3"], [None, None]], "numeric")
    assert result.labels == [None, "3"]
    assert result.rewards[0] == [0.0, 0.0] and result.unlabeled == [True, False]


def test_tau_makes_low_agreement_labels_unlabeled():
    assert own_label(["1", "2", "3", "1"], "numeric", tau=0.5) == "1"
    assert own_label(["1", "2", "3", None], "numeric", tau=0.5) is None


def test_peer_majority_abstains_on_missing_labels_and_uses_equivalence():
    assert peer_majority_label([None, "0.5", "1/2", "3"], "numeric") == "0.5"
    assert peer_majority_label([None, None], "numeric") is None
    assert peer_majority_label(["1", "2"], "numeric") is None


def test_bad_rule_and_too_few_members_are_rejected():
    with pytest.raises(ValueError, match="unknown reward rule 'ttrl'"):
        compute_rewards("ttrl", [["1"]], "numeric")
    with pytest.raises(ValueError, match="at least 2 members"):
        compute_rewards("ring", [["1"]], "numeric")


def test_peer_share_labels_where_peer_majority_needs_unanimity():
    # three members; member 0's peers hold the labels 5 (member 1) and 7 (member 2): they disagree
    answers = [["5", "7", "9", None], ["5", "5", "3"], ["7", "7", "5"]]
    majority = compute_rewards("peer_majority", answers, "numeric")
    assert majority.unlabeled[0] and majority.rewards[0] == [0.0] * 4  # the old rule: no signal at all
    share = compute_rewards("peer_share", answers, "numeric")
    assert not share.unlabeled[0] and share.labels[0] == "5"  # a tie goes to the nearest peer (ring order)
    assert share.rewards[0] == [0.5, 0.5, 0.0, 0.0]  # each disagreeing peer lends 1/2 to its answer
    # where the peers agree it is peer_majority's reward: member 2's peers both say 5
    assert share.rewards[2] == majority.rewards[2] == [0.0, 0.0, 1.0]


@given(ANSWERS.filter(lambda answers: len(answers) == 2))
def test_peer_share_is_ring_for_two_members(answers):
    assert compute_rewards("peer_share", answers, "numeric") == compute_rewards("ring", answers, "numeric")


@given(ANSWERS, st.sampled_from(["ring", "peer_majority", "peer_share"]), st.data())
def test_peer_rules_never_read_gold_or_own_label(answers, rule, data):
    """A member's label does not move when gold or its own answers change."""
    base = compute_rewards(rule, answers, "numeric", gold="1")
    assert base == compute_rewards(rule, answers, "numeric", gold="2")
    n = data.draw(st.integers(0, len(answers) - 1))
    changed = [list(a) for a in answers]
    changed[n] = data.draw(st.lists(st.sampled_from(["1", "2", "3", None]), min_size=1, max_size=5))
    assert compute_rewards(rule, changed, "numeric").labels[n] == base.labels[n]


@given(ANSWERS, st.sampled_from([r for r in RULES if r != "peer_share"]))
def test_rewards_are_binary_and_match_labels(answers, rule):
    result = compute_rewards(rule, answers, "numeric", gold="2")
    rows = zip(answers, result.labels, result.rewards, result.unlabeled, strict=True)
    for member, label, rewards, unlabeled in rows:
        assert len(rewards) == len(member) and set(rewards) <= {0.0, 1.0}
        assert unlabeled == (label is None)
        assert rewards == [float(label is not None and a == label) for a in member]
