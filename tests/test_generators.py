"""Generation backends in the main environment: TransformersGenerator on the tiny model, the
OpenAI client's retry/secret handling against a local HTTP server, and the factory.

The vLLM engine and a real OpenAI-compatible server are tested in tests/test_vllm.py.
"""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch
from transformers import TopPLogitsWarper

from councilzoo.agents.base import Generator, Sampling
from councilzoo.agents.generators import (
    GenerationError,
    ModelNotCachedError,
    OpenAIGenerator,
    TransformersGenerator,
    make_generator,
    resolve_model_path,
)
from councilzoo.agents.generators.adapters import AdapterGenerator
from councilzoo.agents.generators.chat_template import render_prompt

PROMPTS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [
        {"role": "system", "content": "You are a reviewer."},
        {"role": "user", "content": "Verdict: RIGHT or WRONG"},
    ],
    "<|im_start|>user\nhow many apples<|im_end|>\n<|im_start|>assistant\n",
    [{"role": "user", "content": "compute 17 modulo 5 and give the final answer \\boxed{ }"}],
]
GREEDY = Sampling(max_new_tokens=16, temperature=0.0)


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny matrices: one thread is ~10x faster than several on a shared 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def gen(tiny_model_dir) -> TransformersGenerator:
    return TransformersGenerator(tiny_model_dir, batch_size=64)


def _recomputed_logprobs(
    gen: TransformersGenerator, completion, temperature: float = 1.0, top_p: float = 1.0
):
    """Log-probabilities of the completion's tokens from one full forward pass (no KV cache)."""
    ids = torch.tensor([completion.prompt_token_ids + completion.token_ids])
    with torch.no_grad():
        logits = gen.model(ids).logits[0, len(completion.prompt_token_ids) - 1 : -1].float()
    scores = logits / temperature
    if top_p < 1:
        scores = TopPLogitsWarper(top_p)(ids, scores)
    logprobs = torch.log_softmax(scores, dim=-1)
    return logprobs.gather(1, torch.tensor(completion.token_ids)[:, None]).squeeze(1)


# --- TransformersGenerator ------------------------------------------------------------------


def test_is_a_generator(gen):
    assert isinstance(gen, Generator)


def test_batched_left_padded_greedy_equals_unbatched(tiny_model_dir, gen):
    lengths = {len(render_prompt(gen.tokenizer, p)) for p in PROMPTS}
    assert len(lengths) > 1, "prompts must differ in length so that the batch is padded"
    batched = gen.generate(PROMPTS, sampling=GREEDY)
    one_by_one = TransformersGenerator(tiny_model_dir, batch_size=1)
    for prompt, [completion] in zip(PROMPTS, batched, strict=True):
        [[alone]] = one_by_one.generate([prompt], sampling=GREEDY)
        assert completion.token_ids == alone.token_ids
        assert completion.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_chat_prompts_are_rendered_with_the_generation_prompt(gen):
    [[completion]] = gen.generate(PROMPTS[:1], sampling=Sampling(max_new_tokens=2, temperature=0.0))
    expected = gen.tokenizer(
        gen.tokenizer.apply_chat_template(PROMPTS[0], add_generation_prompt=True, tokenize=False),
        add_special_tokens=False,
    )["input_ids"]
    assert completion.prompt_token_ids == expected
    assert gen.tokenizer.decode(expected).endswith("<|im_start|>assistant\n")


@pytest.mark.parametrize(
    "sampling",
    [
        GREEDY,
        Sampling(max_new_tokens=16, temperature=0.7, seed=1),
        Sampling(max_new_tokens=16, top_p=0.9, seed=2),
    ],
    ids=["greedy", "temperature", "top_p"],
)
def test_logprobs_match_a_forward_pass(gen, sampling):
    """The reported log-probabilities are those of the distribution sampled from (after
    temperature and top-p), recomputed here without the KV cache."""
    for [completion] in gen.generate(PROMPTS, sampling=sampling):
        temperature = 1.0 if sampling.greedy else sampling.temperature
        expected = _recomputed_logprobs(gen, completion, temperature, sampling.top_p)
        assert torch.tensor(completion.logprobs) == pytest.approx(expected, abs=1e-4)
        assert all(lp <= 0 and lp > -float("inf") for lp in completion.logprobs)


