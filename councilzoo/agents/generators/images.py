"""Image parts of chat prompts, as every backend reads them.

A user message's content may be a list of parts in Hugging Face's format:
``{"type": "image", "image": <PIL image or file path>}`` and ``{"type": "text", "text": ...}``.
The local backends need the images as PIL images, in the order the chat template places their
placeholders; OpenAI-compatible servers need them inline, as ``image_url`` parts holding base64
PNG data URLs (a server cannot read our file paths).
"""

from __future__ import annotations

import base64
import io

from PIL import Image

from councilzoo.tasks.images import ImageInput, load_image

__all__ = ["message_images", "has_image_parts", "text_messages", "png_data_url", "openai_messages"]


def message_images(prompt: str | list[dict]) -> list[Image.Image]:
    """The prompt's images as RGB PIL images, in prompt order (``[]`` for a rendered string or
    text-only messages); a missing or unreadable image raises ``ImageError``."""
    if isinstance(prompt, str):
        return []
    return [
        load_image(part["image"])
        for message in prompt
        if isinstance(message["content"], list)
        for part in message["content"]
        if isinstance(part, dict) and part.get("type") == "image"
    ]


def has_image_parts(prompt: str | list[dict]) -> bool:
    """Whether a chat prompt holds any image part (without opening the images)."""
    return not isinstance(prompt, str) and any(
        isinstance(part, dict) and part.get("type") == "image"
        for message in prompt
        if isinstance(message["content"], list)
        for part in message["content"]
    )


def _text_content(content: str | list[dict]) -> str:
    """A message's content as one string: text parts joined, image parts left out."""
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "text")


def text_messages(prompt: list[dict]) -> list[dict]:
    """The messages with every content as one string (for text-only templates and TRL rows)."""
    return [{**message, "content": _text_content(message["content"])} for message in prompt]


def png_data_url(image: ImageInput) -> str:
    """``data:image/png;base64,...`` for an image or an image file."""
    buffer = io.BytesIO()
    load_image(image).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def openai_messages(prompt: list[dict]) -> list[dict]:
    """The messages with every image part turned into an OpenAI ``image_url`` part (the image
    inlined as a PNG data URL); text parts and string contents are passed through."""
    return [
        {**message, "content": [_openai_part(part) for part in message["content"]]}
        if isinstance(message["content"], list)
        else message
        for message in prompt
    ]


def _openai_part(part: dict) -> dict:
    if isinstance(part, dict) and part.get("type") == "image":
        return {"type": "image_url", "image_url": {"url": png_data_url(part["image"])}}
    return part
