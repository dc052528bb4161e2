"""The one command that starts a whole cohort on one node: each member's world on its own devices.

``launch_cohort`` checks everything that can fail fast (output folder, data, models, trainer
settings) before any member starts, writes the resolved config the members read, starts one
world per member (``python``, ``torchrun`` or ``accelerate launch``, each in its own process
group with its own ``CUDA_VISIBLE_DEVICES``), waits, and stops every world as soon as one fails.
Multi-node runs start a subset of members per node (``members=``).

With ``warm_start`` a single-process world is forked from a server (multiprocessing's
forkserver) that imported torch, transformers, peft and TRL once, instead of a fresh ``python``
that spends ~6 s importing them: what many short runs (a reproduction's arms and seeds) pay for
over and over. The forked world runs the same ``councilzoo.learners.cohort.member`` main in its own
session with its own environment; only what a library reads at import time keeps the value it
had when the server started.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from councilzoo.config import ConfigError, write_run_files
from councilzoo.learners.cohort import engine
from councilzoo.learners.cohort.config import CohortConfig, MemberConfig, load_items
from councilzoo.learners.cohort.member import member_args, member_model_path, quiet_loading
from councilzoo.learners.logging import read_metrics
from councilzoo.tiny_models import build_tiny_models


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What a warm-start server imports once (the member module pulls in torch and transformers).
WARM_MODULES = ("councilzoo.learners.cohort.member", "trl.trainer.grpo_trainer", "peft")


def member_argv(config_path: Path, learner: str, index: int, resume: bool) -> list[str]:
    """The arguments of ``councilzoo.learners.cohort.member``'s main for member ``index``."""
    argv = [str(config_path), "--learner", learner, "--member", str(index)]
    return argv + (["--resume"] if resume else [])


def member_command(
    config_path: Path, learner: str, index: int, member: MemberConfig, resume: bool
) -> list[str]:
    """How member ``index``'s world starts: python (one process), torchrun, or accelerate launch."""
    entry = ["-m", "councilzoo.learners.cohort.member", *member_argv(config_path, learner, index, resume)]
    port = str(_free_port())
    if member.accelerate_config:
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            member.accelerate_config,
            "--num_processes",
            str(member.num_processes),
            "--main_process_port",
            port,
            *entry,
        ]
    if member.num_processes > 1:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(member.num_processes),
            "--master_port",
            port,
            *entry,
        ]
    return [sys.executable, *entry]


def prepare_run(cfg: CohortConfig, learner: str, resume: bool, overwrite: bool) -> Path:
    """Everything that can fail fast, before any member starts and before anything is written:
    trainer settings, the output folder, data, models. Returns the resolved config file the
    members read."""
    quiet_loading()
    out = Path(cfg.output_dir)
    for i in range(len(cfg.members)):
        member_args(cfg, i)  # GRPOConfig errors now
    existing = any(engine.checkpoint_steps(cfg.member_dir(i), verify=False) for i in range(len(cfg.members)))
    if existing and not (resume or overwrite):
        raise ConfigError(
            f"output_dir {str(out)!r} already holds checkpoints of a run: pass --resume to continue "
            "it or --overwrite to start again"
        )
    if overwrite and not resume:
        for i in range(len(cfg.members)):
            shutil.rmtree(cfg.member_dir(i), ignore_errors=True)
    problems = load_items(cfg.data, cfg.seed)
    for i, member in enumerate(cfg.members):
        if not member.tiny_family:
            member_model_path(cfg, i)  # ModelNotCachedError now, not in a member
    build_tiny_models(cfg, problems)
    write_run_files(out, cfg, cfg.seed, learner=learner, fingerprint=cfg.fingerprint())
    return out / "config.yaml"


def launch_cohort(
    cfg: CohortConfig,
    learner: str,
    *,
    members: Sequence[int] | None = None,
    resume: bool = False,
    overwrite: bool = False,
    timeout_s: float | None = None,
) -> list[dict]:
    """Start the members' worlds on this node, wait, and return each member's last logged row.

    ``learner`` is the learner's registered name or ``module:Class`` path (the worlds import it).
    ``members`` selects a subset (multi-node: each node starts its own members). Devices come from
    each member's ``devices``. If any world exits with an error, every other world is stopped
    (its whole process group) and ``CohortFailed`` names the member and its exit status.
    """
    config_path = prepare_run(cfg, learner, resume, overwrite)
    indices = list(range(len(cfg.members))) if members is None else list(members)
    procs: dict[int, subprocess.Popen | ForkedWorld] = {}
    for i in indices:
        member = cfg.members[i]
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if member.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = member.devices
        if cfg.warm_start and member.num_processes == 1 and not member.accelerate_config:
            procs[i] = ForkedWorld(member_argv(config_path, learner, i, resume), env)
        else:
            cmd = member_command(config_path, learner, i, member, resume)
            procs[i] = subprocess.Popen(cmd, env=env, start_new_session=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    failed: list[str] = []
    try:
        while procs:
            for i, proc in list(procs.items()):
                code = proc.poll()
                if code is None:
                    continue
                del procs[i]
                if code != 0:
                    failed.append(f"member {cfg.members[i].name!r} exited with status {code}")
            if failed:
                break
            if deadline is not None and time.monotonic() > deadline:
                failed.append(f"the cohort did not finish within {timeout_s} s")
                break
            time.sleep(0.2)
    finally:
        for proc in procs.values():
            _stop(proc)
    if failed:
        raise CohortFailed("; ".join(failed))
    return [last_row(cfg, i) for i in indices]


class CohortFailed(RuntimeError):
    """A member's world failed (or the cohort timed out); every member was stopped."""


class ForkedWorld:
    """A single-process member world forked from the warm-start server, with ``Popen``'s
    ``pid``, ``poll`` and ``wait``; like a ``Popen`` world it leads its own process group."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(list(WARM_MODULES))  # read when the server first starts
        self.process = context.Process(target=_forked_member_main, args=(argv, env), name="member-world")
        self.process.start()
        self.pid = self.process.pid
        while self.process.is_alive() and _group_of(self.pid) != self.pid:
            time.sleep(0.005)  # until the world leads its group, so that stopping it reaches it all

    def poll(self) -> int | None:
        return self.process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired("member world", timeout)
        return self.process.exitcode


def _group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _forked_member_main(argv: list[str], env: dict[str, str]) -> None:
    """A forked world: its own session and environment, then the member module's main."""
    os.setsid()
    os.environ.clear()
    os.environ.update(env)
    if env.get("OMP_NUM_THREADS"):  # read by the thread pools at import: apply it now
        import torch

        torch.set_num_threads(int(env["OMP_NUM_THREADS"]))
    from councilzoo.learners.cohort import member

    sys.exit(member.main(argv))


def _stop(proc: subprocess.Popen | ForkedWorld) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def last_row(cfg: CohortConfig, index: int) -> dict:
    path = cfg.member_dir(index) / "metrics.jsonl"
    rows = [r for r in read_metrics(path) if r.get("reward") is not None] if path.is_file() else []
    return rows[-1] if rows else {}
