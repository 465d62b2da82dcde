"""The tracer (`python -m evaluator.trace`): recorder, trace table, sidecar, user models, zoo.

Everything here runs on the CPU in a few seconds and needs no model library; the one test that
builds a transformers architecture skips cleanly when transformers is not installed.
`make_tiny_trace` produces a small real trace file for tests that evaluate an operator from it.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import torch

from evaluator.cases.model_zoo import ZOO, ZooModel, missing_library
from evaluator.cases.testcase import format_trace, load_trace, parse_case
from evaluator.cases.trace import main, parse_inputs, trace_model
from evaluator.cases.trace_recorder import HostScalars, Recorder, TraceTable, write_trace
from evaluator.errors import UsageError

# A model of the tests' own: pre-norm attention block (LayerNorm, softmax attention, GELU MLP).
TINY_MODEL_SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn


    class TinyBlock(nn.Module):
        def __init__(self, dim=32, heads=2):
            super().__init__()
            self.heads = heads
            self.norm1 = nn.LayerNorm(dim)
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.norm2 = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x):
            b, s, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
            q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(b, s, d))
            return x + self.mlp(self.norm2(x))


    def build():
        return TinyBlock()


    def build_with_inputs():
        return TinyBlock(), (torch.randn(2, 8, 32),)


    def build_data_dependent():
        class Gate(nn.Module):
            def forward(self, x):
                return x.relu() if x.sum().item() > 0 else x.tanh()

        return Gate()


    def build_broken():
        raise RuntimeError("boom")


    def build_not_a_module():
        return 42


    NOT_CALLABLE = 3
    """
)
TINY_INPUTS = ["T([2, 8, 32], f32)"]
TINY_OPS = {
    "native_layer_norm.default",
    "addmm.default",
    "_softmax.default",
    "bmm.default",
    "gelu.default",
    "add.Tensor",
}
TINY_BACKWARD_OPS = {
    "native_layer_norm_backward.default",
    "gelu_backward.default",
    "_softmax_backward_data.default",
}


