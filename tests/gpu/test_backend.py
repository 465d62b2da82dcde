"""Kept kernels as a PyTorch backend (evaluator.backend) and the model-level check.

Device-agnostic: on a machine without a GPU the kernels run in Triton's interpreter on CPU tensors
(conftest sets TRITON_INTERPRET=1), on a GPU machine the same tests run the kernels on CUDA
tensors. Every model and tensor here is tiny. Fixture kernels live in tests/fixtures/backend_kernels/: `honest/`
(add.Tensor, mul.Tensor, gelu.default, relu.default, mm.default) and `recursing/` (an add.Tensor
kernel that calls torch.add).
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

import pytest
import torch

from evaluator import backend
from evaluator.errors import UsageError
from evaluator.models.tiny_gpt import GPT, CharData, GPTConfig

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "backend_kernels"
HONEST = FIXTURES / "honest"
RECURSING = FIXTURES / "recursing"
HONEST_OPS = ["add.Tensor", "gelu.default", "mm.default", "mul.Tensor", "relu.default"]

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.on_gpu_when_present


@pytest.fixture(autouse=True)
def _no_backend_left_enabled():
    yield
    backend.disable()


def _write_results(run_dir: Path, kernels_dir: Path, statuses: dict[str, str]) -> Path:
    run_dir.mkdir(parents=True)
    path = run_dir / "atenforge_results.json"
    data = {
        "schema_version": 1,
        "run": {"kind": "evaluate", "kernels_dir": str(kernels_dir.resolve())},
        "operators": [
            {"op": op, "status": status, "results": []} for op, status in statuses.items()
        ],
    }
    path.write_text(json.dumps(data))
    return path


def _micro_gpt_step(with_backward: bool = True):
    """Forward (and backward) of a 1-layer, 16-wide GPT from a fixed seed."""
    data = CharData.load()
    cfg = GPTConfig(
        vocab_size=data.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=16, batch_size=2
    )
    torch.manual_seed(0)
    model = GPT(cfg).to(DEVICE)
    x, y = data.get_batch(cfg.batch_size, cfg.block_size, torch.Generator().manual_seed(0), DEVICE)
    logits, loss = model(x, y)
    if with_backward:
        loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), loss.detach(), grads


@pytest.fixture(scope="module")
def gpt_runs():
    """Eager, then with the honest kernels (forward and backward counted apart), then eager again."""
    eager = _micro_gpt_step()
    be = backend.enable(HONEST, only_passed=False)
    try:
        data = CharData.load()
        cfg = GPTConfig(
            vocab_size=data.vocab_size, block_size=8, n_layer=1, n_head=2, n_embd=16, batch_size=2
        )
        torch.manual_seed(0)
        model = GPT(cfg).to(DEVICE)
        x, y = data.get_batch(
            cfg.batch_size, cfg.block_size, torch.Generator().manual_seed(0), DEVICE
        )
        be.reset_stats()
        logits, loss = model(x, y)
        forward_hits = be.stats()["hits"]
        loss.backward()
        all_hits = be.stats()["hits"]
        grads = {
            n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None
        }
    finally:
        be.disable()
    after = _micro_gpt_step()
    return {
        "eager": eager,
        "ours": (logits.detach(), loss.detach(), grads),
        "forward_hits": forward_hits,
        "all_hits": all_hits,
        "hits_after_disable": be.stats()["hits"],
        "after": after,
    }


# --------------------------------------------------------------------------- model runs our kernels


def test_enabled_kernels_run_in_gpt_forward(gpt_runs):
    hits = gpt_runs["forward_hits"]
    for op in ("add.Tensor", "mm.default", "mul.Tensor", "gelu.default"):
        assert hits.get(op, 0) > 0, (op, hits)


def test_enabled_kernels_run_in_gpt_backward(gpt_runs):
    fwd, total = gpt_runs["forward_hits"], gpt_runs["all_hits"]
    # Backward formulas call mm (grad of linear) and mul (grad of the attention scale) again.
    assert total["mm.default"] > fwd["mm.default"]
    assert total["mul.Tensor"] > fwd["mul.Tensor"]


def test_backend_gpt_matches_eager_within_tolerance(gpt_runs):
    (l_e, loss_e, g_e), (l_b, loss_b, g_b) = gpt_runs["eager"], gpt_runs["ours"]
    torch.testing.assert_close(l_b, l_e, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(loss_b, loss_e, atol=1e-5, rtol=1e-5)
    assert g_b.keys() == g_e.keys()
    for name in g_e:
        torch.testing.assert_close(g_b[name], g_e[name], atol=1e-5, rtol=1e-4, msg=name)


def test_disable_restores_eager_with_no_hits_after(gpt_runs):
    assert gpt_runs["hits_after_disable"] == gpt_runs["all_hits"]
    (l_e, loss_e, _), (l_a, loss_a, _) = gpt_runs["eager"], gpt_runs["after"]
    assert torch.equal(l_a, l_e) and torch.equal(loss_a, loss_e)
    assert backend.active() is None


def test_use_context_manager_disables_on_exit():
    x = torch.randn(5, device=DEVICE)
    with backend.use(HONEST, only_passed=False, ops=["relu.default"]) as be:
        torch.relu(x)
        assert be.stats()["hits"] == {"relu.default": 1}
    torch.relu(x)
    assert be.stats()["hits"] == {"relu.default": 1}
    assert backend.active() is None


# --------------------------------------------------------------------------- recursion


def test_recursing_kernel_raises_clear_error():
    backend.enable(RECURSING, only_passed=False)
    with pytest.raises(backend.BackendRecursionError) as info:
        torch.add(torch.ones(3, device=DEVICE), torch.ones(3, device=DEVICE))
    message = str(info.value)
    assert "kernel for add.Tensor calls aten.add.Tensor itself" in message
    assert "add__Tensor_implementation_v1.py:" in message  # points at the offending line


@pytest.mark.skipif(DEVICE == "cuda", reason="Triton's interpreter runs only without a GPU here")
def test_interpreter_argument_copies_do_not_reenter_kernels(tmp_path):
    """Triton's interpreter calls aten.copy_ while launching: that must reach eager, not us."""
    kdir = tmp_path / "kernels"
    shutil.copytree(HONEST / "relu__default", kdir / "relu__default")
    (kdir / "copy___default").mkdir(parents=True)
    (kdir / "copy___default" / "copy___default_implementation_v1.py").write_text(
        """
import triton
import triton.language as tl


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def copy___default_kernel_impl(self, src, non_blocking=False):
    assert self.is_contiguous() and src.is_contiguous() and self.shape == src.shape
    _copy[(triton.cdiv(self.numel(), 256),)](src, self, self.numel(), BLOCK=256)
    return self
"""
    )
    be = backend.enable(kdir, only_passed=False)
    x, dst = torch.randn(300), torch.empty(300)
    dst.copy_(x)
    y = torch.relu(x)
    assert torch.equal(dst, x) and torch.equal(y, x.clamp_min(0))
    assert be.stats()["hits"] == {"copy_.default": 1, "relu.default": 1}


