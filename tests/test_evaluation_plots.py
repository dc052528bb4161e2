"""The frontier plot's protocol labels never overlap, measured with matplotlib's renderer."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt

from councilzoo.evaluation.report import frontier_figure, text_box

# (protocol, accuracy, calls/q, tokens/q, oracle): the demo's table in README, where comed and
# comed_learned sit almost on one point.
DEMO = [
    ("single", 0.613, 1.00, 240, False),
    ("self_consistency", 0.660, 3.00, 720, False),
    ("routing", 0.680, 1.00, 240, False),
    ("always_verify", 0.740, 3.00, 488, False),
    ("debate", 0.663, 6.00, 1440, False),
    ("comed", 0.767, 3.91, 821, False),
    ("comed_learned", 0.763, 3.88, 819, False),
    ("comed_regret", 0.757, 4.10, 882, False),
    ("best_single_hindsight", 0.707, 1.00, 240, True),
    ("oracle_gate", 0.817, 3.94, 946, True),
]


def test_frontier_labels_do_not_overlap():
    rows = [
        {"protocol": p, "accuracy": a, "calls": c, "tokens": t, "oracle": o,
         "accuracy_ci": (a - 0.05, a + 0.05)}
        for p, a, c, t, o in DEMO
    ]
    fig = frontier_figure(rows)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = {t.get_text(): text_box(t, renderer) for t in ax.texts}
        assert len(boxes) == len(rows)
        clashes = [(a, b) for a, b in itertools.combinations(boxes, 2) if boxes[a].overlaps(boxes[b])]
        assert clashes == [], clashes
    plt.close(fig)
