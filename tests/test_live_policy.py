"""What ``councilzoo.learners.live_policy`` relies on in TRL beyond its public API, checked against
the installed TRL so that a rename fails here, not silently inside a training run."""

from __future__ import annotations

import inspect

from councilzoo.learners.live_policy import vllm_mode


def test_trl_keeps_its_last_loaded_step_record():
    """``weights_pushed``/``mark_weights_pushed`` read and write GRPOTrainer's ``_last_loaded_step``:
    TRL must still set it after its own push and compare it with the global step before pushing,
    before its generations and before a ``rollout_func`` alike."""
    from trl import GRPOTrainer

    source = inspect.getsource(GRPOTrainer)
    assert "self._last_loaded_step = -1" in source
    assert source.count("self.state.global_step != self._last_loaded_step") >= 2
    assert source.count("self._last_loaded_step = self.state.global_step") >= 2


def test_trl_server_generation_api_is_what_server_generator_calls():
    from trl.generation.vllm_client import VLLMClient
    from trl.generation.vllm_generation import VLLMGeneration

    params = inspect.signature(VLLMClient.generate).parameters
    assert {"prompts", "n", "temperature", "top_p", "max_tokens", "logprobs", "generation_kwargs"} <= set(
        params
    )
    assert {"base_url", "connection_timeout"} <= set(inspect.signature(VLLMClient).parameters)
    assert "self.vllm_client = VLLMClient(" in inspect.getsource(VLLMGeneration._init_vllm)
    assert callable(VLLMGeneration.sync_weights)


def test_vllm_mode_reads_the_trainer_settings():
    from trl import GRPOConfig

    def args(**kw):
        return GRPOConfig(output_dir="unused", use_cpu=True, report_to="none", **kw)

    assert vllm_mode(args()) is None
    assert vllm_mode(args(use_vllm=True)) == "colocate"  # TRL's default mode
    assert vllm_mode(args(use_vllm=True, vllm_mode="server")) == "server"
