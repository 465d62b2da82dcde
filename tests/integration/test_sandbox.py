"""The sandbox: isolation, timeouts, fault accounting, secret stripping, and per-candidate cost."""

from __future__ import annotations

import os
import textwrap
import threading
import time
from pathlib import Path

import pytest

from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.judging.sandbox import Sandbox, clean_env
from evaluator.results import Flag, Status, flag_name

RELU = textwrap.dedent(
    '''
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)

    def relu__default_kernel_impl(x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _relu[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
    '''
)

CASES = [parse_case("((T([37, 19], f32),), {})"), parse_case("((T([300], f32),), {})")]


def _write(tmp_path: Path, body: str, name: str = "relu__default_implementation_v1.py") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory):
    cfg = EvalConfig()
    cfg.sandbox.test_timeout_s = 8
    cfg.sandbox.operator_timeout_s = 60
    box = Sandbox(cfg, "cpu", scratch_root=tmp_path_factory.mktemp("sandbox"))
    yield box
    box.close()


def test_honest_kernel_passes_in_fork_sandbox(sandbox: Sandbox, tmp_path: Path) -> None:
    res = sandbox.judge(_write(tmp_path, RELU), "relu.default", CASES)
    assert res.status is Status.PASSED, res.reason
    assert res.tests == 2 and res.passed == 2
    assert res.geomean_speedup is None  # never a number on the CPU


def test_hang_is_killed_and_finished_tests_keep_results(sandbox: Sandbox, tmp_path: Path) -> None:
    body = RELU.replace("    x = x.contiguous()\n", "    x = x.contiguous()\n    if x.numel() == 300:\n        while True:\n            pass\n")
    start = time.monotonic()
    res = sandbox.judge(_write(tmp_path, body), "relu.default", CASES)
    assert time.monotonic() - start < 30
    assert res.status is Status.ERROR
    assert Flag.TIMEOUT in res.flags
    assert res.results[0].passed and not res.results[1].passed


def test_segfault_costs_only_its_own_verdict(sandbox: Sandbox, tmp_path: Path) -> None:
    body = RELU.replace("    x = x.contiguous()\n", "    import ctypes\n    ctypes.string_at(0)\n")
    res = sandbox.judge(_write(tmp_path, body), "relu.default", CASES)
    assert res.status is Status.ERROR
    assert any(flag_name(f) == Flag.CRASHED for f in res.flags), res.flags
    again = sandbox.judge(_write(tmp_path, RELU, "ok.py"), "relu.default", CASES)
    assert again.status is Status.PASSED


def test_os_exit_in_call_is_exit_called(sandbox: Sandbox, tmp_path: Path) -> None:
    body = RELU.replace("    x = x.contiguous()\n", "    import os\n    os._exit(0)\n")
    res = sandbox.judge(_write(tmp_path, body), "relu.default", CASES)
    assert res.status is Status.ERROR
    assert any(flag_name(f) == Flag.EXIT_CALLED for f in res.flags), res.flags


def test_secrets_are_stripped_from_sandbox_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_DB_PASSWORD", "hunter2")
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    env = clean_env("cpu", tmp_path)
    assert "OPENAI_API_KEY" not in env and "MY_DB_PASSWORD" not in env and "HF_TOKEN" not in env
    assert env["TRITON_INTERPRET"] == "1"


def test_cancel_kills_candidate_promptly(sandbox: Sandbox, tmp_path: Path) -> None:
    body = RELU.replace("    x = x.contiguous()\n", "    import time\n    time.sleep(1000)\n")
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    start = time.monotonic()
    res = sandbox.judge(_write(tmp_path, body), "relu.default", CASES, cancel=cancel)
    assert time.monotonic() - start < 6
    assert res.status is Status.ERROR and "cancelled" in res.reason


def test_fresh_mode_gives_same_verdict(tmp_path: Path) -> None:
    cfg = EvalConfig()
    cfg.sandbox.mode = "fresh"
    with Sandbox(cfg, "cpu", scratch_root=tmp_path / "s") as box:
        res = box.judge(_write(tmp_path, RELU), "relu.default", CASES)
    assert res.status is Status.PASSED, res.reason