# --------------------------------------------------------------------------- which kernels are enabled


def test_failed_kernel_is_not_enabled_by_default(tmp_path):
    statuses = {op: "passed" for op in HONEST_OPS} | {"add.Tensor": "failed"}
    results = _write_results(tmp_path / "run_1", HONEST, statuses)
    be = backend.enable(HONEST, results=results)
    assert "add.Tensor" not in be.ops
    assert be.not_enabled["add.Tensor"] == "latest evaluation: failed"
    torch.add(torch.ones(4, device=DEVICE), torch.ones(4, device=DEVICE))
    torch.relu(torch.ones(4, device=DEVICE))
    assert be.stats()["hits"] == {"relu.default": 1}


def test_auto_results_uses_newest_evaluation_of_this_dir(tmp_path):
    logs = tmp_path / "logs"
    old = _write_results(logs / "run_1", HONEST, {op: "passed" for op in HONEST_OPS})
    new = _write_results(
        logs / "run_2", HONEST, {op: "passed" for op in HONEST_OPS} | {"relu.default": "error"}
    )
    other = _write_results(logs / "run_3", RECURSING, {"relu.default": "passed"})
    os.utime(old, (1, 1))
    os.utime(new, (2, 2))
    os.utime(other, (3, 3))  # newest, but it evaluated another directory
    assert backend.find_results(HONEST, logs) == new
    be = backend.enable(HONEST, results="auto", log_dir=logs)
    assert "relu.default" not in be.ops and "add.Tensor" in be.ops


def test_only_passed_without_results_raises_usage_error(tmp_path):
    with pytest.raises(UsageError, match="evaluate it first.*only_passed=False"):
        backend.enable(HONEST, log_dir=tmp_path / "empty")
    with pytest.raises(UsageError, match="no evaluation results"):
        backend.enable(HONEST, results=None)
    assert backend.active() is None


def test_ops_and_skip_choose_the_enabled_kernels():
    be = backend.enable(
        HONEST, only_passed=False, ops=["aten.add.Tensor", "relu", "mul", "mm.default"], skip=["mm"]
    )
    # "relu" is relu.default; "mul" has no .default kernel, so it names every mul overload.
    assert be.ops == ["add.Tensor", "mul.Tensor", "relu.default"]
    assert be.not_enabled == {"mm.default": "skipped by request"}