@pytest.fixture(scope="module")
def tiny_module(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Write the tiny model as an importable module; return its name."""
    folder = tmp_path_factory.mktemp("user_models")
    (folder / "atenforge_tiny_model.py").write_text(TINY_MODEL_SOURCE)
    sys.path.insert(0, str(folder))
    yield "atenforge_tiny_model"
    sys.path.remove(str(folder))
    sys.modules.pop("atenforge_tiny_model", None)


def make_tiny_trace(
    out_dir: Path, *, train: bool = False, extra_args: tuple[str, ...] = ()
) -> Path:
    """Trace the tiny attention block through the CLI into out_dir/tiny_trace.txt (+ .json).

    For tests that evaluate an operator from a real trace: `select_operators(trace_file=...)`.
    """
    module = out_dir / "atenforge_tiny_model_file.py"
    module.write_text(TINY_MODEL_SOURCE)
    out = out_dir / "tiny_trace.txt"
    argv = [
        "--model", f"{module}:build", "--name", "tiny", "--inputs", *TINY_INPUTS,
        "--out", str(out), *(["--train"] if train else []), *extra_args,
    ]  # fmt: skip
    assert main(argv) == 0
    return out


def _ops(path: Path) -> dict[str, list]:
    trace = load_trace(path)
    assert trace.errors == []
    return trace.cases


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


# ---------------------------------------------------------------- end to end through the CLI


def test_tiny_model_inference_trace_holds_its_ops_with_counts(tmp_path):
    cases = _ops(make_tiny_trace(tmp_path))
    assert TINY_OPS <= set(cases)
    assert not TINY_BACKWARD_OPS & set(cases)
    (layer_norm,) = cases["native_layer_norm.default"]  # both norms: same shapes, one case
    assert layer_norm.count == 2
    assert (
        layer_norm.serialize()
        == "((T([2, 8, 32], f32), [32], T([32], f32), T([32], f32), 1e-05), {})"
    )
    assert sum(c.count for c in cases["gelu.default"]) == 1


def test_tiny_model_train_trace_adds_backward_ops(tmp_path):
    cases = _ops(make_tiny_trace(tmp_path, train=True))
    assert TINY_OPS | TINY_BACKWARD_OPS <= set(cases)


def test_trace_file_round_trips_line_by_line(tmp_path):
    path = make_tiny_trace(tmp_path, train=True)
    text = path.read_text()
    trace = load_trace(path)
    for op_cases in trace.cases.values():
        for case in op_cases:
            assert case.serialize() == case.source
    assert format_trace(trace.cases) == text


def test_sidecar_matches_the_trace_file(tmp_path):
    path = make_tiny_trace(tmp_path, train=True)
    trace = load_trace(path)
    sidecar = json.loads(path.with_suffix(".json").read_text())
    assert sidecar["schema_version"] == 1
    assert sidecar["models"] == ["tiny"]
    assert "--model" in sidecar["command"] and "--train" in sidecar["command"]
    assert list(sidecar["ops"]) == list(trace.cases)
    for op, entry in sidecar["ops"].items():
        assert entry["models"] == ["tiny"]
        assert entry["count"] == sum(c.count for c in trace.cases[op])
        assert [c["args"] for c in entry["cases"]] == [c.serialize() for c in trace.cases[op]]
        for row, case in zip(entry["cases"], trace.cases[op], strict=True):
            assert row["count"] == case.count and row["models"] == ["tiny"]
            assert row["bytes"] == case.total_bytes()
            if case.tensor_specs():
                assert row["dtype"] == "f32"


def test_cases_are_sorted_by_count_descending(tmp_path):
    trace = load_trace(make_tiny_trace(tmp_path, train=True))
    for op_cases in trace.cases.values():
        counts = [c.count for c in op_cases]
        assert counts == sorted(counts, reverse=True)


def test_user_model_with_its_own_inputs_and_dtype(tmp_path, tiny_module, capsys):
    out = tmp_path / "own.txt"
    argv = ["--model", f"{tiny_module}:build_with_inputs", "--dtype", "bf16", "--out", str(out)]
    assert main(argv) == 0
    cases = _ops(out)
    assert TINY_OPS <= set(cases)
    assert "bf16" in cases["gelu.default"][0].serialize()
    assert "build_with_inputs" in capsys.readouterr().out


def test_format_parquet_writes_backendbench_test_set_with_the_same_cases(tmp_path, tiny_module):
    pytest.importorskip("pyarrow")
    argv = ["--model", f"{tiny_module}:build_with_inputs", "--train"]
    assert main([*argv, "--out", str(tmp_path / "t.txt")]) == 0
    assert main([*argv, "--format", "parquet", "--out", str(tmp_path / "t.parquet")]) == 0
    text, table = load_trace(tmp_path / "t.txt"), load_trace(tmp_path / "t.parquet")
    assert table.errors == [] and format_trace(table.cases) == format_trace(text.cases)
    sidecar = json.loads((tmp_path / "t.json").read_text())
    assert list(sidecar["ops"]) == list(table.cases)


@pytest.mark.parametrize("device", ["meta", "cpu --real"])
def test_user_model_traces_on_meta_and_real_tensors(tmp_path, tiny_module, device):
    out = tmp_path / "t.txt"
    argv = ["--model", f"{tiny_module}:build", "--inputs", *TINY_INPUTS, "--out", str(out)]
    assert main([*argv, "--device", *device.split()]) == 0
    assert TINY_OPS <= set(_ops(out))


def test_data_dependent_model_falls_back_to_a_real_run(tmp_path, tiny_module, capsys):
    out = tmp_path / "dd.txt"
    argv = ["--model", f"{tiny_module}:build_data_dependent", "--inputs", "T([4, 4], f32)"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "real (fake run failed" in capsys.readouterr().out
    assert "_local_scalar_dense.default" in _ops(out)


def test_data_dependent_model_without_fallback_is_a_usage_error(tmp_path, tiny_module, capsys):
    argv = ["--model", f"{tiny_module}:build_data_dependent", "--inputs", "T([4, 4], f32)"]
    assert main([*argv, "--no-fallback", "--out", str(tmp_path / "x.txt")]) == 2
    assert_one_line_error(capsys.readouterr().err, "build_data_dependent", "fake run failed")


# ---------------------------------------------------------------- user errors: one line, exit 2


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("no_such_module_xyz:build", "cannot import 'no_such_module_xyz'"),
        ("{mod}:missing_fn", "has no 'missing_fn'"),
        ("{mod}:NOT_CALLABLE", "is not callable"),
        ("{mod}:build_broken", "RuntimeError: boom"),
        ("{mod}:build_not_a_module", "returned int"),
        ("{mod}", "is not MODULE:FUNCTION"),
        ("/no/such/file.py:build", "does not exist"),
    ],
)
def test_bad_user_model_is_a_one_line_usage_error(tmp_path, tiny_module, capsys, spec, needle):
    argv = ["--model", spec.format(mod=tiny_module), "--inputs", *TINY_INPUTS]
    assert main([*argv, "--out", str(tmp_path / "x.txt")]) == 2
    assert_one_line_error(capsys.readouterr().err, needle)
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--inputs", "T([2, 8], q9)"], "--inputs"),
        (["--inputs", "x=T([2], f32)", "T([2], f32)"], "positional inputs must come before"),
        (["--dtype", "i64"], "not a floating dtype"),
        (["--models", "bert_base_train"], "apply to --zoo"),
    ],
)
def test_bad_user_model_flags_are_one_line_usage_errors(
    tmp_path, tiny_module, capsys, args, needle
):
    argv = ["--model", f"{tiny_module}:build", *args, "--out", str(tmp_path / "x.txt")]
    assert main(argv) == 2
    assert_one_line_error(capsys.readouterr().err, needle)


def test_user_model_without_inputs_is_a_usage_error(tmp_path, tiny_module, capsys):
    assert main(["--model", f"{tiny_module}:build", "--out", str(tmp_path / "x.txt")]) == 2
    assert_one_line_error(capsys.readouterr().err, "--inputs")


def test_out_must_be_a_txt_file(tmp_path, tiny_module, capsys):
    argv = ["--model", f"{tiny_module}:build", "--inputs", *TINY_INPUTS]
    assert main([*argv, "--out", str(tmp_path / "x.json")]) == 2
    assert_one_line_error(capsys.readouterr().err, ".txt")


def test_unknown_zoo_model_is_a_usage_error(tmp_path, capsys):
    assert main(["--zoo", "--models", "nope", "--out", str(tmp_path / "x.txt")]) == 2
    assert_one_line_error(capsys.readouterr().err, "unknown zoo model(s) nope", "--list")


def test_parse_inputs_reads_positional_and_keyword_specs():
    args, kwargs = parse_inputs(["T([2, 16], i64)", "3", "attention_mask=T([2, 16], b8)"])
    assert [type(a).__name__ for a in args] == ["TensorSpec", "int"]
    assert kwargs["attention_mask"].shape == (2, 16)
    with pytest.raises(UsageError):
        parse_inputs(["T([2, 16)"])


# ---------------------------------------------------------------- recorder and table


def test_recorder_keeps_strides_of_non_contiguous_tensors_only():
    a, b = torch.randn(4, 3), torch.randn(3, 4).t()
    with Recorder() as rec:
        torch.mul(a, b)
    assert rec.calls == Counter(
        {("mul.Tensor", "((T([4, 3], f32), T([4, 3], f32, [1, 4])), {})"): 1}
    )


def test_recorder_skips_metadata_ops_and_keeps_views():
    x = torch.randn(4, 4)
    with Recorder() as rec:
        x.detach()
        x.view(16)
    assert {op for op, _ in rec.calls} == {"view.default"}


def test_recorder_records_full_size_shapes_under_fake_tensors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(1 << 20, 1 << 20, dtype=torch.float16)  # 2 TiB if it were real
        with Recorder() as rec:
            torch.nn.functional.silu(x)
    assert rec.calls == Counter({("silu.default", "((T([1048576, 1048576], f16),), {})"): 1})


def test_host_scalars_answers_all_and_any_on_fake_tensors_only():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(8)
        with HostScalars():
            assert bool(x.isfinite().all()) is True
            assert bool((x > 0).any()) is False
            with pytest.raises(Exception):  # noqa: B017 - any other value read stays an error
                x.sum().item()


def test_table_ranks_ops_by_models_then_count_and_merges_models(tmp_path):
    table = TraceTable()
    relu = "((T([8], f32),), {})"
    table.add(
        "a", Counter({("relu.default", relu): 5, ("add.Tensor", "((T([8], f32), 1), {})"): 9})
    )
    table.add(
        "b", Counter({("relu.default", relu): 1, ("mul.Tensor", "((T([8], f32), 2), {})"): 50})
    )
    table.add("c", Counter({("bogus.default", "((T([8], f32), nan2), {})"): 1}))  # does not parse
    json_path = write_trace(table, tmp_path / "t.txt", command="test")
    assert list(load_trace(tmp_path / "t.txt").cases) == [
        "relu.default",
        "mul.Tensor",
        "add.Tensor",
    ]
    sidecar = json.loads(json_path.read_text())
    assert sidecar["models"] == ["a", "b", "c"]
    assert sidecar["ops"]["relu.default"]["models"] == ["a", "b"]
    assert sidecar["ops"]["relu.default"]["cases"][0]["count"] == 6
    assert table.dropped == Counter({"bogus.default": 1})


# ---------------------------------------------------------------- the zoo


def test_zoo_has_at_least_25_architectures_of_every_kind():
    assert len(ZOO) >= 25
    assert {e.library for e in ZOO.values()} == {"transformers", "torchvision", "timm"}
    assert {e.mode for e in ZOO.values()} == {"infer", "train"}
    assert all(e.dtype in (torch.float16, torch.bfloat16, torch.float32) for e in ZOO.values())
    assert all(not e.amp or e.mode == "train" for e in ZOO.values())
    assert all(e.sizes for e in ZOO.values())


def test_zoo_model_whose_library_is_missing_is_skipped_with_the_reason():
    entry = ZooModel("x", "no_such_library_xyz", lambda: None, lambda m: (), "infer", None)
    assert "no_such_library_xyz is not installed" in missing_library(entry)
    result = trace_model(entry)
    assert result.skipped and "not installed" in result.skipped and not result.calls


def test_tiny_transformers_llama_traces_rmsnorm_rotary_and_sdpa():
    pytest.importorskip("transformers")
    from evaluator.cases.model_zoo import _hf, _tokens, hf_step

    config = dict(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa",
    )  # fmt: skip
    entry = ZooModel(
        "tiny_llama", "transformers", _hf("LlamaForCausalLM", "LlamaConfig", **config),
        _tokens(2, 16, labels="tokens"), "train", torch.bfloat16, step=hf_step,
    )  # fmt: skip
    result = trace_model(entry)
    assert result.how == "fake", result.skipped
    ops = {op for op, _ in result.calls}
    assert {"rsqrt.default", "embedding.default", "silu.default", "nll_loss_forward.default"} <= ops
    assert any("scaled_dot_product" in op for op in ops)
    assert any(op.endswith("_backward.default") for op in ops)


def test_every_case_text_of_a_zoo_style_run_parses():
    # A bf16 autocast training step: dtype kwargs, devices and strides all serialize and parse.
    entry = ZooModel(
        "mlp", None, lambda: torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)),
        lambda m: (torch.randn(4, 16),), "train", torch.bfloat16, amp=True,
    )  # fmt: skip
    result = trace_model(entry)
    assert result.how == "fake" and result.calls
    for _, text in result.calls:
        assert parse_case(text).serialize() == text
    assert any("torch.bfloat16" in text for _, text in result.calls)


# ---------------------------------------------------------------- trace -> evaluation


def test_operator_from_own_trace_evaluates_end_to_end(tmp_path):
    """Trace a model of our own, then judge a real kernel on the cases that trace recorded."""
    from layout import FIXTURES

    from evaluator.config import EvalConfig
    from evaluator.evaluate import evaluate
    from evaluator.results import Status

    trace = make_tiny_trace(tmp_path)
    report = evaluate(
        FIXTURES / "kernels" / "corpus",
        trace_file=trace,
        ops=["gelu.default"],
        config=EvalConfig(),
        device="cpu",
        run_dir=tmp_path / "run",
    )
    (result,) = report.operators
    assert result.op == "gelu.default"
    assert result.status is Status.PASSED, result.reason
    assert result.tests >= 1