def test_no_leftover_processes_after_close(tmp_path: Path) -> None:
    cfg = EvalConfig()
    box = Sandbox(cfg, "cpu", scratch_root=tmp_path / "s")
    box.judge(_write(tmp_path, RELU), "relu.default", CASES[:1])
    server = box._server
    assert server is not None
    box.close()
    assert server.proc.poll() is not None
    assert os.path.exists(tmp_path / "s")


BN_CASE = [parse_case("((T([4, 8, 5, 5], f32), T([8], f32), T([8], f32), T([8], f32), T([8], f32), True, 0.1, 1e-05), {})")]


def _builtin_kernel(op: str, cases: list, tmp_path: Path) -> Path:
    from agent.extract import extract_candidate
    from agent.providers.base import OperatorContext
    from agent.providers.builtin import BuiltinProvider

    text = BuiltinProvider().complete([], OperatorContext(op=op, schema="", cases=cases)).text
    path = tmp_path / "bn.py"
    path.write_text(extract_candidate(text, op))
    return path


def test_inputs_eager_updates_in_place_must_match_eager(sandbox: Sandbox, tmp_path: Path) -> None:
    """native_batch_norm updates running stats without an alias annotation: a kernel that does
    the same passes; one that updates them differently fails (not 'input_mutated')."""
    path = _builtin_kernel("native_batch_norm.default", BN_CASE, tmp_path)
    assert sandbox.judge(path, "native_batch_norm.default", BN_CASE).status is Status.PASSED
    src = path.read_text()
    assert "momentum" in src
    path.write_text(src.replace("def _op(", "def _op_inner(", 1) + "\n\ndef _op(*a, **k):\n    a = list(a)\n    a[6] = a[6] * 2\n    return _op_inner(*a, **k)\n")
    res = sandbox.judge(path, "native_batch_norm.default", BN_CASE)
    assert res.status is Status.FAILED, (res.status, res.flags, res.reason)
    assert Flag.WRONG_VALUES in res.flags


def test_reused_output_buffer_is_stale_result(sandbox: Sandbox, tmp_path: Path) -> None:
    """Exploit: compute correctly, but into one buffer per shape, so each call silently
    overwrites what the previous call returned. Property: earlier results must survive."""
    body = RELU.replace(
        "    y = torch.empty_like(x)\n",
        "    global _BUF\n    try:\n        y = _BUF\n    except NameError:\n        y = _BUF = torch.empty_like(x)\n    if y.shape != x.shape:\n        y = _BUF = torch.empty_like(x)\n",
    )
    res = sandbox.judge(_write(tmp_path, body), "relu.default", CASES[:1])
    assert res.status is Status.REJECTED, (res.status, res.flags, res.reason)
    assert Flag.STALE_RESULT in res.flags


def test_sandbox_child_imports_only_torch_triton_numpy_stdlib_and_evaluator() -> None:
    """The process that runs untrusted kernels imports nothing of the agent's stack."""
    import subprocess
    import sys

    code = (
        "import sys, evaluator.judging.sandbox_server, evaluator.judge.verifier, evaluator.judge.timing\n"
        "bad = [m for m in ('pydantic', 'rich', 'jinja2', 'openai', 'anthropic', 'tenacity', 'agent')"
        " if m in sys.modules]\n"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_verdict_lost_to_gpu_memory_is_recognised_for_a_rerun_alone() -> None:
    """Sandboxes share the GPU's memory; a crash or failure that says the memory ran out is run
    again alone (Sandbox.judge on CUDA); other failures and passes are not."""
    from evaluator.judging.verdict import ran_out_of_gpu_memory
    from evaluator.results import OperatorResult, TestResult

    crashed = OperatorResult(
        op="relu.default",
        folder="relu__default",
        status=Status.ERROR,
        reason="the harness failed: torch.AcceleratorError: CUDA error: out of memory",
    )
    assert ran_out_of_gpu_memory(crashed)
    failed = OperatorResult(op="relu.default", folder="relu__default", status=Status.FAILED)
    failed.results = [TestResult(args="()", passed=False, error_msg="cudaErrorMemoryAllocation")]
    assert ran_out_of_gpu_memory(failed)
    failed.results = [TestResult(args="()", passed=False, error_msg="3 of 9 elements differ")]
    assert not ran_out_of_gpu_memory(failed)
    crashed.status = Status.PASSED
    assert not ran_out_of_gpu_memory(crashed)
