"""The kernel corpus's fixtures are what they claim, checked without the evaluator.

`tests/fixtures/kernels/corpus/` holds one kernel per operator; `EXPECTED.json` says which verdict
each must get. Here, in this process and in Triton's CPU interpreter, every HONEST kernel (expected
`passed`) is called directly on the cases of `tests/fixtures/corpus_trace.txt` and must match eager
ATen: dtype, shape and values within the strict tolerances, its input untouched, a repeat call
identical, at least one Triton launch and no ATen compute in its wrapper. The adversarial kernels
are never imported here: they segfault, hang, exit or patch torch at import; only the evaluator's
sandbox may run them. The file layout and both trace fixtures are checked too.

The kernels run in Triton's interpreter, which tests/conftest.py turns on without a GPU.
"""

from __future__ import annotations

import filecmp
import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.cases.testcase import CODE_OF_DTYPE, TensorSpec, load_trace
from evaluator.cases.testcase import TestCase as Case  # noqa: E402  (not collected by pytest)
from evaluator.config import CorrectnessConfig
from evaluator.naming import kernel_function_name, kernel_path, op_to_folder
from evaluator.results import ERROR_FLAGS, REJECT_FLAGS, Flag, Status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = FIXTURES / "kernels" / "corpus"
GPU_ONLY = FIXTURES / "kernels" / "gpu_only"
CORPUS_TRACE = FIXTURES / "corpus_trace.txt"
GPU_TRACE = FIXTURES / "gpu_trace.txt"

EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "EXPECTED.json").read_text())
TRACE = load_trace(CORPUS_TRACE)
HONEST = [op for op, e in EXPECTED.items() if e["status"] == Status.PASSED]
HONEST_CASES = [
    pytest.param(op, i, case, id=f"{op}-{i}")
    for op in HONEST
    for i, case in enumerate(TRACE.cases.get(op, []))
]
FLAG_NAMES = {v for k, v in vars(Flag).items() if k.isupper()}

# What a wrapper may dispatch outside a launch: allocation, views and same-dtype layout copies.
NON_COMPUTE = {
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "clone",
    "copy_",
    "_to_copy",
    "contiguous",
    "view",
    "_unsafe_view",
    "reshape",
    "permute",
    "expand",
    "as_strided",
    "t",
    "transpose",
    "detach",
    "alias",
    "set_",
}


# ---------------------------------------------------------------- helpers


def _load_kernel(kernels_dir: Path, op: str) -> Callable[..., Any]:
    path = kernel_path(kernels_dir, op)
    spec = importlib.util.spec_from_file_location(f"corpus_{op_to_folder(op)}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # No __pycache__ inside the fixture dir: a kernels-dir scan would see it as an operator folder.
    previous, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = previous
    return getattr(module, kernel_function_name(op))


def _materialize(value: Any, gen: torch.Generator) -> Any:
    """Seeded signed normal values; strided specs become views of a large enough buffer."""
    if isinstance(value, TensorSpec):
        buffer = torch.randn(max(value.storage_numel(), 1), generator=gen).to(value.dtype)
        if value.stride is None:
            return buffer[: value.numel()].view(value.shape)
        return buffer.as_strided(value.shape, value.stride)
    if isinstance(value, tuple):
        return tuple(_materialize(v, gen) for v in value)
    if isinstance(value, list):
        return [_materialize(v, gen) for v in value]
    if isinstance(value, dict):
        return {k: _materialize(v, gen) for k, v in value.items()}
    return value


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple | list):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _aten(op: str) -> Any:
    name, overload = op.split(".")
    return getattr(getattr(torch.ops.aten, name), overload)


class _Watch(TorchDispatchMode):
    """Counts interpreter launches and records ATen ops dispatched outside them."""

    def __init__(self) -> None:
        super().__init__()
        self.launches = 0
        self.depth = 0
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if self.depth == 0:
            self.ops.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


@contextmanager
def _watched(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Watch]:
    from triton.runtime.interpreter import InterpretedFunction

    watch = _Watch()
    original = InterpretedFunction.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        watch.launches += 1
        watch.depth += 1
        try:
            return original(self, *args, **kwargs)
        finally:
            watch.depth -= 1

    monkeypatch.setattr(InterpretedFunction, "run", run)
    with watch:
        yield watch


# ---------------------------------------------------------------- layout and traces


