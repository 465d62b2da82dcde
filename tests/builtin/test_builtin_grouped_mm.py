"""The builtin grouped-matmul family (`_grouped_mm`) against eager, in Triton's interpreter.

Covers the four layouts (2d x 3d, 3d x 2d, 2d x 2d, 3d x 3d), each float dtype, transposed
operands read in place, group boundaries that cut through tiles, empty groups, the evaluator's
input rule for `offs`, and a full evaluator verdict.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from builtin_support import assert_compiles_for_sm90, materialize_case, run_generated

from agent.providers.builtin.registry import FAMILY_OF, WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import parse_case
from evaluator.naming import kernel_file_name, op_to_folder

OP = "_grouped_mm.default"

# (case, group ends along the split dimension; None for 3d x 3d)
CASES: list[tuple[str, list[int] | None]] = [
    # 2d x 3d: row groups, boundaries inside 32-row tiles, one empty group
    ("((T([70, 48], bf16), T([4, 48, 40], bf16), T([4], i32)), {})", [10, 10, 45, 70]),
    ("((T([64, 40], f16), T([3, 40, 24], f16), T([3], i32)), {})", [16, 48, 64]),
    ("((T([33, 20], f32), T([2, 20, 12], f32), T([2], i32)), {})", [5, 33]),
    # 2d x 3d with mat2 transposed in place (as the traced MoE down projections)
    ("((T([48, 32], bf16), T([3, 32, 40], bf16, [1280, 1, 32]), T([3], i32)), {})", [8, 30, 48]),
    # 3d x 2d: column groups
    ("((T([3, 20, 24], bf16), T([24, 56], bf16), T([3], i32)), {})", [7, 7, 56]),
    # 2d x 2d: K groups (an empty slice gives zeros), self transposed in place
    ("((T([40, 64], bf16, [1, 40]), T([64, 24], bf16), T([4], i32)), {})", [16, 16, 40, 64]),
    ("((T([24, 48], f32), T([48, 20], f32), T([3], i32)), {})", [10, 30, 48]),
    # 3d x 3d: batched, no offs
    ("((T([3, 20, 24], f16), T([3, 24, 40], f16)), {})", None),
]


def _write(cases, variant: int = 0) -> str:
    source = WRITERS[OP](KernelRequest(op=OP, schema="", cases=cases, variant=variant))
    assert source is not None
    return source


def _args_with_offs(ends_by_case: dict[str, list[int] | None]):
    def make(op, case, gen):
        args, kwargs = materialize_case(op, case, gen)
        args = [a / 4 if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        ends = ends_by_case[case.serialize()]
        if ends is not None:
            args[2] = torch.tensor(ends, dtype=torch.int32)
        return tuple(args), kwargs

    return make


@pytest.mark.parametrize("variant", [0, 1])
def test_grouped_mm_matches_eager_in_every_layout(variant: int) -> None:
    cases = [parse_case(text) for text, _ in CASES]
    ends = {parse_case(text).serialize(): e for text, e in CASES}
    problems = run_generated(OP, _write(cases, variant), cases, make_args=_args_with_offs(ends))
    assert problems == []


def test_offs_rule_gives_increasing_ends_at_the_full_size() -> None:
    for text, total in [
        ("((T([2048, 64], bf16), T([8, 64, 32], bf16), T([8], i32)), {})", 2048),
        ("((T([32, 1024], bf16, [1, 32]), T([1024, 16], bf16), T([8], i32)), {})", 1024),
        ("((T([4, 8, 16], bf16), T([16, 100], bf16), T([4], i32)), {})", 100),
        ("((T([5, 16], f32), T([8, 16, 4], f32), T([8], i32)), {})", 5),
    ]:
        args, _ = materialize(OP, parse_case(text), "cpu", 3)
        ends = args[2].tolist()
        assert ends[-1] == total and ends == sorted(ends) and min(ends) >= 0, ends
        if total % 16 == 0 and total // 16 >= len(ends):
            assert all(e % 16 == 0 for e in ends) and len(set(ends)) == len(ends), ends


def test_writer_declines_integer_matrices() -> None:
    case = parse_case("((T([8, 4], i64), T([2, 4, 4], i64), T([2], i32)), {})")
    assert WRITERS[OP](KernelRequest(op=OP, schema="", cases=[case], variant=0)) is None


def test_same_request_gives_the_same_text() -> None:
    cases = [parse_case(text) for text, _ in CASES[:2]]
    assert _write(cases) == _write(cases)
    assert FAMILY_OF[OP] == "grouped matmul"


def test_evaluator_passes_the_kernel_with_no_flags() -> None:
    """The evaluator's own inputs (its offs rule) and checks, in a sandbox."""
    from evaluator.config import EvalConfig
    from evaluator.evaluate import judge_candidate

    cases = [
        parse_case("((T([96, 64], bf16), T([4, 64, 48], bf16), T([4], i32)), {})"),
        parse_case("((T([48, 64], f16, [1, 48]), T([64, 32], f16), T([4], i32)), {})"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / op_to_folder(OP)
        folder.mkdir()
        path = folder / kernel_file_name(OP)
        path.write_text(_write(cases), encoding="utf-8")
        result = judge_candidate(path, OP, cases, config=EvalConfig(), device="cpu")
    assert result.status == "passed", [(r.args, r.error_msg) for r in result.results]
    assert result.flags == [] and all(not r.flags for r in result.results)


def test_kernels_compile_for_an_sm90_gpu() -> None:
    cases = [parse_case(text) for text, _ in CASES]
    assert_compiles_for_sm90([(OP, _write(cases), cases), (OP, _write(cases, 1), cases)])
