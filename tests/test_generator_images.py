"""Image parts of chat prompts: the shared helpers, and OpenAIGenerator sending images inline as
``image_url`` data URLs to a local HTTP server that records what it received."""

from __future__ import annotations

import base64
import io
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from PIL import Image

from councilzoo.agents.base import Sampling
from councilzoo.agents.generators import OpenAIGenerator
from councilzoo.agents.generators.images import message_images, openai_messages, png_data_url
from councilzoo.tasks.images import ImageError

REPLY = {
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "4"}}],
    "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
}


@pytest.fixture
def image():
    return Image.fromarray(np.random.default_rng(0).integers(0, 256, (12, 20, 3), dtype=np.uint8))


@pytest.fixture
def recorder():
    """A chat-completions endpoint that answers every request with REPLY and keeps the bodies."""
    bodies = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            data = json.dumps(REPLY).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", bodies
    httpd.shutdown()
    httpd.server_close()


def _decode(url: str) -> Image.Image:
    header, data = url.split(",", 1)
    assert header == "data:image/png;base64"
    return Image.open(io.BytesIO(base64.b64decode(data)))


def test_message_images_in_prompt_order_from_pil_and_paths(image, tmp_path):
    path = tmp_path / "gray.png"
    image.convert("L").save(path)
    prompt = [
        {"role": "system", "content": "You are a reviewer."},
        {"role": "user", "content": [{"type": "image", "image": str(path)}, {"type": "text", "text": "and"}]},
        {"role": "user", "content": [{"type": "image", "image": image}]},
    ]
    first, second = message_images(prompt)
    assert first.mode == "RGB" and first.size == (20, 12)  # opened and converted
    assert second.tobytes() == image.tobytes()
    assert message_images("<|im_start|>user\nrendered") == [] == message_images(prompt[:1])


def test_openai_messages_inline_images_and_keep_everything_else(image, tmp_path):
    path = tmp_path / "a.png"
    image.save(path)
    prompt = [
        {"role": "system", "content": "You are a reviewer."},
        {"role": "user", "content": [{"type": "text", "text": "Count:"}, {"type": "image", "image": path}]},
    ]
    converted = openai_messages(prompt)
    assert converted[0] == prompt[0]
    text, picture = converted[1]["content"]
    assert text == {"type": "text", "text": "Count:"} and picture["type"] == "image_url"
    assert _decode(picture["image_url"]["url"]).tobytes() == image.tobytes()
    assert prompt[1]["content"][1] == {"type": "image", "image": path}  # the input is not mutated
    assert png_data_url(path) == png_data_url(image)


def test_openai_generator_sends_image_url_parts(recorder, image):
    url, bodies = recorder
    prompts = [
        [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "2+2?"}]}],
        [{"role": "user", "content": "plain text"}],
    ]
    out = OpenAIGenerator(url, "tiny", max_retries=0).generate(prompts, sampling=Sampling(max_new_tokens=3))
    assert [group[0].text for group in out] == ["4", "4"]
    by_kind = {isinstance(b["messages"][0]["content"], list): b["messages"][0]["content"] for b in bodies}
    picture, text = by_kind[True]
    assert picture["type"] == "image_url" and text == {"type": "text", "text": "2+2?"}
    assert _decode(picture["image_url"]["url"]).tobytes() == image.tobytes()
    assert by_kind[False] == "plain text"


def test_openai_generator_bad_image_fails_before_any_request(recorder, tmp_path):
    url, bodies = recorder
    prompts = [
        [{"role": "user", "content": "fine"}],
        [{"role": "user", "content": [{"type": "image", "image": str(tmp_path / "missing.png")}]}],
    ]
    with pytest.raises(ImageError, match="does not exist"):
        OpenAIGenerator(url, "tiny").generate(prompts)
    assert bodies == []