def test_expected_json_uses_known_statuses_and_flags() -> None:
    for op, entry in EXPECTED.items():
        assert set(entry) == {"status", "flag", "plays"}, op
        status = Status(entry["status"])
        flag = entry["flag"]
        assert flag is None or flag in FLAG_NAMES, f"{op}: unknown flag {flag}"
        if status == Status.REJECTED:
            assert flag in REJECT_FLAGS, op
        if status == Status.ERROR:
            assert flag in ERROR_FLAGS, op
        assert entry["plays"].strip(), op


def test_every_expected_op_has_a_kernel_file_and_every_folder_is_expected() -> None:
    for op in EXPECTED:
        assert kernel_path(CORPUS, op).is_file(), op
    folders = {p.name for p in CORPUS.iterdir() if p.is_dir() and not p.name.startswith("__")}
    assert folders == {op_to_folder(op) for op in EXPECTED}


def test_corpus_trace_parses_and_covers_every_expected_op_with_two_or_more_cases() -> None:
    assert TRACE.errors == []
    assert set(TRACE.cases) == set(EXPECTED)
    for op, cases in TRACE.cases.items():
        assert len(cases) >= 2, op
        for case in cases:
            assert case.total_numel() < 50_000, (op, case.serialize())


def test_trace_fixtures_round_trip_line_by_line() -> None:
    for path in (CORPUS_TRACE, GPU_TRACE):
        trace = load_trace(path)
        assert trace.errors == [], path
        cases_in_file = [
            line.split(",", 1)[1].strip()
            for line in path.read_text().splitlines()
            if line.startswith("cnt:")
        ]
        serialized = [c.serialize() for cases in trace.cases.values() for c in cases]
        assert serialized == cases_in_file, path


def test_gpu_only_fixture_has_its_ops_and_honest_copies_match_the_corpus() -> None:
    expected = json.loads((GPU_ONLY / "EXPECTED.json").read_text())
    trace = load_trace(GPU_TRACE)
    assert list(trace.cases) == list(expected)
    for op, entry in expected.items():
        assert kernel_path(GPU_ONLY, op).is_file(), op
        if entry["status"] == Status.PASSED:
            assert filecmp.cmp(kernel_path(GPU_ONLY, op), kernel_path(CORPUS, op), shallow=False)


def test_trace_has_strided_broadcast_and_off_block_cases() -> None:
    specs = [s for cases in TRACE.cases.values() for c in cases for s in c.tensor_specs()]
    assert any(s.stride is not None for s in TRACE.cases["relu.default"][1].tensor_specs())
    assert any(s.numel() % 128 for s in specs)
    add_shapes = [tuple(s.shape for s in c.tensor_specs()) for c in TRACE.cases["add.Tensor"]]
    assert any(a != b for a, b in add_shapes)
    assert {c.args[1] for c in TRACE.cases["_softmax.default"]} >= {-1, 0}
    assert all(d % 16 for c in TRACE.cases["mm.default"] for d in c.tensor_specs()[0].shape)


# ---------------------------------------------------------------- honest kernels


@pytest.fixture(scope="module")
def honest_kernels() -> dict[str, Callable[..., Any]]:
    return {op: _load_kernel(CORPUS, op) for op in HONEST}


@pytest.mark.parametrize(("op", "index", "case"), HONEST_CASES)
def test_honest_kernel_matches_eager_without_aten_compute(
    op: str,
    index: int,
    case: Case,
    honest_kernels: dict[str, Callable[..., Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gen = torch.Generator().manual_seed(1000 + index)
    args, kwargs = _materialize((case.args, case.kwargs), gen)
    pristine = _clone((args, kwargs))
    expected = _aten(op)(*_clone(args), **_clone(kwargs))

    kernel = honest_kernels[op]
    with _watched(monkeypatch) as watch:
        got = kernel(*args, **kwargs)
    again = kernel(*args, **kwargs)

    assert watch.launches >= 1, "no Triton launch"
    compute = sorted(set(watch.ops) - NON_COMPUTE)
    assert compute == [], f"ATen compute in the wrapper: {compute}"
    for before, after in zip(_tensors(pristine), _tensors((args, kwargs)), strict=True):
        assert torch.equal(before, after), "an input changed"

    assert isinstance(got, torch.Tensor)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.device == expected.device
    tol = CorrectnessConfig().tolerance(CODE_OF_DTYPE[expected.dtype])
    assert tol is not None
    ok = torch.isclose(
        got.double(), expected.double(), atol=tol.atol, rtol=tol.rtol, equal_nan=True
    )
    worst = (got.double() - expected.double()).abs().max().item() if got.numel() else 0.0
    assert bool(ok.all()), f"{int((~ok).sum())} elements off, max abs error {worst}"
    assert torch.allclose(got, again, rtol=0, atol=0, equal_nan=True), "a repeat call differs"
