"""Float64 tensors with Python-float scalars: the builtin kernels against eager, bit for bit.

    python3 benchmarks/f64_scalar_probe.py [cuda|cpu]

One line per probe: EQUAL (same bits), DIFF with the max abs difference, or the error a kernel
raised. Triton's launcher packs an unannotated float argument as fp32, so on the GPU a kernel
that takes its scalars that way shows differences of 1e-9..1e-6 here
(docs/history/BENCHMARKS-2026-11-to-12.md §20);
the interpreter (cpu) keeps doubles and cannot show them. tests/gpu/test_gpu_scalars.py keeps the
assertions; this lists every probe at once.
"""

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.suites import select_operators

dev = sys.argv[1] if len(sys.argv) > 1 else "cuda"
g = torch.Generator().manual_seed(0)


def R(*s, dt=torch.float64):
    return torch.randn(*s, generator=g, dtype=torch.float64).to(dt).to(dev)


x, y, z = R(1000), R(1000), R(1000)
m = R(1000) > 0
probes = [
    ("add.Tensor", lambda: (x, 0.1), {}),
    ("add.Tensor", lambda: (x, y), {"alpha": 0.1}),
    ("sub.Tensor", lambda: (x, y), {"alpha": 0.3}),
    ("mul.Tensor", lambda: (x, 0.1), {}),
    ("div.Tensor", lambda: (x, 0.1), {}),
    ("rsub.Scalar", lambda: (x, 0.1), {}),
    ("add.Scalar", lambda: (x, 0.1), {}),
    ("mul.Scalar", lambda: (x, 0.1), {}),
    ("div.Scalar", lambda: (x, 0.1), {}),
    ("leaky_relu.default", lambda: (x, 0.1), {}),
    ("elu.default", lambda: (x, 0.7), {}),
    ("hardtanh.default", lambda: (x, -0.1, 0.7), {}),
    ("pow.Tensor_Scalar", lambda: (x.abs(), 0.3), {}),
    ("clamp.default", lambda: (x, -0.1, 0.2), {}),
    ("fill_.Scalar", lambda: (x.clone(), 0.1), {}),
    ("masked_fill.Scalar", lambda: (x, m, 0.1), {}),
    ("addcmul.default", lambda: (x, y, z), {"value": 0.1}),
    ("addcdiv.default", lambda: (x, y, z), {"value": 0.1}),
    ("lerp.Scalar", lambda: (x, y, 0.3), {}),
    ("softplus.default", lambda: (x, 1.3, 20.0), {}),
    ("threshold_backward.default", lambda: (y, x, 0.1), {}),
    ("leaky_relu_backward.default", lambda: (y, x, 0.1, False), {}),
    ("hardtanh_backward.default", lambda: (y, x, -0.1, 0.7), {}),
    ("elu_backward.default", lambda: (y, 0.7, 1.0, 1.0, False, x), {}),
    ("add_.Tensor", lambda: (x.clone(), 0.1), {}),
    ("mul_.Tensor", lambda: (x.clone(), 0.1), {}),
    ("native_layer_norm.default", lambda: (R(8, 1000), [1000], R(1000), R(1000), 1e-5), {}),
    ("full.default", lambda: ([1000], 0.1), {"dtype": torch.float64, "device": dev}),
    ("new_full.default", lambda: (x, [1000], 0.1), {}),
    ("clamp_min.default", lambda: (x, 0.1), {}),
    ("gelu.default", lambda: (x,), {}),
    ("where.ScalarOther", lambda: (m, x, 0.1), {}),
    ("scalar_tensor.default", lambda: (0.1,), {"dtype": torch.float64, "device": dev}),
    ("sum.default", lambda: (x,), {}),
    ("addmm.default", lambda: (R(64), R(32, 48), R(48, 64)), {"beta": 0.3, "alpha": 0.7}),
    (
        "native_batch_norm.default",
        lambda: (R(4, 8, 50), R(8), R(8), R(8), R(8).abs(), True, 0.1, 1e-5),
        {},
    ),
    ("native_group_norm.default", lambda: (R(4, 8, 50), R(8), R(8), 4, 8, 50, 2, 1e-5), {}),
    ("var.correction", lambda: (R(8, 1000), [1]), {"correction": 0.5}),
    ("upsample_bilinear2d.vec", lambda: (R(2, 3, 7, 9), None, False, [1.7, 2.3]), {}),
    ("native_dropout_backward.default", lambda: (x, m, 1.0 / 0.9), {}),
    ("softplus_backward.default", lambda: (y, x, 1.3, 20.0), {}),
    ("clamp_max.default", lambda: (x, 0.1), {}),
]
cases = {oc.op: oc.cases for oc in select_operators("torchbench").ops}
tmp = Path(tempfile.mkdtemp())
for op, args, kw in probes:
    w = WRITERS.get(op)
    if w is None:
        print(f"{op:32s} no writer")
        continue
    src = w(KernelRequest(op=op, schema="", cases=cases.get(op, ())))
    if src is None:
        print(f"{op:32s} declined")
        continue
    fn = load_kernel(op, src, tmp)
    name, ov = op.split(".")
    ref_fn = getattr(getattr(torch.ops.aten, name), ov)
    a = args()
    try:
        ref = ref_fn(*[t.clone() if isinstance(t, torch.Tensor) else t for t in a], **kw)
        got = fn(*[t.clone() if isinstance(t, torch.Tensor) else t for t in a], **kw)
    except Exception as e:
        print(f"{op:32s} error {type(e).__name__}: {str(e)[:3000]}")
        continue
    if isinstance(ref, (tuple, list)):
        ref, got = ref[0], got[0]
    d = (got.double() - ref.double()).abs().max().item()
    print(f"{op:32s} {'EQUAL' if torch.equal(got, ref) else 'DIFF'} maxabs={d:.3g}")