def test_unknown_op_is_a_usage_error():
    with pytest.raises(UsageError, match="no kernel for sin.default"):
        backend.enable(HONEST, only_passed=False, ops=["sin"])


def test_second_enable_is_a_usage_error():
    backend.enable(HONEST, only_passed=False, ops=["relu"])
    with pytest.raises(UsageError, match="already enabled"):
        backend.enable(HONEST, only_passed=False)


# --------------------------------------------------------------------------- errors, counting, shapes


def test_kernel_error_raises_backend_kernel_error_by_default():
    backend.enable(HONEST, only_passed=False, ops=["add.Tensor"])
    ints = torch.arange(4, device=DEVICE)
    with pytest.raises(
        backend.BackendKernelError, match="kernel for add.Tensor .* raised TypeError"
    ):
        torch.add(ints, ints)


def test_kernel_error_falls_back_to_eager_when_asked():
    be = backend.enable(HONEST, only_passed=False, ops=["add.Tensor"], on_error="eager")
    ints = torch.arange(4, device=DEVICE)
    assert torch.equal(torch.add(ints, ints), torch.tensor([0, 2, 4, 6], device=DEVICE))
    assert be.stats()["kernel_errors"]["add.Tensor"]["count"] == 1
    assert "hits" in be.stats() and be.stats()["hits"] == {}


def test_track_fallbacks_lists_overloads_run_in_eager():
    be = backend.enable(HONEST, only_passed=False, ops=["relu.default"], track_fallbacks=True)
    x = torch.randn(8, device=DEVICE)
    torch.relu(x)
    torch.sigmoid(x)
    torch.sigmoid(x)
    st = be.stats()
    assert st["hits"] == {"relu.default": 1}
    assert st["fallbacks"]["sigmoid.default"] == 2
    assert "relu.default" not in st["fallbacks"]
    assert st["calls"]["relu.default"] == {"ours": 1, "eager": 0}
    cov = be.coverage()
    assert cov["calls_ours"] == 1 and cov["calls_total"] >= 3


def test_shape_table_runs_kernel_only_where_measured_faster():
    table = {
        "operators": [
            {
                "op": "add.Tensor",
                "status": "passed",
                "results": [
                    {
                        "args": "((T([2, 3], f32), T([2, 3], f32)), {})",
                        "passed": True,
                        "speedup": 1.8,
                    },
                    {
                        "args": "((T([4, 3], f32), T([4, 3], f32)), {})",
                        "passed": True,
                        "speedup": 0.6,
                    },
                ],
            }
        ]
    }
    be = backend.enable(HONEST, only_passed=False, ops=["add.Tensor"], shape_table=table)
    inputs = [
        torch.randn(2, 3, device=DEVICE),
        torch.randn(4, 3, device=DEVICE),
        torch.randn(5, 5, device=DEVICE),
    ]  # faster, slower, unmeasured
    outputs = [torch.add(t, t) for t in inputs]
    st = be.stats()
    backend.disable()
    for t, out in zip(inputs, outputs, strict=True):
        torch.testing.assert_close(out, t + t)  # the eager path gives the right answer too
    assert st["hits"] == {"add.Tensor": 1}
    assert st["eager_by_shape"] == {"add.Tensor": 2}
    assert st["shape_decisions"] == {"faster": 1, "slower": 1, "unmeasured": 1}


def test_eager_path_keeps_python_scalar_promotion():
    """The dispatcher hands Python kernels `x + 2.5` with 2.5 as a float; eager must still see a
    wrapped number (int64 + 2.5 -> float32, not float64)."""
    measured = {"args": "((T([2], f32), T([2], f32)), {})", "passed": True, "speedup": 2.0}
    table = {"operators": [{"op": "add.Tensor", "results": [measured]}]}
    ints = torch.arange(4, device=DEVICE)
    doubles = torch.randn(4, dtype=torch.float64, device=DEVICE)
    expected = [ints + 2.5, doubles + 0.1, ints + 3]
    with backend.use(HONEST, only_passed=False, ops=["add.Tensor"], shape_table=table) as be:
        got = [ints + 2.5, doubles + 0.1, ints + 3]
    assert be.stats()["eager_by_shape"] == {"add.Tensor": 3}
    for e, g in zip(expected, got, strict=True):
        assert g.dtype == e.dtype and torch.equal(g, e)


