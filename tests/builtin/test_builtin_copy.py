"""The builtin provider's copy, fill and data-movement kernels against eager ATen (interpreter).

Cases cover dtype casts (half precision both ways, integers, bools), transposed and permuted
inputs (the 2-D tile path), six merged dims, memory formats, broadcasting copy_, fills with
numbers and 0-d tensors, and cat/stack/embedding/index_select/gather with valid indices.
"""

from __future__ import annotations

import sys

import pytest
import torch
from builtin_support import materialize_case, run_generated

from agent.providers.builtin import codegen, gather
from agent.providers.builtin import copy as copy_family
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case

COPY_CASES: dict[str, list[str]] = {
    "_to_copy.default": [
        "((T([7, 33], f32),), {'dtype': torch.float16})",
        "((T([7, 33], bf16),), {'dtype': torch.float32})",
        "((T([7, 33], f16),), {'dtype': torch.bfloat16})",
        "((T([4, 1, 6], u8),), {'dtype': torch.bool})",
        "((T([5, 6], f32, [1, 5]),), {'dtype': torch.float16})",
        "((T([2, 3, 4, 5], f16, [60, 1, 15, 3]),), {'dtype': torch.float32})",
        "((T([], f16),), {'dtype': torch.float16, 'layout': torch.strided, 'device': 'cpu'})",
        "((T([3, 5], f32),), {'dtype': torch.int32})",
        "((T([3, 5], b8),), {'dtype': torch.float16})",
        "((T([2, 3, 4, 5, 6, 7], f32, [5040, 1, 1260, 252, 42, 6]),), {'dtype': torch.float16})",
        "((T([1, 16, 12, 8], f16, [1536, 8, 128, 1]),), {'dtype': torch.float32})",
    ],
    "clone.default": [
        "((T([7, 33], f32),), {})",
        "((T([5, 6], f16, [1, 5]),), {})",
        "((T([5, 6], f16, [1, 5]),), {'memory_format': torch.contiguous_format})",
        "((T([2, 3, 4, 5], bf16),), {'memory_format': torch.channels_last})",
        "((T([40], i64),), {})",
    ],
    "copy_.default": [
        "((T([7, 33], f32), T([7, 33], f32)), {})",
        "((T([7, 33], f16), T([33], f32)), {})",
        "((T([5, 6], f32, [1, 5]), T([5, 6], bf16)), {})",
        "((T([4, 128], i64), T([4, 128], i64)), {})",
    ],
    "copy.default": ["((T([5, 6], f32), T([6], f16)), {})"],
    "lift_fresh_copy.default": ["((T([128], i64),), {})"],
    "fill_.Scalar": [
        "((T([7, 33], f32), 2.5), {})",
        "((T([5, 6], f16, [1, 5]), -1), {})",
        "((T([9], i64), 3), {})",
        "((T([9], b8), True), {})",
        "((T([9], i32), 2.7), {})",
    ],
    "fill_.Tensor": [
        "((T([7, 33], f32), T([], f32)), {})",
        "((T([5, 6], f16, [1, 5]), T([], f32)), {})",
    ],
    "zero_.default": ["((T([7, 33], bf16),), {})"],
    "zeros_like.default": [
        "((T([7, 33], bf16),), {})",
        "((T([5, 6], f16, [1, 5]),), {'dtype': torch.float32})",
    ],
    "ones_like.default": ["((T([7, 33], i32),), {})"],
    "full_like.default": ["((T([7, 3], f32), 7.5), {})"],
    "new_zeros.default": ["((T([7, 3], f32), [4, 5]), {})"],
    "new_ones.default": ["((T([7, 3], f16), [4, 5]), {'dtype': torch.int64})"],
    "new_full.default": ["((T([7, 3], f16), [4, 5], -3.0), {})"],
}