def test_length_limit_and_token_counts(gen):
    sampling = Sampling(max_new_tokens=7, temperature=1.0, seed=0)
    for prompt, group in zip(PROMPTS, gen.generate(PROMPTS, n=2, sampling=sampling), strict=True):
        for c in group:
            assert c.prompt_tokens == len(c.prompt_token_ids) == len(render_prompt(gen.tokenizer, prompt))
            assert c.completion_tokens == len(c.token_ids) == len(c.logprobs) == 7
            assert c.finish_reason == "length"
            assert c.text == gen.tokenizer.decode(c.token_ids, skip_special_tokens=True).rstrip("\ufffd")


def test_n_samples_per_prompt(gen):
    out = gen.generate(PROMPTS, n=3, sampling=Sampling(max_new_tokens=24, temperature=1.0, seed=3))
    assert [len(group) for group in out] == [3] * len(PROMPTS)
    for group in out:  # 24 tokens from a near-uniform 512-token model: samples differ
        assert len({tuple(c.token_ids) for c in group}) == 3
    greedy = gen.generate(PROMPTS, n=3, sampling=GREEDY)
    for group in greedy:
        assert len(group) == 3 and all(c.token_ids == group[0].token_ids for c in group)
        assert len({id(c) for c in group}) == 3  # independent objects


def test_same_seed_same_samples_and_global_rng_untouched(gen):
    sampling = Sampling(max_new_tokens=20, temperature=1.0, seed=11)
    state = torch.get_rng_state()
    first = gen.generate(PROMPTS, n=2, sampling=sampling)
    assert torch.equal(torch.get_rng_state(), state)
    again = gen.generate(PROMPTS, n=2, sampling=sampling)
    other = gen.generate(PROMPTS, n=2, sampling=Sampling(max_new_tokens=20, temperature=1.0, seed=12))

    def ids(out):
        return [[c.token_ids for c in group] for group in out]

    assert ids(first) == ids(again)
    assert ids(first) != ids(other)


@pytest.mark.parametrize("batch_size", [64, 4])  # all prompts in one batch; two prompts a batch
def test_shared_prompts_give_the_same_samples_and_logprobs_as_unshared(tiny_model_dir, gen, batch_size):
    """``share_prompts`` reads each prompt once for its n samples; the samples, finish reasons and
    prompt ids equal the unshared generator's, log-probabilities within float rounding, and each
    log-probability still matches a full forward pass over prompt and completion."""
    shared = TransformersGenerator(tiny_model_dir, batch_size=batch_size, share_prompts=True)
    unshared = TransformersGenerator(tiny_model_dir, batch_size=batch_size)
    sampling = Sampling(max_new_tokens=16, temperature=0.8, seed=5)
    a, b = (g.generate(PROMPTS, n=2, sampling=sampling) for g in (unshared, shared))
    for group_a, group_b in zip(a, b, strict=True):
        for x, y in zip(group_a, group_b, strict=True):
            for field in ("token_ids", "prompt_token_ids", "finish_reason", "text"):
                assert getattr(x, field) == getattr(y, field)
            assert y.logprobs == pytest.approx(x.logprobs, abs=1e-4)
            assert y.logprobs == pytest.approx(_recomputed_logprobs(gen, y, 0.8).tolist(), abs=1e-4)
    with pytest.raises(ValueError, match="share_prompts is not supported with adapters"):
        AdapterGenerator(tiny_model_dir, {"a": {"r": 2}}, share_prompts=True)


