"""Generation through any OpenAI-compatible HTTP server (OpenAI, vLLM's server, SGLang, ...).

Chat prompts go to ``/chat/completions``, already-rendered strings to ``/completions``; image parts
of chat messages are sent inline as ``image_url`` parts with base64 PNG data URLs. Requests
run concurrently on a thread pool sharing one ``httpx.Client``; transient failures (connection
errors, timeouts, HTTP 408/429/5xx) are retried with exponential backoff, then reported as a
``GenerationError`` that names the endpoint and the last status and carries the completions of
the prompts that did finish. The API key is read from the environment at each request and is
never stored on the object, logged, or written into an error message.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from councilzoo.agents.base import Completion, Sampling
from councilzoo.agents.generators.checks import GenerationError, check_request
from councilzoo.agents.generators.images import openai_messages
from councilzoo.agents.generators.sampling import prompt_seeds
from councilzoo.config import MissingExtraError

__all__ = ["OpenAIGenerator"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_MAX_RETRY_AFTER_S = 30.0
_TOKEN_ID_PREFIX = "token_id:"  # vLLM's form when asked for return_tokens_as_token_ids


class OpenAIGenerator:
    """A ``Generator`` over an OpenAI-compatible endpoint.

    - ``base_url``: the API root including ``/v1`` (e.g. ``http://127.0.0.1:8000/v1``).
    - ``model``: the server-side model name.
    - ``api_key_env``: environment variable holding the key (unset: no Authorization header,
      as local servers need none).
    - ``max_concurrency`` requests in flight; ``timeout`` seconds per request; ``max_retries``
      retries after the first attempt, waiting ``backoff * 2**attempt`` seconds (or the
      server's ``Retry-After``, capped at 30 s).
    - ``accepts_images``: whether the served model reads images (agents then send image parts;
      False for a text-only model, whose agents get the text and a note instead).
    - ``extra_body``: server-specific request fields, e.g. ``{"return_tokens_as_token_ids": True}``
      for vLLM, which fills ``Completion.token_ids``.

    Token counts come from the response's ``usage`` (per choice from its log-probabilities when
    ``n > 1``); ``logprobs`` are requested and reported when the server returns them, under the
    server's own convention (vLLM: before temperature unless started with
    ``--logprobs-mode processed_logprobs``).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        max_concurrency: int = 8,
        timeout: float = 60,
        max_retries: int = 4,
        backoff: float = 0.5,
        extra_body: dict | None = None,
        accepts_images: bool = True,
    ):
        try:
            import httpx
        except ImportError as exc:
            raise MissingExtraError(
                "OpenAIGenerator (model type 'openai') needs httpx: pip install 'councilzoo[openai]'"
            ) from exc
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if max_concurrency < 1 or timeout <= 0 or max_retries < 0 or backoff < 0:
            raise ValueError(
                "need max_concurrency >= 1, timeout > 0, max_retries >= 0, backoff >= 0; got "
                f"{max_concurrency}, {timeout}, {max_retries}, {backoff}"
            )
        self.accepts_images = bool(accepts_images)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff = backoff
        self.extra_body = dict(extra_body or {})
        self._httpx = httpx
        self._client = httpx.Client(
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency),
        )

    def __repr__(self) -> str:
        fields = f"base_url={self.base_url!r}, model={self.model!r}, api_key_env={self.api_key_env!r}"
        return f"OpenAIGenerator({fields})"

    def check_reachable(self, timeout: float = 5.0) -> None:
        """A ``GenerationError`` at once, without retries, when nothing answers at ``base_url``
        (any HTTP reply counts as reachable), so a wrong URL or a stopped server fails before work."""
        try:
            self._client.get(f"{self.base_url}/models", timeout=timeout)
        except self._httpx.TransportError as exc:
            raise GenerationError(
                f"cannot reach the OpenAI-compatible endpoint {self.base_url} ({type(exc).__name__}): "
                "start the server, or fix base_url"
            ) from exc

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIGenerator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def generate(self, prompts: list, n: int = 1, sampling: Sampling | None = None) -> list[list[Completion]]:
        """``n`` completions per prompt, in prompt order; ``GenerationError`` when a request fails
        for good (its ``partial`` keeps the prompts that finished)."""
        sampling = check_request(prompts, n, sampling)
        seeds = [None] * len(prompts) if sampling.seed is None else prompt_seeds(sampling.seed, len(prompts))
        # images are encoded before any request, so that a bad image fails the call at once
        payloads = [p if isinstance(p, str) else openai_messages(p) for p in prompts]
        results: list[list[Completion] | None] = [None] * len(prompts)
        error: GenerationError | None = None
        with ThreadPoolExecutor(self.max_concurrency) as pool:
            futures = [
                pool.submit(self._one_prompt, p, n, sampling, s) for p, s in zip(payloads, seeds, strict=True)
            ]
            for i, future in enumerate(futures):
                if future.cancelled():
                    continue
                try:
                    results[i] = future.result()
                except GenerationError as exc:
                    if error is None:  # the server is likely gone: drop the queued requests
                        error = exc
                        for queued in futures:
                            queued.cancel()
        if error is not None:
            raise GenerationError(str(error), partial=results) from error
        return results  # type: ignore[return-value]

    def _one_prompt(self, prompt, n: int, sampling: Sampling, seed: int | None) -> list[Completion]:
        copies = 1 if sampling.greedy else n
        chat = not isinstance(prompt, str)
        body = {
            "model": self.model,
            "n": copies,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
        }
        if chat:
            body |= {"messages": prompt, "max_completion_tokens": sampling.max_new_tokens, "logprobs": True}
        else:
            body |= {"prompt": prompt, "max_tokens": sampling.max_new_tokens, "logprobs": 0}
        if seed is not None:
            body["seed"] = seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        path = "/chat/completions" if chat else "/completions"
        reply = self._post(path, body | self.extra_body)
        try:
            completions = _parse(reply, chat)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise GenerationError(
                f"POST {self.base_url}{path}: unexpected reply ({type(exc).__name__}: {exc})"
            ) from exc
        if len(completions) != copies:
            raise GenerationError(
                f"POST {self.base_url}{path}: asked for {copies} choices, got {len(completions)}"
            )
        return completions if copies == n else [replace(completions[0]) for _ in range(n)]

    def _post(self, path: str, body: dict) -> dict:
        url = self.base_url + path
        key = os.environ.get(self.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            delay = self.backoff * 2**attempt
            try:
                response = self._client.post(url, json=body, headers=headers)
            except self._httpx.TransportError as exc:  # connect/read errors and timeouts
                last = type(exc).__name__
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:
                        last = "HTTP 200 with a body that is not JSON"
                else:
                    last = f"HTTP {response.status_code}"
                    if response.status_code not in _RETRY_STATUS:
                        detail = response.text[:300].replace(key, "***") if key else response.text[:300]
                        raise GenerationError(f"POST {url} failed with {last}: {detail}")
                    delay = _retry_after(response, delay)
            if attempt < self.max_retries:
                time.sleep(delay)
        raise GenerationError(f"POST {url} failed after {self.max_retries + 1} attempts; last error: {last}")


def _retry_after(response, default: float) -> float:
    try:
        return min(float(response.headers["retry-after"]), _MAX_RETRY_AFTER_S)
    except (KeyError, ValueError):
        return default


def _parse(reply: dict, chat: bool) -> list[Completion]:
    """Completions from a chat or text completion reply (choices sorted by ``index``)."""
    choices = sorted(reply.get("choices", []), key=lambda c: c.get("index", 0))
    usage = reply.get("usage") or {}
    completions = []
    for choice in choices:
        if chat:
            text = (choice.get("message") or {}).get("content") or ""
            entries = ((choice.get("logprobs") or {}).get("content")) or None
            tokens = [e["token"] for e in entries] if entries else None
            logprobs = [e["logprob"] for e in entries] if entries else None
        else:
            text = choice.get("text") or ""
            lp = choice.get("logprobs") or {}
            tokens, logprobs = lp.get("tokens"), lp.get("token_logprobs")
        token_ids = []
        if tokens and all(t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
            token_ids = [int(t[len(_TOKEN_ID_PREFIX) :]) for t in tokens]
        if len(choices) == 1 or logprobs is None:  # usage sums the choices: split it evenly
            n_tokens = int(usage.get("completion_tokens", 0)) // len(choices)
        else:
            n_tokens = len(logprobs)
        completions.append(
            Completion(
                text=text,
                token_ids=token_ids,
                logprobs=logprobs,
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=n_tokens,
                finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            )
        )
    return completions