MOVE_CASES: dict[str, list[str]] = {
    "cat.default": [
        "(([T([4, 3, 1], f16), T([4, 3, 1], f16)], 2), {})",
        "(([T([4, 3], f32), T([2, 3], f32, [1, 2]), T([0], f32)],), {})",
        "(([T([2, 3, 4, 5], f16), T([2, 3, 4, 5], f32)], 1), {})",
        "(([T([3, 7], i64), T([3, 2], i64)], -1), {})",
        # torchbench-like: transposed halves, a 0-width and a legacy [0] input, odd sizes
        "(([T([1, 3, 5, 6], f16, [90, 6, 18, 1]), T([1, 3, 5, 6], f16, [270, 12, 54, 1])], -1), {})",
        "(([T([1, 3, 7, 5], f16, [105, 35, 5, 1]), T([1, 3, 7, 0], f16)], -1), {})",
        "(([T([0], bf16), T([2, 3, 9, 5], bf16, [270, 5, 15, 1])], -2), {})",
        "(([T([2, 3, 5], f32), T([2, 1, 5], f32)], 1), {})",
        # more inputs than one launch takes, mixed dtypes and bools
        "(([T([3, 2], f32), T([3, 1], f16), T([3, 3], bf16), T([3, 2], i32), T([3, 1], b8), T([3, 4], f32)], 1), {})",
        "(([T([5, 3], b8), T([2, 3], b8)],), {})",
        # channels-last inputs stay channels-last; six dims left unmerged (the fallback copy)
        "(([T([2, 3, 4, 5], f32, [60, 1, 15, 3]), T([2, 3, 4, 5], f32, [60, 1, 15, 3])], 1), {})",
        "(([T([2, 3, 2, 3, 2, 3], f32, [1, 2, 6, 12, 36, 72]), T([2, 3, 2, 3, 2, 3], f32)], 5), {})",
    ],
    "stack.default": [
        "(([T([4, 3], f16), T([4, 3], f16), T([4, 3], f16, [1, 4])], 1), {})",
        "(([T([5], f32), T([5], f32)],), {})",
        "(([T([4, 3, 6, 5], f16, [90, 5, 15, 1]), T([4, 3, 6, 5], f16, [360, 20, 60, 2])], -1), {})",
        "(([T([0, 3], f32), T([0, 3], f32)], 1), {})",
    ],
    "embedding.default": [
        "((T([30, 7], f16), T([4, 5], i64)), {})",
        "((T([30, 7], f32, [1, 30]), T([1, 9], i64)), {})",
        "((T([10, 300], bf16), T([], i64), 0), {})",
    ],
    "index_select.default": [
        "((T([5, 6, 7], f32), 1, T([9], i64)), {})",
        "((T([6, 5], f32, [1, 6]), 0, T([3], i32)), {})",
        "((T([5, 6], f16), -1, T([], i64)), {})",
    ],
    "gather.default": [
        "((T([5, 6, 7], f32), 1, T([5, 3, 7], i64)), {})",
        "((T([6, 5], f32, [1, 6]), 0, T([2, 4], i64)), {})",
        "((T([8, 9], f16), -1, T([8, 1], i64)), {})",
    ],
}

# stack on a new last dim (the interleaving kernel): the suite's pattern scaled down (a permuted
# view and a stride-2 slice), 2/3/4 inputs, mixed dtypes, bools, odd sizes, 0-d and empty inputs,
# dim=-1 and dim=ndim, transposed inputs and six unmergeable dims
# (more than the kernel takes: the piece kernel's path)
STACK_LAST_CASES = [
    "(([T([4, 3, 16, 8], f16, [384, 8, 24, 1]), T([4, 3, 16, 8], f16, [2448, 16, 144, 2])], -1), {})",
    "(([T([3, 5, 7], f16), T([3, 5, 7], f16, [1, 3, 15]), T([3, 5, 7], f16)], 3), {})",
    "(([T([2, 9, 5], bf16), T([2, 9, 5], bf16), T([2, 9, 5], bf16), T([2, 9, 5], bf16)], -1), {})",
    "(([T([7, 33], f32), T([7, 33], f32, [1, 7])], -1), {})",
    "(([T([5, 7], f32), T([5, 7], f16), T([5, 7], bf16)], 2), {})",
    "(([T([6, 5], f16), T([6, 5], bf16)], -1), {})",
    "(([T([5, 7], b8), T([5, 7], b8), T([5, 7], i64), T([5, 7], f32, [1, 5])], -1), {})",
    "(([T([3, 11], i64), T([3, 11], i64, [1, 3])], -1), {})",
    "(([T([9, 3], b8), T([9, 3], b8)], -1), {})",
    "(([T([13], i64), T([13], b8), T([13], f16)], 1), {})",
    "(([T([], f32), T([], f32)], 0), {})",
    "(([T([], f16), T([], i64), T([], b8), T([], f16)], -1), {})",
    "(([T([0, 3], f32), T([0, 3], f32)], 2), {})",
    "(([T([3, 1, 5], f16), T([3, 1, 5], f16, [5, 99, 1])], -1), {})",
    "(([T([2, 3, 2, 3, 2, 3], f32, [1, 2, 6, 12, 36, 72]), T([2, 3, 2, 3, 2, 3], f32)], 6), {})",
]

