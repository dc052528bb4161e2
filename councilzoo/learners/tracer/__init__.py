"""TRACER: regret-matching controllers and role-specific GSPO on ``councilzoo/review-v0``.

``learner.py`` is the learner (``Tracer``) and its loop, ``config.py`` its config, ``values.py``
the counterfactual action values, ``gspo.py`` the utterance layer on TRL's ``GRPOTrainer`` and
``metrics.py`` what a step logs (docs/tracer.md).
"""

__all__: list[str] = []  # the modules are imported by path (councilzoo.learners.tracer.learner, ...)
