"""The code sandbox: untrusted programs run in a pool of reusable, isolated worker processes.

``Sandbox(workers=n).run(jobs)`` runs ``Job``s under ``Limits`` and returns one ``RunResult``
each (``pool``). The worker process (``worker``, run by path, standard library only) confines
each program with the layers of ``isolation``, runs it as ``programs`` says and talks to the pool
through ``protocol``; ``values`` turns outputs into canonical text and carries builtin values
between processes. Where the kernel lacks an isolation layer the pool refuses to run programs
(``SandboxRefused``) unless the caller accepts weaker isolation.
"""

from councilzoo.sandbox.pool import MODES, Job, Limits, RunResult, Sandbox, SandboxRefused, default_sandbox
from councilzoo.sandbox.values import canonical, canonical_stdout, digits_unlimited

__all__ = [
    "MODES", "Job", "Limits", "RunResult", "Sandbox", "SandboxRefused", "default_sandbox", "canonical",
    "canonical_stdout", "digits_unlimited",
]