def test_unseeded_calls_follow_the_constructor_seed(tiny_model_dir, gen):
    sampling = Sampling(max_new_tokens=12, temperature=1.0)
    a, b = (TransformersGenerator(gen.model, tokenizer=gen.tokenizer, seed=5) for _ in range(2))
    a1, a2 = (a.generate(PROMPTS[:2], sampling=sampling) for _ in range(2))
    b1 = b.generate(PROMPTS[:2], sampling=sampling)
    assert [g[0].token_ids for g in a1] == [g[0].token_ids for g in b1]
    assert [g[0].token_ids for g in a1] != [g[0].token_ids for g in a2]


def test_stops_at_eos(gen):
    """Make a token the greedy path emits an eos token: generation must end right there."""
    [[free]] = gen.generate(PROMPTS[:1], sampling=GREEDY)
    k = next(i for i in range(3, len(free.token_ids)) if free.token_ids[i] not in free.token_ids[:i])
    model = gen.model
    original = model.generation_config.eos_token_id
    model.generation_config.eos_token_id = [gen.tokenizer.eos_token_id, free.token_ids[k]]
    try:
        stopping = TransformersGenerator(model, tokenizer=gen.tokenizer)
        out = stopping.generate(PROMPTS, sampling=GREEDY)
    finally:
        model.generation_config.eos_token_id = original
    first = out[0][0]
    assert first.token_ids == free.token_ids[: k + 1]
    assert first.finish_reason == "stop" and first.completion_tokens == k + 1 == len(first.logprobs)
    assert first.logprobs == pytest.approx(free.logprobs[: k + 1], abs=1e-5)
    for [c] in out[1:]:  # rows padded after the first one stopped are cut correctly
        assert (c.finish_reason == "stop") == (free.token_ids[k] in c.token_ids)
        assert c.completion_tokens == len(c.token_ids) == len(c.logprobs)


def test_stop_strings_cut_text_and_keep_the_completing_token(gen):
    [[free]] = gen.generate(PROMPTS[:1], sampling=GREEDY)
    windows = (gen.tokenizer.decode(free.token_ids[k : k + 2]) for k in range(3, len(free.token_ids) - 2))
    # a clean stop string (no partial UTF-8 character) that first occurs after a few tokens
    stop = next(w for w in windows if "\ufffd" not in w and w.strip() and free.text.find(w) > 0)
    [[cut]] = gen.generate(PROMPTS[:1], sampling=Sampling(max_new_tokens=16, temperature=0.0, stop=(stop,)))
    full_text = gen.tokenizer.decode(cut.token_ids, skip_special_tokens=True)
    assert cut.finish_reason == "stop"
    assert stop in full_text and stop not in cut.text
    assert full_text.startswith(cut.text) and free.text.startswith(cut.text + stop)
    assert stop not in gen.tokenizer.decode(cut.token_ids[:-1])  # the last token completed it
    assert len(cut.logprobs) == cut.completion_tokens == len(cut.token_ids)


def test_generates_with_weights_updated_in_place(tiny_model_dir):
    gen = TransformersGenerator(tiny_model_dir)
    before = gen.generate(PROMPTS, sampling=GREEDY)
    with torch.no_grad():
        gen.model.lm_head.weight.mul_(-1.0)
    after = gen.generate(PROMPTS, sampling=GREEDY)
    assert [g[0].token_ids for g in before] != [g[0].token_ids for g in after]
    for [c] in after:
        assert torch.tensor(c.logprobs) == pytest.approx(_recomputed_logprobs(gen, c), abs=1e-4)


@pytest.mark.parametrize(
    ("prompts", "n", "sampling", "error"),
    [
        ("just a string", 1, None, TypeError),
        ([[{"content": "no role"}]], 1, None, TypeError),
        ([[]], 1, None, TypeError),
        (["ok"], 0, None, ValueError),
        (["ok"], 1, Sampling(temperature=-1.0), ValueError),
        (["ok"], 1, Sampling(top_p=0.0), ValueError),
        (["ok"], 1, Sampling(max_new_tokens=0), ValueError),
        (["ok"], 1, Sampling(stop=("",)), ValueError),
    ],
)
def test_bad_requests_fail_before_work(gen, prompts, n, sampling, error):
    with pytest.raises(error):
        gen.generate(prompts, n=n, sampling=sampling)


