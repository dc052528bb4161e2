"""Prompt rendering: chat messages to prompt token ids through the model's chat template, with the
template's date fixed; a model without a chat template (a base model) gets them as plain completion
text (``completion_text``).

Rendering has one home so that the transformers and vLLM backends feed the model the very same
prompt token ids (vLLM receives ids, never text), which is what makes their greedy outputs
comparable token for token.
"""

from __future__ import annotations

__all__ = [
    "TEMPLATE_DATE", "COMPLETION_STOP", "chat_template_kwargs", "check_template_date", "apply_chat_template",
    "completion_text", "prompt_text", "render_prompt",
]

# The date every chat template renders. Llama-3 templates write today's date into the system turn
# unless given ``date_string`` (through transformers' ``strftime_now``), so prompt tokens would
# change at midnight and a resumed run would read other prompts than an uninterrupted one.
TEMPLATE_DATE = "26 Jul 2024"  # Llama-3.1's own fallback
# Where a completion-form reply ends: a base model goes on to write the next question itself.
COMPLETION_STOP = ("\nQuestion:",)


def chat_template_kwargs(processing=None) -> dict:
    """Fixed values of the nondeterministic chat-template inputs, for every ``apply_chat_template``.

    Given the tokenizer or processor, only those its template reads: a processor hands every other
    keyword on to its tokenizer call, with a warning for each prompt it renders."""
    if processing is None or "date_string" in _template_text(processing):
        return {"date_string": TEMPLATE_DATE}
    return {}


def _template_text(processing) -> str:
    """The template a render uses: a processor's ``default`` among named templates (all of them
    where it has none), else its one template; "" without one."""
    template = getattr(processing, "chat_template", None) or ""
    if isinstance(template, dict):
        return template.get("default") or "\n".join(template.values())
    return template


def check_template_date(processing) -> None:
    """Refuse a chat template that reads the clock other than as the ``date_string`` fallback: its
    prompts would change with the date, and ``strftime_now`` cannot be fixed from outside (a
    callable passed to ``apply_chat_template`` reaches the template as a string)."""
    template = _template_text(processing)
    if "strftime_now" in template and "date_string" not in template:
        raise ValueError(
            f"the chat template of {getattr(processing, 'name_or_path', '')!r} writes the current date "
            "(strftime_now) into every prompt, so prompts change with the day; give it a template that "
            "reads date_string (as Llama-3's do) or none"
        )


def apply_chat_template(processing, messages, **kwargs):
    """``processing.apply_chat_template`` for a generation prompt, with ``chat_template_kwargs``."""
    check_template_date(processing)
    return processing.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False, **chat_template_kwargs(processing), **kwargs
    )


def completion_text(messages: list[dict], bos_token: str | None = None) -> str:
    """Chat messages as the plain text a base model continues: the system text, then each user
    turn followed by "Answer:" and, for earlier turns (worked examples), the assistant's reply;
    the text ends on the open "Answer:" of the last question. ``bos_token`` leads it, as a chat
    template would write it (the prompt is tokenised without special tokens)."""
    parts = [bos_token or ""]
    for message in messages:
        content = message["content"]
        if message["role"] == "system":
            parts.append(f"{content}\n\n")
        elif message["role"] == "user":
            parts.append(f"{content}\nAnswer:")
        else:
            parts.append(f" {content}\n\n")
    return "".join(parts)


def prompt_text(tokenizer, messages: list[dict]) -> str:
    """``messages`` rendered for ``tokenizer``'s model: through its chat template when it has one,
    as completion text (``completion_text``) when it has none."""
    if getattr(tokenizer, "chat_template", None):
        return apply_chat_template(tokenizer, messages)
    return completion_text(messages, getattr(tokenizer, "bos_token", None))


def render_prompt(tokenizer, prompt: str | list[dict], *, images: bool = False) -> list[int]:
    """Prompt token ids: chat messages through the tokenizer's chat template (with the assistant
    generation prompt), or as completion text where the tokenizer has none (``prompt_text``);
    strings taken as already rendered. No special tokens are added: a chat template writes its
    own, completion text starts with the BOS token, and a rendered string already holds them.

    ``images``: the model reads images, and its template renders image parts as its placeholder
    tokens; for a text-only model a prompt with image parts is an error, and text parts are
    joined into plain string contents."""
    from councilzoo.agents.generators.images import has_image_parts, text_messages

    if isinstance(prompt, str):
        text = prompt
    else:
        if not images:
            if has_image_parts(prompt):
                raise ValueError(
                    f"model {getattr(tokenizer, 'name_or_path', '')!r} is text-only (no image "
                    "processor) but the prompt holds image parts: use a vision-language model, or "
                    "render the prompt without images (LLMAgent does so for text-only generators)"
                )
            prompt = text_messages(prompt)
        text = prompt_text(tokenizer, prompt)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])