# Which argument is the index, and the size of the dim it indexes into.
_INDEX_OF = {"embedding": 1, "index_select": 2, "gather": 2}


def _valid_indices(op: str, case, gen: torch.Generator):
    """Seeded inputs whose index tensor stays within the indexed dim."""
    args, kwargs = materialize_case(op, case, gen)
    name = op.split(".")[0]
    if name not in _INDEX_OF:
        return args, kwargs
    args = list(args)
    source = args[0]
    high = source.shape[0] if name == "embedding" else source.shape[args[1]]
    args[_INDEX_OF[name]] = args[_INDEX_OF[name]].remainder(high)
    return tuple(args), kwargs


def _write(module, op: str, cases: list, variant: int = 0) -> str:
    request = KernelRequest(op, str(codegen.schema_of(op)), cases, variant)
    text = module.WRITERS[op](request)
    assert text is not None, f"the writer declined {op}"
    return text


@pytest.mark.parametrize("op", sorted(COPY_CASES))
def test_copy_and_fill_match_eager_on_casts_strides_and_formats(op: str) -> None:
    cases = [parse_case(c) for c in COPY_CASES[op]]
    assert run_generated(op, _write(copy_family, op, cases), cases) == []


def test_copy_conservative_variant_matches_eager() -> None:
    op = "_to_copy.default"
    cases = [parse_case(c) for c in COPY_CASES[op]]
    assert run_generated(op, _write(copy_family, op, cases, variant=1), cases) == []


def test_clone_keeps_the_strides_of_a_dense_input() -> None:
    op = "clone.default"
    cases = [parse_case("((T([5, 6], f16, [1, 5]),), {})")]
    import tempfile
    from pathlib import Path

    from builtin_support import load_kernel

    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(copy_family, op, cases), Path(tmp))
        x = torch.randn(6, 5, dtype=torch.float16).t()
        assert kernel(x).stride() == torch.ops.aten.clone.default(x).stride()


@pytest.mark.parametrize("op", sorted(MOVE_CASES))
def test_data_movement_matches_eager_with_valid_indices(op: str) -> None:
    cases = [parse_case(c) for c in MOVE_CASES[op]]
    problems = run_generated(op, _write(gather, op, cases), cases, make_args=_valid_indices)
    assert problems == []


@pytest.mark.parametrize("switch", [4, 0])
def test_stack_on_a_new_last_dim_matches_eager_with_the_interleaving_switch_on_and_off(
    switch: int,
) -> None:
    op = "stack.default"
    cases = [parse_case(c) for c in STACK_LAST_CASES]
    text = _write(gather, op, cases)
    assert "_STACK_INTERLEAVE_MAX = 4\n" in text
    text = text.replace("_STACK_INTERLEAVE_MAX = 4\n", f"_STACK_INTERLEAVE_MAX = {switch}\n")
    assert run_generated(op, text, cases) == []


@pytest.mark.parametrize("block", [2, 64, 4096])
def test_stack_interleaving_matches_eager_at_every_block_size(block: int) -> None:
    """Tiles narrower than a row, a row exactly, and many rows (masked row and column tails)."""
    op = "stack.default"
    cases = [parse_case(c) for c in STACK_LAST_CASES[:8]]
    text = _write(gather, op, cases)
    text = text.replace("_STACK_BLOCK = 1024 ", f"_STACK_BLOCK = {block} ")
    assert f"_STACK_BLOCK = {block} " in text
    assert run_generated(op, text, cases) == []