def test_shape_table_without_measurements_is_a_usage_error():
    table = {
        "operators": [
            {
                "op": "add.Tensor",
                "status": "passed",
                "results": [
                    {"args": "((T([2], f32), T([2], f32)), {})", "passed": True, "speedup": None}
                ],
            }
        ]
    }
    with pytest.raises(UsageError, match="no measured speedups"):
        backend.enable(HONEST, only_passed=False, shape_table=table)


def test_nearest_shape_match_uses_closest_measured_size():
    measured = {"args": "((T([1000], f32), T([1000], f32)), {})", "passed": True, "speedup": 2.0}
    table = backend.ShapeTable.load(
        {"operators": [{"op": "add.Tensor", "results": [measured]}]}, match="nearest"
    )
    near, far = torch.randn(1500), torch.randn(100000)
    assert table.decide("add.Tensor", (near, near), {}) == (True, "nearest-faster")
    assert table.decide("add.Tensor", (far, far), {}) == (False, "unmeasured")


# --------------------------------------------------------------------------- model_check CLI


def test_model_check_writes_losses_and_report(tmp_path):
    from evaluator.models import model_check

    logs = tmp_path / "logs"
    code = model_check.main(
        [
            "--kernels-dir",
            str(HONEST),
            "--all",
            "--steps",
            "2",
            "--device",
            "auto",
            "--preset",
            "tiny",
            "--log-dir",
            str(logs),
        ]
    )
    assert code == 0
    (run_dir,) = list(logs.iterdir())
    with open(run_dir / "losses.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "step",
        "loss_eager",
        "loss_backend",
        "step_ms_eager",
        "step_ms_backend",
        "loss_eager_perturbed",
    ]
    assert len(rows) == 2
    result = json.loads((run_dir / "model_check.json").read_text())
    assert result["verdict"] == "passed"
    nf = result["noise_floor"]
    assert nf["ran"] and nf["weight_noise"] == 1e-7 and math.isfinite(nf["rel_diff_to_eager"])
    # ~1-ulp weights change the loss a little, not by much, in two steps
    assert rows[0]["loss_eager_perturbed"] != "" and nf["rel_diff_to_eager"] < 1e-3
    assert result["hits"]["mm.default"] > 0
    assert "bmm.default" in result["one_step"]["fallbacks"]
    assert result["inference"]["ran"] or "transformers" in result["inference"]["reason"]
    report = (run_dir / "MODEL_CHECK.md").read_text()
    assert "Verdict: PASSED" in report and "noise floor: eager from the same weights" in report
    assert (run_dir / "loss_curves.png").read_bytes()[:4] == b"\x89PNG"


def test_cosine_schedule_warms_up_then_decays_to_a_tenth() -> None:
    from evaluator.models.model_check import lr_factor

    f = [lr_factor("cosine", s, 500) for s in range(500)]
    assert f[0] == 1 / 50 and f[49] == 1.0 and max(f) == 1.0
    assert all(a >= b for a, b in zip(f[49:], f[50:], strict=False))  # non-increasing after warm-up
    assert abs(f[-1] - 0.1) < 1e-3 and lr_factor("constant", 400, 500) == 1.0


def test_perturbed_state_changes_floats_by_about_one_ulp_and_leaves_the_original() -> None:
    from evaluator.models.model_check import perturbed_state

    state = {"w": torch.randn(1000), "steps": torch.tensor(3)}
    before = state["w"].clone()
    noisy = perturbed_state(state, seed=0)
    rel = ((noisy["w"] - state["w"]) / state["w"]).abs()
    assert torch.equal(state["w"], before) and torch.equal(noisy["steps"], state["steps"])
    assert 0 < rel.median() < 1e-6 and (noisy["w"] != state["w"]).any()


def test_model_check_without_results_exits_2(tmp_path):
    from evaluator.models import model_check

    logs = tmp_path / "logs"
    code = model_check.main(
        ["--kernels-dir", str(HONEST), "--device", "auto", "--log-dir", str(logs)]
    )
    assert code == 2
    assert not logs.exists() or not any(logs.iterdir())  # nothing trained, no run folder


def test_png_plot_writes_a_valid_png_without_matplotlib(tmp_path):
    import struct
    import zlib

    from evaluator.reports import png_plot

    path = tmp_path / "p.png"
    series = [png_plot.Series("eager", [3.0, 2.5, float("nan"), 2.0], png_plot.BLUE, 3)]
    png_plot.plot_png(path, [png_plot.Panel("loss", series)], title="t", width=200, height=120)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (200, 120)
    idat_len = struct.unpack(">I", data[33:37])[0]
    raw = zlib.decompress(data[41 : 41 + idat_len])
    assert len(raw) == height * (1 + width * 3)
    assert raw.count(bytes(png_plot.BLUE)) > 0  # the curve was drawn
