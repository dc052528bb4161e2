"""TRACER: regret-matching controllers and role-specific GSPO on ``councilzoo/review-v0``.

``learner.py`` is the learner (``Tracer``) and its loop, ``config.py`` its config,
``controller_layer.py`` the controllers' episodes, branches and action values,
``utterance_layer.py`` the utterances trained on the engine (``learners/engine.py``) and
``metrics.py`` what a step logs (docs/tracer.md).
"""

__all__: list[str] = []  # the modules are imported by path (councilzoo.learners.tracer.learner, ...)
