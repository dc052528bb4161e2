"""Synthetic visual items: small images drawn with PIL from a seeded generator, answers known by
construction (``synthetic_problems("visual", ...)`` turns them into Problems).

Each question names what to look at ("How many red circles are in the image?"), so a text-only
model still gets a well-formed question, but only the image holds the answer. Templates:

- ``count_shapes``: circles, squares and triangles in four colours, one per cell of a 4x4 grid on
  a 128x128 canvas; count the shapes of one colour and kind (numeric). Difficulty draws more
  shapes (3-13) and smaller ones (24-16 px);
- ``larger_number``: two numbers written side by side with PIL's default font on 128x64; the
  larger one (numeric). Difficulty adds digits (2-4), brings the numbers closer and shrinks the
  font;
- ``tallest_bar``: a chart of four bars, one per colour, on 128x128; which colour is tallest
  (multiple choice over the colour names). Difficulty brings the two tallest bars closer (a 35%
  margin down to 5%).

All templates add Gaussian pixel noise with sd ``NOISE_SD * difficulty``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFont

__all__ = ["GRID", "CELL", "COLOURS", "SHAPES", "TEMPLATES", "visual_item"]

SIZE = 128
GRID = 4  # count_shapes: GRID x GRID cells, at most one shape per cell
CELL = SIZE // GRID
COLOURS = {"red": (220, 40, 40), "green": (30, 160, 60), "blue": (40, 80, 220), "yellow": (230, 190, 30)}
SHAPES = ("circle", "square", "triangle")
NOISE_SD = 20.0
BAR_WIDTH, BAR_BASE = 20, SIZE - 10
TEMPLATES = ("count_shapes", "larger_number", "tallest_bar")


@dataclass(frozen=True)
class _VisualItem:
    """One drawn item. ``answer`` and ``wrong`` (most plausible first) are numbers for a
    ``numeric`` item, option texts for a ``multiple_choice`` one."""

    template: str
    kind: str
    forms: list[str]
    answer: int | str
    wrong: list
    image: Image.Image


def visual_item(rng: np.random.Generator, d: float) -> _VisualItem:
    """One item of a template drawn by ``rng``, at difficulty ``d`` in [0, 1]."""
    template = TEMPLATES[int(rng.integers(len(TEMPLATES)))]
    return {"count_shapes": _count_shapes, "larger_number": _larger_number, "tallest_bar": _tallest_bar}[
        template
    ](rng, d)


def _noisy(image: Image.Image, rng: np.random.Generator, d: float) -> Image.Image:
    noise = rng.normal(0.0, NOISE_SD * d, size=(image.height, image.width, 3))
    pixels = np.asarray(image, dtype=np.float64) + noise
    return Image.fromarray(np.clip(np.rint(pixels), 0, 255).astype(np.uint8), "RGB")


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, box: tuple[int, int, int, int], fill) -> None:
    x0, y0, x1, y1 = box
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    else:
        draw.polygon([((x0 + x1) // 2, y0), (x1, y1), (x0, y1)], fill=fill)


def _count_shapes(rng: np.random.Generator, d: float) -> _VisualItem:
    n = 3 + int(round(d * 10))
    names = list(COLOURS)
    colour, shape = names[int(rng.integers(len(names)))], SHAPES[int(rng.integers(len(SHAPES)))]
    count = int(rng.integers(1, min(n, 2 + int(round(d * 5))) + 1))
    drawn = [(colour, shape)] * count
    while len(drawn) < n:  # the other shapes: any colour and kind but the asked-for pair
        other = (names[int(rng.integers(len(names)))], SHAPES[int(rng.integers(len(SHAPES)))])
        if other != (colour, shape):
            drawn.append(other)
    side = int(round(24 - 8 * d))
    image = Image.new("RGB", (SIZE, SIZE), "white")
    draw = ImageDraw.Draw(image)
    for cell, (c, s) in zip(rng.permutation(GRID * GRID)[:n], drawn, strict=True):
        row, col = divmod(int(cell), GRID)
        x0 = col * CELL + int(rng.integers(1, CELL - side))
        y0 = row * CELL + int(rng.integers(1, CELL - side))
        _draw_shape(draw, s, (x0, y0, x0 + side - 1, y0 + side - 1), COLOURS[c])
    forms = [
        f"How many {colour} {shape}s are in the image?",
        f"Count the {colour} {shape}s in the picture. How many are there?",
        f"The image shows coloured circles, squares and triangles. What is the number of {shape}s "
        f"that are {colour}?",
    ]
    same_colour = sum(c == colour for c, _ in drawn)
    same_shape = sum(s == shape for _, s in drawn)
    wrong = [same_colour, same_shape, count + 1, count - 1, n]
    return _VisualItem("count_shapes", "numeric", forms, count, wrong, _noisy(image, rng, d))


def _larger_number(rng: np.random.Generator, d: float) -> _VisualItem:
    digits = 2 + int(round(d * 2))
    low, high = 10 ** (digits - 1), 10**digits - 1
    gap = int(rng.integers(1, max(1, int((high - low) * (1 - d) / 2)) + 1))
    small = int(rng.integers(low, high - gap + 1))
    large = small + gap
    pair = (small, large) if rng.random() < 0.5 else (large, small)
    font = ImageFont.load_default(size=int(round(26 - 10 * d)))
    image = Image.new("RGB", (SIZE, SIZE // 2), "white")
    draw = ImageDraw.Draw(image)
    for k, value in enumerate(pair):  # each number centred in its half
        x0, y0, x1, y1 = draw.textbbox((0, 0), str(value), font=font)
        x = k * SIZE // 2 + (SIZE // 2 - (x1 - x0)) // 2 - x0
        draw.text((x, (SIZE // 2 - (y1 - y0)) // 2 - y0), str(value), fill="black", font=font)
    forms = [
        "Two numbers are written in the image. What is the larger of the two?",
        "The picture shows two numbers side by side. Which of them is greater? Give that number.",
        "Read both numbers in the image and report the bigger one.",
    ]
    wrong = [small, large + 1, large - 1, large + 10]
    return _VisualItem("larger_number", "numeric", forms, large, wrong, _noisy(image, rng, d))


def _tallest_bar(rng: np.random.Generator, d: float) -> _VisualItem:
    names = list(COLOURS)
    by_rank = [names[int(k)] for k in rng.permutation(len(names))]  # tallest first
    top = float(rng.uniform(70, 100))
    second = min(top * (1 - (0.35 - 0.30 * d)), top - 2)
    others = sorted(rng.uniform(15, second - 4, size=len(names) - 2), reverse=True)
    heights = [int(round(h)) for h in (top, second, *others)]
    image = Image.new("RGB", (SIZE, SIZE), "white")
    draw = ImageDraw.Draw(image)
    draw.line([(4, BAR_BASE), (SIZE - 4, BAR_BASE)], fill="black")
    slot = (SIZE - 8) // len(names)
    for rank, position in enumerate(rng.permutation(len(names))):
        x0 = 4 + int(position) * slot + (slot - BAR_WIDTH) // 2
        box = (x0, BAR_BASE - heights[rank], x0 + BAR_WIDTH - 1, BAR_BASE - 1)
        draw.rectangle(box, fill=COLOURS[by_rank[rank]])
    forms = [
        "The image shows a bar chart with one bar per colour. Which bar is the tallest?",
        "Look at the bar chart in the image. Which colour is the highest bar?",
        "In the chart shown, which coloured bar reaches the greatest height?",
    ]
    noisy = _noisy(image, rng, d)
    return _VisualItem("tallest_bar", "multiple_choice", forms, by_rank[0], by_rank[1:], noisy)
