"""GPU-only (marker `gpu`): Python-float scalars keep their double precision in float64 results.

Triton's launcher packs a Python float passed to an unannotated kernel parameter as fp32, so a
float64 tensor combined with a float scalar (an add's other operand or alpha, a fill value, a
layer norm's eps, an upsampling scale) would be computed with the scalar rounded to fp32:
errors of 1e-9 to 1e-6, several above the float64 tolerance. The builtin kernels take float
scalars through `tl.float64` parameters. The interpreter keeps Python floats as doubles, so only
a GPU run shows the difference; on the CPU, `compile_for_gpu` flags an unannotated float
parameter instead.
"""

from __future__ import annotations

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.suites import select_operators


def _f64(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).cuda()


# (op, args builder, kwargs, exact): exact = eager's arithmetic is one IEEE operation per element
# (or a copy), so the results must agree bit for bit; otherwise within 1e-12
_CASES = [
    ("add.Tensor", lambda x, y: (x, 0.1), {}, True),
    ("add.Tensor", lambda x, y: (x, y), {"alpha": 0.1}, False),
    ("mul.Scalar", lambda x, y: (x, 0.1), {}, True),
    ("div.Scalar", lambda x, y: (x, 0.1), {}, True),
    ("leaky_relu.default", lambda x, y: (x, 0.1), {}, True),
    ("clamp.default", lambda x, y: (x, -0.1, 0.2), {}, True),
    ("fill_.Scalar", lambda x, y: (x.clone(), 0.1), {}, True),
    ("native_dropout_backward.default", lambda x, y: (x, y > 0, 1 / 0.9), {}, False),
    ("constant_pad_nd.default", lambda x, y: (x.view(40, 25), [1, 2, 3, 4], 0.1), {}, True),
    ("mean.dim", lambda x, y: (x.view(8, 125), [1]), {}, False),
    ("var.correction", lambda x, y: (x.view(8, 125), [1]), {"correction": 0.5}, False),
    (
        "native_layer_norm.default",
        lambda x, y: (x.view(8, 125), [125], y[:125], y[125:250], 1e-5),
        {},
        False,
    ),
    (
        "upsample_bilinear2d.vec",
        lambda x, y: (x[:189].view(1, 3, 7, 9), None, False, [1.7, 2.3]),
        {},
        False,
    ),
    (
        "addmm.default",
        lambda x, y: (y[:25], x.view(40, 25), y[:625].view(25, 25)),
        {"beta": 0.3, "alpha": 0.7},
        False,
    ),
]


@pytest.mark.parametrize(("op", "build", "kwargs", "exact"), _CASES, ids=[c[0] for c in _CASES])
def test_float64_results_keep_the_float_scalars_double(op, build, kwargs, exact, tmp_path) -> None:
    x, y = _f64(1000, seed=0), _f64(1000, seed=1)
    cases = next((oc.cases for oc in select_operators("torchbench").ops if oc.op == op), [])
    kernel = load_kernel(op, WRITERS[op](KernelRequest(op=op, schema="", cases=cases)), tmp_path)
    name, overload = op.split(".")
    reference = getattr(getattr(torch.ops.aten, name), overload)
    args = build(x, y)
    want = reference(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    got = kernel(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
    if isinstance(want, tuple):
        want, got = want[0], got[0]
    assert got.dtype == torch.float64
    if exact:
        assert torch.equal(got, want), (got - want).abs().max().item()
    else:
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)