def test_chat_prompt_without_chat_template_is_read_as_completion_text(gen):
    """A base model (no chat template) is given the conversation as completion text: its greedy
    reply equals the reply to that text passed as an already rendered string."""
    from councilzoo.agents.generators.chat_template import completion_text

    template, gen.tokenizer.chat_template = gen.tokenizer.chat_template, None
    try:
        [as_messages] = gen.generate(PROMPTS[:1], sampling=GREEDY)
        [as_text] = gen.generate([completion_text(PROMPTS[0], gen.tokenizer.bos_token)], sampling=GREEDY)
    finally:
        gen.tokenizer.chat_template = template
    assert as_messages == as_text


# --- model loading and the factory ----------------------------------------------------------


def test_uncached_hub_model_fails_with_a_clear_message(monkeypatch, tmp_path):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotCachedError, match="not in the Hugging Face cache.*local model directory"):
        TransformersGenerator("councilzoo-tests/no-such-model")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_model_path(tmp_path / "missing")


def test_offline_loading_turns_hub_kernels_off_unless_the_user_chose(monkeypatch, tiny_model_dir):
    """Offline, transformers' default hub kernels would fail a GPU model's first train(): loading
    a model turns them off, and leaves an explicit USE_HUB_KERNELS alone."""
    from huggingface_hub import constants
    from transformers.integrations.hub_kernels import _kernels_enabled

    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    resolve_model_path(tiny_model_dir)
    assert "USE_HUB_KERNELS" not in os.environ and _kernels_enabled()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    resolve_model_path(tiny_model_dir)
    assert os.environ["USE_HUB_KERNELS"] == "0" and not _kernels_enabled()
    monkeypatch.setenv("USE_HUB_KERNELS", "1")
    resolve_model_path(tiny_model_dir)
    assert _kernels_enabled()


