"""A cohort of decoupled models, each trained by its own TRL ``GRPOTrainer`` in its own world.

Co-RL and its baselines are one learner with different reward rules. Each member is one
``torchrun`` / ``accelerate launch`` world (any number of processes: data parallel, ZeRO, FSDP)
that runs ``python -m councilzoo.learners.cohort.member CONFIG --member i``. The members share no
parameters and no process group; only each world's main process joins the cohort link
(``learners/cohort/distributed.py``), over which own labels travel keyed by (round, problem key).

Modules: ``config.py`` (the cohort's configs, items and prompts), ``reward.py`` (``CohortReward``),
``learner.py`` (``CohortLearner``), ``engine.py`` (TRL trainer settings, datasets, callbacks),
``member.py`` (one member's world), ``launch.py`` (the launcher), ``distributed.py`` (the link),
``seeded_sampling.py`` and ``metrics.py``.

Per generation round TRL samples G completions of every item for the member (its own paraphrase
view), then calls ``CohortReward``, which:

1. gathers the completions of the round across the member's world (TRL spreads a prompt's G
   copies over processes), and forms the member's *own label* of each item;
2. exchanges own labels with the peers (peer rules only);
3. plays ``councilzoo/cohort-v0`` for each item, the member acting with its G texts and every
   peer by its own label (all the peer rules read of it), and returns the game's per-sample
   rewards for this process's completions.

Gold answers never reach a label-free reward: the problems the game sees carry none, and the
gold table feeds only the logged diagnostics (label accuracy, oracle reward).

``launch_cohort`` is the one command that starts a whole cohort on one node (each member on its
own devices), waits for it, and stops every member when one fails.
"""


__all__: list[str] = []  # the modules are imported by path (councilzoo.learners.cohort.config, ...)
