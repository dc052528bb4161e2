"""Images of a problem: what a reference may be, how it is opened, hashed and written to logs.

A problem's image is a PIL image held in memory or a path to an image file. Logs never pickle
pixels: a path is written as the path, an in-memory image as the path of a PNG copy saved under
its content hash (``_save_image``), or as ``sha256:<hex>`` where no folder was given. Every
failure to open an image is an ``ImageError`` that names the image and what to do.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PIL import Image, UnidentifiedImageError

__all__ = [
    "ImageInput", "HASH_PREFIX", "MAX_PIXELS", "ImageError", "is_image_input", "load_image",
    "image_digest", "image_ref",
]

ImageInput = str | os.PathLike | Image.Image
HASH_PREFIX = "sha256:"
# The most pixels an image may have when opened; far above any benchmark figure, far below an
# image that would stall a processor (PIL's own bomb guard is 89M pixels).
MAX_PIXELS = 16_000_000


class ImageError(ValueError):
    """An image that cannot be used: missing, unreadable, too large, or logged by hash only."""


def is_image_input(value: object) -> bool:
    return isinstance(value, (str, os.PathLike, Image.Image))


def load_image(ref: ImageInput, *, max_pixels: int = MAX_PIXELS) -> Image.Image:
    """``ref`` as an RGB PIL image, fully read (so no file handle stays open)."""
    if isinstance(ref, Image.Image):
        image = ref
    else:
        text = os.fspath(ref)
        if text.startswith(HASH_PREFIX):
            raise ImageError(
                f"image {text[:20]}... was logged by content hash only, so its pixels are not on disk: "
                "log episodes with an image folder (EpisodeLog(..., image_dir=...)) to keep them"
            )
        path = Path(text).expanduser()
        if not path.is_file():
            raise ImageError(f"image file {text!r} does not exist")
        try:
            with Image.open(path) as opened:
                _check_size(opened, text, max_pixels)
                image = opened.copy()
        except (UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
            raise ImageError(f"image file {text!r} is not a readable image ({exc})") from exc
    _check_size(image, _name(ref), max_pixels)
    return image if image.mode == "RGB" else image.convert("RGB")


def _check_size(image: Image.Image, name: str, max_pixels: int) -> None:
    width, height = image.size
    if width < 1 or height < 1:
        raise ImageError(f"image {name} is empty ({width}x{height})")
    if width * height > max_pixels:
        raise ImageError(
            f"image {name} has {width}x{height} = {width * height:,} pixels, over the limit of "
            f"{max_pixels:,}: resize it, or raise max_pixels"
        )


def _name(ref: ImageInput) -> str:
    return "(in memory)" if isinstance(ref, Image.Image) else repr(os.fspath(ref))


def image_digest(ref: ImageInput) -> str:
    """Content hash of the decoded RGB pixels: equal images hash equal whatever their file format."""
    image = load_image(ref)
    h = hashlib.sha256(f"{image.width}x{image.height}:".encode())
    h.update(image.tobytes())
    return h.hexdigest()


def _save_image(image: Image.Image, folder: str | os.PathLike) -> str:
    """Write ``image`` as ``folder/<digest>.png`` (once: equal images share a file); its path."""
    digest = image_digest(image)
    path = Path(folder) / f"{digest[:32]}.png"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".png.tmp")
        load_image(image).save(tmp, format="PNG")
        os.replace(tmp, path)
    return str(path)


def image_ref(ref: ImageInput, folder: str | os.PathLike | None = None) -> str:
    """The JSON form of one image: a path as given, an in-memory image saved under ``folder`` (or
    its content hash when ``folder`` is None)."""
    if not isinstance(ref, Image.Image):
        return os.fspath(ref)
    if folder is None:
        return HASH_PREFIX + image_digest(ref)
    return _save_image(ref, folder)