def test_make_generator(tiny_model_dir):
    gen = make_generator({"backend": "transformers", "model": str(tiny_model_dir), "batch_size": 2})
    assert isinstance(gen, TransformersGenerator) and gen.batch_size == 2
    assert isinstance(
        make_generator({"backend": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m"}),
        OpenAIGenerator,
    )
    with pytest.raises(ValueError, match="backend"):
        make_generator({"backend": "tgi", "model": "m"})
    with pytest.raises(ValueError, match="base_url"):
        make_generator({"backend": "openai", "model": "m"})
    with pytest.raises(TypeError, match="'transformers'.*bogus"):
        make_generator({"backend": "transformers", "model": str(tiny_model_dir), "bogus": 1})


def test_vllm_backend_without_vllm_says_how_to_install(tiny_model_dir):
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="setup_vllm_env.sh"):
            make_generator({"backend": "vllm", "model": str(tiny_model_dir)})
    else:
        pytest.skip("vllm is installed here; tests/test_vllm.py covers the backend")


# --- OpenAIGenerator against a local HTTP server ----------------------------------------------

SECRET = "sk-test-do-not-leak-1234"


class _Server:
    """A minimal OpenAI-style endpoint: replies with scripted statuses, then a chat completion
    echoing the last user message; records the requests it saw."""

    def __init__(self, statuses=(), fail_on: str | None = None):
        self.statuses = list(statuses)
        self.fail_on = fail_on
        self.requests: list[tuple[str, dict, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append((self.path, body, self.headers.get("Authorization")))
                status = server.statuses.pop(0) if server.statuses else 200
                prompt = body["messages"][-1]["content"] if "messages" in body else body["prompt"]
                if server.fail_on is not None and server.fail_on in prompt:
                    status = 503
                if status != 200:
                    self._send(status, {"error": {"message": f"no luck with key {SECRET}"}})
                    return
                choice = {"index": 0, "finish_reason": "length"}
                tokens = prompt.split()
                logprobs = [{"token": t, "logprob": -0.5} for t in tokens]
                if "messages" in body:
                    choice |= {
                        "message": {"role": "assistant", "content": prompt.upper()},
                        "logprobs": {"content": logprobs},
                    }
                else:
                    choice |= {
                        "text": prompt.upper(),
                        "logprobs": {"tokens": tokens, "token_logprobs": [-0.5] * len(tokens)},
                    }
                usage = {
                    "prompt_tokens": 9,
                    "completion_tokens": len(tokens),
                    "total_tokens": 9 + len(tokens),
                }
                self._send(200, {"choices": [choice] * body.get("n", 1), "usage": usage})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server_factory(monkeypatch):
    monkeypatch.setenv("COUNCILZOO_TEST_KEY", SECRET)
    servers = []

    def make(**kwargs):
        servers.append(_Server(**kwargs))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def _client(url, **kwargs):
    return OpenAIGenerator(url, "tiny", api_key_env="COUNCILZOO_TEST_KEY", backoff=0.01, **kwargs)


def test_openai_completions_in_prompt_order_with_usage_and_logprobs(server_factory):
    server = server_factory()
    prompts = [[{"role": "user", "content": f"question {i} words"}] for i in range(12)] + ["rendered text"]
    out = _client(server.url, max_concurrency=4).generate(prompts, n=2, sampling=Sampling(max_new_tokens=5))
    assert [group[0].text for group in out] == [f"QUESTION {i} WORDS" for i in range(12)] + ["RENDERED TEXT"]
    assert all(len(group) == 2 for group in out)
    c = out[0][0]
    assert c.logprobs == [-0.5] * 3 and c.completion_tokens == 3 and c.prompt_tokens == 9
    assert c.finish_reason == "length"
    paths = sorted({path for path, _, _ in server.requests})
    assert paths == ["/v1/chat/completions", "/v1/completions"]
    body = next(b for p, b, _ in server.requests if p == "/v1/chat/completions")
    assert body["logprobs"] is True and body["max_completion_tokens"] == 5 and body["n"] == 2
    assert {auth for _, _, auth in server.requests} == {f"Bearer {SECRET}"}


def test_openai_retries_transient_errors(server_factory):
    server = server_factory(statuses=[503, 429])
    [[c]] = _client(server.url, max_retries=2).generate(["a b"])
    assert c.text == "A B" and len(server.requests) == 3


def test_openai_gives_up_with_a_clear_error_that_hides_the_key(server_factory):
    server = server_factory(statuses=[500] * 10)
    gen = _client(server.url, max_retries=2)
    with pytest.raises(GenerationError) as info:
        gen.generate(["a b"])
    message = str(info.value)
    assert f"{server.url}/completions" in message and "HTTP 500" in message and "3 attempts" in message
    assert len(server.requests) == 3
    assert SECRET not in message and SECRET not in repr(gen) and SECRET not in str(vars(gen))


def test_openai_client_errors_are_not_retried_and_redact_the_key(server_factory):
    server = server_factory(statuses=[401])
    with pytest.raises(GenerationError, match="HTTP 401") as info:
        _client(server.url, max_retries=3).generate(["a"])
    assert len(server.requests) == 1 and SECRET not in str(info.value) and "***" in str(info.value)


def test_openai_unreachable_server(monkeypatch):
    gen = OpenAIGenerator("http://127.0.0.1:9/v1", "tiny", max_retries=1, backoff=0.01, timeout=2)
    with pytest.raises(GenerationError, match="127.0.0.1:9/v1/completions.*2 attempts.*ConnectError"):
        gen.generate(["a"])


def test_openai_failure_keeps_the_finished_prompts(server_factory):
    server = server_factory(fail_on="poison")
    prompts = ["one", "two poison", "three"]
    with pytest.raises(GenerationError) as info:
        _client(server.url, max_retries=1, max_concurrency=1).generate(prompts)
    partial = info.value.partial
    assert partial[0][0].text == "ONE" and partial[1] is None
    assert partial[2] is None or partial[2][0].text == "THREE"  # queued work is dropped, never wrong
