"""The caller's side of the sandbox: a pool of reusable, isolated worker processes.

``Sandbox(workers=n).run(jobs)`` runs every ``Job`` (a program, how to call it, its inputs) in
parallel over ``n`` worker processes and returns one ``RunResult`` per job, in order. A bad program
is data: an infinite loop, a crash, a fork bomb or a memory hog comes back as a result whose
``status`` says what happened; ``run`` itself raises only on a caller's mistake (a bad ``Job``).

Isolation (``worker`` and ``isolation`` for the layers): each worker starts from a scrubbed environment
in its own session, enters user + network + IPC + mount + PID namespaces, builds a read-only
minimal root of the runtime alone, and runs each job in a fresh process forked from a template
that never saw a job (jobs share no memory); that process forks one child per program that
enters the minimal root, takes rlimits, a Landlock filesystem ruleset and a seccomp filter, runs
in a fresh tmpfs of bounded size and an IPC namespace of its run, and dies with everything it
started at the wall-clock limit. ``Sandbox.isolation`` reports which layers the kernel granted.
Where one is missing the pool refuses to run programs (``SandboxRefused``, one line naming the
layer) unless the caller accepts weaker isolation: ``Sandbox(accept_weaker_isolation=True)`` or
``COUNCILZOO_SANDBOX_ACCEPT_WEAKER=1`` in the environment (``settings()`` records the choice for a
run's report).

Every pool lives under ``$TMPDIR/councilzoo-sandbox-<pid>-*``; a pool whose process died without
closing it (SIGKILL, SIGTERM) is deleted by the next pool that starts.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from councilzoo.processes import pid_alive
from councilzoo.sandbox import protocol
from councilzoo.sandbox.isolation import remove_tree

__all__ = [
    "MODES", "LAYERS", "ACCEPT_WEAKER_ENV", "Limits", "Job", "RunResult", "Sandbox", "SandboxRefused",
    "remove_abandoned_roots", "default_sandbox", "settings",
]

MODES = ("call", "stdin", "script")
STATUSES = ("ok", "error", "timeout", "output_limit", "crashed")
# Each layer and what it needs of the kernel, for the refusal line
LAYERS = {
    "network_namespace": "unprivileged user namespaces",
    "ipc_namespace": "unprivileged user namespaces",
    "pid_namespace": "unprivileged user and mount namespaces",
    "disk_quota": "a tmpfs mount in a user namespace",
    "minimal_root": "user + mount namespaces and mount_setattr, Linux 5.12+",
    "seccomp": "seccomp and libseccomp (pyseccomp)",
    "landlock": "Landlock, Linux 5.13+ with landlock in the boot's lsm= list (the landlock package)",
}
ACCEPT_WEAKER_ENV = "COUNCILZOO_SANDBOX_ACCEPT_WEAKER"
WORKER_FILE = str(Path(__file__).resolve().with_name("worker.py"))
ROOT_PREFIX = "councilzoo-sandbox-"
STARTUP_TIMEOUT_S = 30.0
REPLY_SLACK_S = 30.0  # the worker enforces limits; this only catches a worker that hangs itself
SCRUBBED_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",  # set and dict orders, hence outputs, equal across workers
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class Limits:
    """Per program (per input for ``stdin`` programs): wall-clock = CPU seconds, address space,
    output (also the size of any one file), and the disk quota of its folder: ``disk_mb`` MiB in at
    most ``max_files`` files and folders."""

    timeout_s: float = 5.0
    memory_mb: int = 1_024
    max_output_bytes: int = 1 << 20
    disk_mb: int = 64
    max_files: int = 1_000

    def __post_init__(self) -> None:
        if (
            self.timeout_s <= 0
            or self.memory_mb < 64
            or self.max_output_bytes < 1
            or self.disk_mb < 1
            or self.max_files < 1
        ):
            raise ValueError(
                f"bad sandbox limits {self}: need timeout_s > 0, memory_mb >= 64, output >= 1, "
                "disk_mb >= 1, max_files >= 1"
            )


@dataclass(frozen=True)
class Job:
    """One program. ``call``: define ``entry_point`` and call it on each input (a Python literal tuple
    of arguments); ``stdin``: run the program as ``__main__`` once per input, fed as standard input;
    ``script``: load the program, then run ``test_script`` (assertions) in a separate test process
    that calls the program's top-level functions through proxies. In ``call`` and ``script`` mode
    the program loads as module ``solution``, so its ``if __name__ == '__main__':`` block stays off."""

    source: str
    mode: str = "call"
    entry_point: str | None = None
    inputs: tuple[str, ...] = ()
    test_script: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"Job mode must be one of {MODES}, got {self.mode!r}")
        if self.mode == "call" and not self.entry_point:
            raise ValueError("a 'call' Job needs an entry_point")
        if self.test_script and self.mode != "script":
            raise ValueError(f"test_script is for 'script' Jobs, not {self.mode!r}")
        object.__setattr__(self, "inputs", tuple(self.inputs))


@dataclass(frozen=True)
class RunResult:
    """What one program did: ``outputs`` are canonical texts of the inputs it finished, in order."""

    status: str
    outputs: tuple[str, ...] = ()
    error: str = ""
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class _Worker:
    root: str
    process: subprocess.Popen = field(init=False)
    hello: dict = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        self.process = subprocess.Popen(
            [sys.executable, "-s", "-B", WORKER_FILE, self.root],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**SCRUBBED_ENV, "TMPDIR": self.root, "HOME": self.root},
            cwd=self.root,
            start_new_session=True,
            close_fds=True,
        )

    def handshake(self) -> None:
        self.hello = self._read(STARTUP_TIMEOUT_S) or {}
        if "pid" not in self.hello:
            self.kill()
            raise RuntimeError(f"sandbox worker failed to start ({sys.executable} {WORKER_FILE})")

    def call(self, job: dict, timeout_s: float, test_script: str | None = None) -> RunResult:
        """Send a job (and, apart, a script job's tests: the worker forks the program before it
        reads them, so they are never in the program's memory) and wait for its result."""
        try:
            protocol.write_message(self.process.stdin.fileno(), job)
            if test_script is not None:
                protocol.write_message(self.process.stdin.fileno(), {"test_script": test_script})
            reply = self._read(timeout_s)
        except OSError:
            reply = None
        if reply is None:
            self.kill()
            return RunResult("crashed", error="sandbox worker died or hung")
        return RunResult(
            status=reply["status"],
            outputs=tuple(reply["outputs"]),
            error=reply["error"],
            stdout=reply["stdout"],
            stderr=reply["stderr"],
            wall_s=reply["wall_s"],
        )

    def _read(self, timeout_s: float) -> dict | None:
        fd = self.process.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return protocol.read_message(fd) if ready else None

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class SandboxRefused(RuntimeError):
    """The kernel lacks an isolation layer and the caller did not accept weaker isolation."""


def _accepts_weaker_from_env() -> bool:
    return os.environ.get(ACCEPT_WEAKER_ENV, "").strip().lower() in ("1", "true", "yes")


def settings() -> dict[str, bool]:
    """What a run records about the sandbox (``config.run_metadata``): whether the default pool,
    the one grading uses, accepts weaker isolation where the kernel lacks a layer."""
    return {"accept_weaker_isolation": _accepts_weaker_from_env()}


class Sandbox:
    """A pool of ``workers`` sandbox processes (default: one per CPU core), started on first use.
    It refuses to run programs where the kernel lacks an isolation layer unless
    ``accept_weaker_isolation`` (default: ``COUNCILZOO_SANDBOX_ACCEPT_WEAKER`` in the environment)."""

    def __init__(
        self, workers: int | None = None, limits: Limits | None = None,
        accept_weaker_isolation: bool | None = None,
    ) -> None:  # fmt: skip
        self.workers = workers or os.cpu_count() or 1
        if self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers!r}")
        if accept_weaker_isolation is None:
            accept_weaker_isolation = _accepts_weaker_from_env()
        self.accept_weaker_isolation = accept_weaker_isolation
        self.limits = limits or Limits()
        self._root: str | None = None
        self._pool: list[_Worker] = []
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._threads: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def isolation(self) -> dict[str, bool]:
        """Which layers the kernel granted the workers."""
        self._start()
        hello = self._pool[0].hello
        return {key: bool(hello.get(key)) for key in LAYERS}

    def worker_pids(self) -> list[int]:
        return [w.process.pid for w in self._pool if w.alive]

    def run(self, jobs: Sequence[Job], limits: Limits | None = None) -> list[RunResult]:
        """Run ``jobs`` in parallel; one result per job, in order."""
        limits = limits or self.limits
        self._start()
        assert self._threads is not None
        futures = [self._threads.submit(self._run_one, job, limits) for job in jobs]
        return [f.result() for f in futures]

    def _run_one(self, job: Job, limits: Limits) -> RunResult:
        message = {**asdict(job), "inputs": list(job.inputs), **asdict(limits)}
        tests = message.pop("test_script") if job.mode == "script" else None
        runs = max(1, len(job.inputs)) if job.mode == "stdin" else 1
        worker = self._idle.get()
        try:
            return worker.call(message, limits.timeout_s * runs + REPLY_SLACK_S, tests)
        finally:
            self._idle.put(worker if worker.alive else self._replace(worker))

    def _replace(self, dead: _Worker) -> _Worker:
        with self._lock:
            worker = _Worker(dead.root)
            worker.handshake()
            self._pool[self._pool.index(dead)] = worker
            return worker

    def _start(self) -> None:
        with self._lock:
            if self._pool:
                return
            remove_abandoned_roots()
            self._root = tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{os.getpid()}-")
            self._pool = [_Worker(os.path.join(self._root, f"w{i}")) for i in range(self.workers)]
            for worker in self._pool:
                worker.handshake()
                self._idle.put(worker)
            self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="sandbox")
        missing = [layer for layer in LAYERS if not self._pool[0].hello.get(layer)]
        if missing and not self.accept_weaker_isolation:
            self.close()
            needs = "; ".join(f"{layer}: {LAYERS[layer]}" for layer in missing)
            raise SandboxRefused(
                f"the code sandbox refuses to run untrusted programs: this kernel does not grant its "
                f"{', '.join(missing)} layer ({needs}); set {ACCEPT_WEAKER_ENV}=1 (or pass "
                "Sandbox(accept_weaker_isolation=True)) to grade with weaker isolation"
            )

    def close(self) -> None:
        """Stop the workers (and with them every process a program started) and delete the pool's
        folder, whatever the programs left in it; never raises."""
        with self._lock:
            if self._threads is not None:
                self._threads.shutdown(wait=True)
            for worker in self._pool:
                worker.close()
            if self._root is not None:
                remove_tree(self._root)
            self._pool, self._root, self._threads = [], None, None
            self._idle = queue.Queue()


def remove_abandoned_roots() -> None:
    """Delete the pool folders of processes that are gone (killed before they could close)."""
    for path in Path(tempfile.gettempdir()).glob(f"{ROOT_PREFIX}*-*"):
        owner = path.name[len(ROOT_PREFIX) :].split("-", 1)[0]
        if owner.isdigit() and not pid_alive(int(owner)):
            remove_tree(str(path))



_DEFAULT: dict[int, Sandbox] = {}  # by process id: a forked process gets its own pool


def default_sandbox() -> Sandbox:
    """The process-wide pool that grading uses (one worker per core), closed at exit."""
    pid = os.getpid()
    if pid not in _DEFAULT:
        _DEFAULT.clear()
        _DEFAULT[pid] = Sandbox()
        atexit.register(_DEFAULT[pid].close)
    return _DEFAULT[pid]