@pytest.mark.parametrize("switch", [4, 0])
def test_stack_on_a_new_last_dim_is_one_interleaving_launch(switch: int) -> None:
    """2..4 inputs stacked on a new last dim (strided, or broadcast with stride 0) take
    `_stack_last` once and the piece kernel not at all; with the switch at 0 the piece kernel;
    with six dims it cannot merge, the pieces' plan."""
    import tempfile
    from pathlib import Path

    from builtin_support import load_kernel

    op = "stack.default"
    cases = [parse_case(c) for c in STACK_LAST_CASES]
    expected = ["last"] if switch else ["pieces"]
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(gather, op, cases), Path(tmp))
        module = sys.modules[kernel.__module__]
        module._STACK_INTERLEAVE_MAX = switch
        calls = []
        last, pieces = module._stack_last, module._launch_pieces

        class Spy:
            def __getitem__(self, grid):
                calls.append("last")
                return last[grid]

        module._stack_last = Spy()
        module._launch_pieces = lambda *a: (calls.append("pieces"), pieces(*a))[1]
        xs = [torch.randn(4, 6, 16)[:, :, ::2] for _ in range(3)]
        assert torch.equal(kernel(xs, -1), torch.stack(xs, -1))
        assert calls == expected
        del calls[:]
        # a broadcast input (stride 0) is read through its strides too
        zs = [torch.randn(1, 11).expand(3, 11), torch.randn(3, 11)]
        assert torch.equal(kernel(zs, -1), torch.stack(zs, -1))
        assert calls == expected
        del calls[:]
        ys = [torch.randn(2, 3, 2, 3, 2, 3).permute(5, 4, 3, 2, 1, 0) for _ in range(2)]
        assert torch.equal(kernel(ys, -1), torch.stack(ys, -1))
        assert "last" not in calls  # the pieces' plan (its fallback copy here)


def test_cat_copies_every_input_in_one_launch() -> None:
    """Two inputs of a cat share one launch of the piece kernel (host time is per launch)."""
    op = "cat.default"
    cases = [parse_case(MOVE_CASES[op][0])]
    import tempfile
    from pathlib import Path

    from builtin_support import load_kernel

    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(gather, op, cases), Path(tmp))
        module = sys.modules[kernel.__module__]
        calls = []
        original = module._launch_pieces
        module._launch_pieces = lambda *a: (calls.append(len(a[2])), original(*a))[1]
        try:
            x, y = torch.randn(4, 3, 5), torch.randn(4, 2, 5)
            assert torch.equal(kernel([x, y], 1), torch.cat([x, y], 1))
        finally:
            module._launch_pieces = original
        assert calls == [2]


def test_writers_decline_complex_tensors() -> None:
    cases = [parse_case("((T([4, 4], c64),), {})")]
    for module, op in ((copy_family, "clone.default"), (gather, "cat.default")):
        request = KernelRequest(op, str(codegen.schema_of(op)), cases)
        assert module.WRITERS[op](request) is None


def test_every_claimed_overload_exists_in_torch() -> None:
    for op in [*copy_family.WRITERS, *gather.WRITERS]:
        codegen.schema_of(op)


def test_cat_and_stack_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90."""
    from builtin_support import assert_compiles_for_sm90

    batch = []
    for op in ("cat.default", "stack.default"):
        # cases with an empty output launch nothing
        cases = [parse_case(c) for c in MOVE_CASES[op] if "T([0, 3]" not in c]
        if op == "stack.default":
            # the suite's case (the interleaving kernel at its size) and the kernel's other paths
            cases += [parse_case(c) for c in STACK_LAST_CASES if "T([0, 3]" not in c]
            cases.append(
                parse_case(
                    "(([T([32, 3, 256, 32], f16, [24576, 32, 96, 1]), "
                    "T([32, 3, 256, 32], f16, [148032, 64, 576, 2])], -1), {})"
                )
            )
        batch.append((op, _write(gather, op, cases), cases))
    assert_compiles_for_sm90(batch)
