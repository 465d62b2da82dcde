"""Input materialisation (evaluator.cases.inputs): seeded, reproducible, strided, and valid for the op."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evaluator.cases.inputs import RULES, materialize, rule_for
from evaluator.cases.suites import EXCLUDED_OPS
from evaluator.cases.testcase import load_trace, parse_case

DATA = Path(__file__).resolve().parents[2] / "evaluator" / "data"


def _aten(op: str):
    base, _, overload = op.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload)


def _make(op: str, text: str, seed: int = 0, device: str = "cpu"):
    return materialize(op, parse_case(text), device, seed)


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


CASE = "((T([4, 5], f32), T([5], f16), T([3], i32), T([6], b8), T([2, 2], c64), T([3], u8)), {})"


def test_same_seed_gives_identical_values():
    a, _ = _make("add.Tensor", CASE, seed=7)
    b, _ = _make("add.Tensor", CASE, seed=7)
    assert all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(b), strict=True))


def test_different_seeds_give_different_values_with_same_shapes():
    a, _ = _make("add.Tensor", CASE, seed=0)
    b, _ = _make("add.Tensor", CASE, seed=1)
    for x, y in zip(_tensors(a), _tensors(b), strict=True):
        assert (x.shape, x.dtype, x.stride()) == (y.shape, y.dtype, y.stride())
    assert all(not torch.equal(x, y) for x, y in zip(_tensors(a)[:3], _tensors(b)[:3], strict=True))


def test_floats_are_signed_ints_small_and_bools_mixed():
    (f, _, i, b, c, u), _ = _make("add.Tensor", CASE)
    assert (f < 0).any() and (f > 0).any()
    assert i.dtype == torch.int32 and (i.abs() <= 16).all()
    assert b.dtype == torch.bool
    assert c.dtype == torch.complex64 and c.imag.abs().sum() > 0
    assert u.dtype == torch.uint8


def test_complex32_spec_materialises():
    (t,), _ = _make("neg.default", "((T([4], c32),), {})")
    assert t.dtype == torch.complex32


def test_stride_is_honoured():
    (t,), _ = _make("neg.default", "((T([3, 4], f32, [1, 3]),), {})")
    assert t.shape == (3, 4) and t.stride() == (1, 3) and not t.is_contiguous()


def test_stride_zero_broadcast_is_honoured():
    (ts, dim), _ = _make(
        "cat.default", "(([T([8, 1, 4], f16, [0, 4, 1]), T([8, 2, 4], f16)], 1), {})"
    )
    assert ts[0].stride() == (0, 4, 1) and dim == 1


def test_device_literals_are_rewritten_to_the_target():
    args, kwargs = _make(
        "_to_copy.default",
        "((T([2], f32),), {'dtype': torch.float16, 'device': device(type='cuda')})",
    )
    assert kwargs["device"] == torch.device("cpu")
    _, kwargs = _make("_to_copy.default", "((T([2], f32),), {'device': 'cuda'})")
    assert kwargs["device"] == "cpu"


def test_embedding_indices_are_valid():
    (weight, idx), _ = _make("embedding.default", "((T([7, 3], f32), T([4, 50], i64)), {})")
    assert idx.min() >= 0 and idx.max() < weight.shape[0]
    assert len(idx.unique()) > 1


def test_embedding_dense_backward_indices_below_num_weights():
    (_, idx, n, *_), _ = _make(
        "embedding_dense_backward.default",
        "((T([2, 9, 4], f32), T([2, 9], i64), 5, -1, False), {})",
    )
    assert 0 <= idx.min() and idx.max() < n


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_indices_are_valid_along_dim(dim: int):
    (x, d, idx), _ = _make("gather.default", f"((T([3, 6], f32), {dim}, T([3, 40], i64)), {{}})")
    assert idx.min() >= 0 and idx.max() < x.shape[d]


def test_scatter_src_indices_are_unique_along_dim():
    (x, _, idx, _), _ = _make(
        "scatter.src", "((T([4, 6], f32), 1, T([4, 5], i64), T([4, 5], f32)), {})"
    )
    assert idx.max() < 6
    assert all(len(row.unique()) == row.numel() for row in idx)


def test_index_tensor_indices_fit_their_dims():
    (x, indices), _ = _make(
        "index.Tensor", "((T([5, 3, 2], f32), [None, T([30], i64), T([30], i64)]), {})"
    )
    assert indices[0] is None
    assert indices[1].max() < 3 and indices[2].max() < 2
    _aten("index.Tensor")(x, indices)


@pytest.mark.parametrize("op", ["nll_loss_forward.default", "nll_loss2d_forward.default"])
def test_nll_loss_targets_are_classes_or_ignore_index(op: str):
    text = (
        "((T([16, 10], f32), T([16], i64), None, 1, -100), {})"
        if op.startswith("nll_loss_")
        else "((T([2, 10, 4, 4], f32), T([2, 4, 4], i64), None, 1, -100), {})"
    )
    (_, target, *_), _ = _make(op, text)
    valid = target[target != -100]
    assert valid.min() >= 0 and valid.max() < 10
    assert (target == -100).any() and target.reshape(-1)[0] != -100


def test_nll_loss_backward_total_weight_matches_targets():
    (_, _, target, weight, _, ignore, total), _ = _make(
        "nll_loss_backward.default",
        "((T([], f32), T([16, 10], f32), T([16], i64), T([10], f32), 1, -100, T([], f32)), {})",
    )
    assert torch.allclose(total, weight[target[target != ignore]].sum())


def test_max_pool_backward_indices_come_from_the_forward():
    args, _ = _make(
        "max_pool2d_with_indices_backward.default",
        "((T([1, 2, 4, 4], f32), T([1, 2, 8, 8], f32), [2, 2], [2, 2], [0, 0], [1, 1], False,"
        " T([1, 2, 4, 4], i64)), {})",
    )
    _, expected = torch.ops.aten.max_pool2d_with_indices.default(args[1], [2, 2], [2, 2])
    assert torch.equal(args[7], expected)


@pytest.mark.parametrize("op", ["log.default", "sqrt.default", "rsqrt.default", "log1p.default"])
def test_positive_values_for_ops_that_need_them(op: str):
    (x,), _ = _make(op, "((T([1000], f32),), {})")
    assert (x > 0).all()


def test_pow_fractional_exponent_gets_positive_base_integer_exponent_signed():
    (x, _), _ = _make("pow.Tensor_Scalar", "((T([100], f32), 0.5), {})")
    (y, _), _ = _make("pow.Tensor_Scalar", "((T([100], f32), 3.0), {})")
    assert (x > 0).all() and (y < 0).any()


def test_running_var_of_batch_norm_is_positive():
    args, _ = _make(
        "native_batch_norm.default",
        "((T([2, 3, 4, 4], f32), T([3], f32), T([3], f32), T([3], f32), T([3], f32), False, 0.1, 1e-05), {})",
    )
    assert (args[4] > 0).all()
    assert not _aten("native_batch_norm.default")(*args)[0].isnan().any()


@pytest.mark.parametrize("dtype", ["i32", "i64", "i8"])
def test_integer_divisors_are_nonzero(dtype: str):
    (_, other), _ = _make("remainder.Tensor", f"((T([500], {dtype}), T([500], {dtype})), {{}})")
    assert (other != 0).all() and (other < 0).any()


def test_softmax_backward_output_is_a_softmax():
    args, _ = _make(
        "_softmax_backward_data.default",
        "((T([4, 7], f32), T([4, 7], f32), -1, torch.float32), {})",
    )
    assert torch.allclose(args[1].sum(-1), torch.ones(4))


def test_registry_is_one_dict_keyed_by_known_aten_names():
    for name in RULES:
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, base)
        if overload:
            getattr(packet, overload)
    assert rule_for("aten.gather.default") is RULES["gather"]


def _torchbench_samples() -> list[tuple[str, str]]:
    trace = load_trace(DATA / "torchbench_trace.txt")
    picked = []
    for op, cases in trace.cases.items():
        if op in EXCLUDED_OPS:
            continue
        for case in sorted(cases, key=lambda c: c.total_numel())[:2]:
            picked.append((op, case.serialize()))
    return picked


@pytest.mark.parametrize(("op", "text"), _torchbench_samples())
def test_torchbench_case_materialises_and_runs_eagerly_on_cpu(op: str, text: str):
    args, kwargs = _make(op, text, seed=3)
    try:
        out = _aten(op)(*args, **kwargs)
    except NotImplementedError as exc:  # the CPU build lacks this dtype: the evaluator skips it too
        pytest.skip(f"no CPU kernel: {exc}")
    floats = [t for t in _tensors(out) if t.is_floating_point()]
    assert not any(t.isnan().any() for t in floats)
