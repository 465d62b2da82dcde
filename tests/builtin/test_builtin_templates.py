"""Kernels written once for a canonical case and specialised by the writer: `kernelsource.expand`
(repeated, conditional and replaced regions), the elementwise template it expands per spec
(kernels/elementwise_template.py), and that template run as the real kernel it is.

tests/fixtures/elementwise_kernels_before.json.xz holds the four kernels of a few specs as the
line-by-line generator wrote them before the template existed (three operands with a scalar, raw
operands first and in the middle, constexprs, several scalars, one operand alone).
"""

from __future__ import annotations

import ast
import json
import lzma
import re
from pathlib import Path

import pytest
import torch
import triton.language as tl

from agent.providers.builtin import elementwise_kernels, kernelsource
from agent.providers.builtin.elementwise_kernels import Elementwise, Operand
from agent.providers.builtin.kernelsource import Copy

_BEFORE = Path(__file__).resolve().parents[1] / "fixtures" / "elementwise_kernels_before.json.xz"

_TEXT = """\
def f(
    # begin per item
    x_ptr,
    # end per item
):
    # begin per item
    # begin not raw
    x = x_ptr.to(CDT)  # x: slot X_SLOT
    # end not raw
    # begin raw
    x = x_ptr  # raw
    # end raw
    # end per item
    # begin body
    out = x
    # end body
    return xs + maxx"""


def test_expand_repeats_renames_chooses_and_replaces() -> None:
    items = [
        Copy({"x": "a", "x_ptr": "a_ptr", "X_SLOT": "12"}, {"raw": False}),
        Copy({"x": "m", "x_ptr": "m_ptr", "X_SLOT": "18"}, {"raw": True}),
    ]
    text = kernelsource.expand(
        _TEXT,
        names={"f": "g"},
        repeat={"item": items},
        replace={"body": "out = a\nif m:\n\n    out = -out"},
    )
    assert text == (
        "def g(\n"
        "    a_ptr,\n"
        "    m_ptr,\n"
        "):\n"
        "    a = a_ptr.to(CDT)  # a: slot 12\n"
        "    m = m_ptr  # raw\n"
        "    out = a\n"
        "    if m:\n"
        "\n"
        "        out = -out\n"
        "    return xs + maxx"  # whole words only
    )


def test_expand_drops_a_repeated_region_without_copies() -> None:
    text = kernelsource.expand(_TEXT, repeat={"item": []}, replace={"body": "out = 0"})
    assert text.splitlines()[:3] == ["def f(", "):", "    out = 0"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("a\n# begin per item\nb\n", "has no '# end per item'"),
        ("# begin per item\nb\n# end per items\n", "has no '# end per item'"),
        ("# begin spam\nb\n# end spam\n", "no copies, flag or text for region 'spam'"),
        ("# begin per other\nb\n# end per other\n", "region 'per other'"),
    ],
)
def test_expand_refuses_a_region_it_cannot_resolve(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        kernelsource.expand(text, repeat={"item": []})


def _kernels(spec: Elementwise) -> dict[str, str]:
    return {
        "_kernel_flat": elementwise_kernels.kernel_source(spec, flat=True),
        "_kernel": elementwise_kernels.kernel_source(spec, flat=False),
        "_kernel_tile": elementwise_kernels.tile_kernel_source(spec),
        "_store_geometry": elementwise_kernels.store_geometry_source(spec),
    }


def test_template_expands_to_the_kernels_of_the_old_generator() -> None:
    from agent.providers.builtin import backward, binary, unary

    specs = {**unary.SPECS, **binary.SPECS, **backward.SPECS}
    with lzma.open(_BEFORE, "rt", encoding="utf-8") as f:
        before = json.load(f)
    assert {len(specs[op].operands) for op in before} == {1, 2, 3}
    for op, kernels in before.items():
        assert _kernels(specs[op]) == kernels, op


def test_every_template_name_is_renamed_per_operand() -> None:
    spec = Elementwise(
        summary="three operands named unlike the template's",
        operands=(Operand("self", "p"), Operand("mask", "q", raw=True), Operand("other", "r")),
        scalars=(("alpha", "s"), ("beta", "t")),
        constexprs=(("K1", "1"), ("K2", "2")),
        body="out = tl.where(q != 0, p * s, r * t + K1 + K2)",
    )
    for name, text in _kernels(spec).items():
        ast.parse(text)
        leftovers = re.findall(r"\b(?:x\w*|X_\w+|alpha\w*|MODE|NO_SPECIALIZE|SLOT|g)\b", text)
        assert leftovers == [], name
        assert "# begin" not in text and "# end" not in text
    tile = _kernels(spec)["_kernel_tile"]
    assert "LAYOUT // 512 % 2 == 1:  # r: unit inner stride" in tile  # 8 << 2 * 3
    assert "r_off = r_row[:, None] + cc[None, :] * tl.load(geo_ptr + 29)" in tile  # 6 * 4 + 5
    assert "q = tl.full([1, 1], q_val, tl.int32)" in tile and "q = q.to(CDT)" not in tile


def test_the_template_is_a_real_kernel() -> None:
    """The canonical `_kernel` and `_kernel_tile` run as written: out = x * alpha over a
    transposed x (merged dims [4, 8]; out linear, x strided)."""
    from agent.providers.builtin.kernels import elementwise_template as t

    x = torch.arange(32.0).reshape(8, 4).t()
    geo = torch.zeros(18, dtype=torch.int32)
    geo[4], geo[5] = 4, 8  # sizes of the two merged dims (outer ones padded)
    geo[10], geo[11] = 8, 1  # out's strides
    geo[16], geo[17] = 1, 4  # x's strides
    flags = dict(X_SCALAR=0, CDT=tl.float32, FLOAT=True, OUT_BOOL=False, IDX64=False, MODE=0)
    out = torch.empty(4, 8)
    t._kernel[(1,)](out, x, 0, 0.0, 0, 2.0, 32, geo, LAYOUT=2 | 8, BLOCK=32, **flags)
    assert torch.equal(out, x * 2)
    tile = torch.empty(4, 8)
    t._kernel_tile[(1,)](
        tile, x, 0, 0.0, 0, 2.0, 4, 8, geo, LAYOUT=2 | 8, ALIGN=1, EVEN_C=True,
        BLOCK_R=4, BLOCK_C=8, **flags,
    )  # fmt: skip
    assert torch.equal(tile, x * 2)


def test_a_piece_kernel_per_input_count() -> None:
    """kernels/pieces.py writes `_pieces_1` ... `_pieces_<_MAX_PIECES>` out, each taking its inputs'
    pointers, 15 integers and two block sizes per input (`_launch_pieces` picks one by count)."""
    defs = kernelsource.definitions("pieces")
    max_pieces = ast.literal_eval(ast.parse(defs["_MAX_PIECES"]).body[0].value)
    assert f"_pieces_{max_pieces + 1}" not in defs
    for n in range(1, max_pieces + 1):
        kernel = ast.parse(defs[f"_pieces_{n}"]).body[0]
        args = [a.arg for a in kernel.args.args]
        assert args[: n + 1] == ["out_ptr", *(f"x{k}" for k in range(n))]
        assert len(args) == 1 + n + 15 * n + 1 + 2 * n
        assert f"_pieces_{n}[grid]" in defs["_launch_pieces"]
