"""Line plots written as PNG with the standard library only (zlib + struct), no matplotlib.

The model check draws its loss curves with matplotlib when it is installed; GPU images often
lack it, and a run without its plot cannot be committed. This draws the same picture plainly:
stacked panels sharing the x axis, each with a frame, five labelled ticks per axis, a legend and
any number of polylines, text in a built-in 5x7 pixel font (lower case, digits, `.-+:()/%_`).

Contract: `plot_png(path, panels, title=..., xlabel=...)` where each panel is
`Panel(ylabel, [Series(label, values, rgb, width_px)])`; values are y at x = 1, 2, ...;
non-finite values break the line. Deterministic output; about 10 ms for a 500-point plot.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

RGB = tuple[int, int, int]

# 5x7 glyphs, one string of 7 rows of 5 pixels each; unknown characters draw as blanks.
_FONT_ROWS = {
    "0": "01110 10001 10011 10101 11001 10001 01110",
    "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111",
    "3": "11110 00001 00001 01110 00001 00001 11110",
    "4": "00010 00110 01010 10010 11111 00010 00010",
    "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110",
    "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110",
    "9": "01110 10001 10001 01111 00001 00010 01100",
    ".": "00000 00000 00000 00000 00000 01100 01100",
    "-": "00000 00000 00000 11111 00000 00000 00000",
    "+": "00000 00100 00100 11111 00100 00100 00000",
    ":": "00000 01100 01100 00000 01100 01100 00000",
    "(": "00010 00100 01000 01000 01000 00100 00010",
    ")": "01000 00100 00010 00010 00010 00100 01000",
    "/": "00001 00010 00010 00100 01000 01000 10000",
    "%": "11001 11010 00010 00100 01000 01011 10011",
    "_": "00000 00000 00000 00000 00000 00000 11111",
    "a": "00000 00000 01110 00001 01111 10001 01111",
    "b": "10000 10000 10110 11001 10001 10001 11110",
    "c": "00000 00000 01110 10000 10000 10001 01110",
    "d": "00001 00001 01101 10011 10001 10001 01111",
    "e": "00000 00000 01110 10001 11111 10000 01110",
    "f": "00110 01001 01000 11100 01000 01000 01000",
    "g": "00000 00000 01111 10001 01111 00001 01110",
    "h": "10000 10000 10110 11001 10001 10001 10001",
    "i": "00100 00000 01100 00100 00100 00100 01110",
    "j": "00010 00000 00110 00010 00010 10010 01100",
    "k": "10000 10000 10010 10100 11000 10100 10010",
    "l": "01100 00100 00100 00100 00100 00100 01110",
    "m": "00000 00000 11010 10101 10101 10001 10001",
    "n": "00000 00000 10110 11001 10001 10001 10001",
    "o": "00000 00000 01110 10001 10001 10001 01110",
    "p": "00000 00000 11110 10001 11110 10000 10000",
    "q": "00000 00000 01101 10011 01111 00001 00001",
    "r": "00000 00000 10110 11001 10000 10000 10000",
    "s": "00000 00000 01110 10000 01110 00001 11110",
    "t": "01000 01000 11100 01000 01000 01001 00110",
    "u": "00000 00000 10001 10001 10001 10011 01101",
    "v": "00000 00000 10001 10001 10001 01010 00100",
    "w": "00000 00000 10001 10001 10101 10101 01010",
    "x": "00000 00000 10001 01010 00100 01010 10001",
    "y": "00000 00000 10001 10001 01111 00001 01110",
    "z": "00000 00000 11111 00010 00100 01000 11111",
}
_FONT = {ch: [row for row in rows.split()] for ch, rows in _FONT_ROWS.items()}
BLACK: RGB = (0, 0, 0)
GREY: RGB = (200, 200, 200)
BLUE: RGB = (31, 119, 180)
ORANGE: RGB = (255, 127, 14)
RED: RGB = (214, 39, 40)


@dataclass
class Series:
    label: str
    values: list[float]
    color: RGB = BLUE
    width: int = 2


@dataclass
class Panel:
    ylabel: str
    series: list[Series] = field(default_factory=list)
    height_weight: float = 1.0


class _Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.w, self.h = width, height
        self.px = bytearray(b"\xff" * (width * height * 3))

    def dot(self, x: int, y: int, color: RGB) -> None:
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i : i + 3] = bytes(color)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: RGB) -> None:
        for y in range(max(0, y0), min(self.h, y1 + 1)):
            for x in range(max(0, x0), min(self.w, x1 + 1)):
                self.dot(x, y, color)

    def line(self, x0: int, y0: int, x1: int, y1: int, color: RGB, width: int = 1) -> None:
        """Bresenham, thickened by stamping a square of `width` pixels."""
        dx, dy = abs(x1 - x0), -abs(y1 - y0)
        sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
        err = dx + dy
        lo, hi = -((width - 1) // 2), width // 2
        while True:
            for ox in range(lo, hi + 1):
                for oy in range(lo, hi + 1):
                    self.dot(x0 + ox, y0 + oy, color)
            if x0 == x1 and y0 == y1:
                return
            e2 = 2 * err
            if e2 >= dy:
                err += dy
                x0 += sx
            if e2 <= dx:
                err += dx
                y0 += sy

    def text(self, x: int, y: int, text: str, color: RGB = BLACK, scale: int = 2) -> int:
        """Draw `text` with its top-left at (x, y); returns the width drawn."""
        for k, ch in enumerate(text.lower()):
            rows = _FONT.get(ch)
            if rows is None:
                continue
            for r, row in enumerate(rows):
                for c, bit in enumerate(row):
                    if bit == "1":
                        self.rect(
                            x + (k * 6 + c) * scale,
                            y + r * scale,
                            x + (k * 6 + c) * scale + scale - 1,
                            y + r * scale + scale - 1,
                            color,
                        )
        return text_width(text, scale)

    def png(self) -> bytes:
        stride = self.w * 3
        raw = b"".join(
            b"\x00" + bytes(self.px[y * stride : (y + 1) * stride]) for y in range(self.h)
        )

        def chunk(kind: bytes, data: bytes) -> bytes:
            body = kind + data
            return (
                struct.pack(">I", len(data))
                + body
                + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
            )

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)  # 8-bit RGB
        return (
            b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9))
            + chunk(b"IEND", b"")
        )


def text_width(text: str, scale: int = 2) -> int:
    return max(0, len(text) * 6 - 1) * scale


def _tick_label(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:.4g}" if 1e-3 <= abs(value) < 1e5 else f"{value:.2e}"


def plot_png(
    path: str | Path,
    panels: list[Panel],
    *,
    title: str = "",
    xlabel: str = "step",
    width: int = 960,
    height: int = 640,
) -> None:
    """Draw `panels` stacked top to bottom, sharing x = 1..N, and write a PNG to `path`."""
    canvas = _Canvas(width, height)
    left, right, top, bottom, gap = 110, 20, 44, 56, 28
    canvas.text((width - text_width(title)) // 2, 12, title)
    n = max((len(s.values) for p in panels for s in p.series), default=1)
    usable = height - top - bottom - gap * (len(panels) - 1)
    total_weight = sum(p.height_weight for p in panels) or 1.0
    y0 = top
    for index, panel in enumerate(panels):
        ph = int(usable * panel.height_weight / total_weight)
        _draw_panel(
            canvas, panel, left, y0, width - right, y0 + ph, n, last=index == len(panels) - 1
        )
        y0 += ph + gap
    canvas.text((left + width - right - text_width(xlabel)) // 2, height - 24, xlabel)
    Path(path).write_bytes(canvas.png())


def _draw_panel(
    canvas: _Canvas, panel: Panel, x0: int, y0: int, x1: int, y1: int, n: int, last: bool
) -> None:
    finite = [
        v for s in panel.series for v in s.values if isinstance(v, int | float) and math.isfinite(v)
    ]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi - lo < 1e-12:
        pad = max(abs(hi) * 0.05, 1e-6)
        lo, hi = lo - pad, hi + pad
    else:
        pad = (hi - lo) * 0.05
        lo, hi = lo - pad, hi + pad

    def sx(i: float) -> int:
        return x0 + round((i - 1) / max(1, n - 1) * (x1 - x0))

    def sy(v: float) -> int:
        return y1 - round((v - lo) / (hi - lo) * (y1 - y0))

    for k in range(5):  # horizontal grid and y ticks
        v = lo + (hi - lo) * k / 4
        v = 0.0 if abs(v) < (hi - lo) * 1e-6 else v  # no "-1.3e-10" for a tick at zero
        y = sy(v)
        canvas.line(x0, y, x1, y, GREY)
        label = _tick_label(v)
        canvas.text(x0 - 8 - text_width(label), y - 7, label)
    for k in range(5):  # x ticks
        i = 1 + round((n - 1) * k / 4)
        x = sx(i)
        canvas.line(x, y1, x, y1 + 5, BLACK)
        if last:
            label = str(i)
            canvas.text(x - text_width(label) // 2, y1 + 9, label)
    canvas.line(x0, y0, x1, y0, BLACK)
    canvas.line(x0, y1, x1, y1, BLACK)
    canvas.line(x0, y0, x0, y1, BLACK)
    canvas.line(x1, y0, x1, y1, BLACK)
    for s in panel.series:
        prev: tuple[int, int] | None = None
        for i, v in enumerate(s.values, start=1):
            if not (isinstance(v, int | float) and math.isfinite(v)):
                prev = None
                continue
            point = (sx(i), sy(v))
            if prev is not None:
                canvas.line(*prev, *point, s.color, s.width)
            elif len(s.values) == 1:
                canvas.line(*point, *point, s.color, s.width + 2)
            prev = point
    # Labels go on white boxes drawn over the curves, so both stay readable.
    white = (255, 255, 255)
    canvas.rect(x0 + 2, y0 + 2, x0 + 10 + text_width(panel.ylabel), y0 + 22, white)
    canvas.text(x0 + 6, y0 + 6, panel.ylabel)
    widest = max((text_width(s.label) for s in panel.series), default=0)
    canvas.rect(x1 - 44 - widest, y0 + 2, x1 - 2, y0 + 6 + 20 * len(panel.series), white)
    legend_y = y0 + 6
    for s in panel.series:  # legend, top right
        w = text_width(s.label)
        canvas.rect(x1 - 40 - w, legend_y + 5, x1 - 16 - w, legend_y + 8, s.color)
        canvas.text(x1 - 8 - w, legend_y, s.label)
        legend_y += 20
