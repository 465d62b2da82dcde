"""Hostile kernels that only show on a GPU, judged by the real evaluator on CUDA with timing:
side streams, timed calls that stop working, results read from freed memory
(tests/fixtures/kernels/adversarial_gpu/EXPECTED.json; each file's docstring names the exploit
and the property that stops it)."""

from __future__ import annotations

import json

import pytest
from layout import FIXTURES

from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.judging.sandbox import Sandbox
from evaluator.results import Status, flag_name

pytestmark = pytest.mark.gpu

ADVERSARIAL = FIXTURES / "kernels" / "adversarial_gpu"
EXPECTED = json.loads((ADVERSARIAL / "EXPECTED.json").read_text())
CASES = [
    parse_case("((T([37, 129], f32),), {})"),
    parse_case("((T([1024, 4096], f32),), {})"),
]
_EITHER = {"wrong_values": {"wrong_values", "nan_mismatch"}}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory):
    cfg = EvalConfig()
    cfg.sandbox.test_timeout_s = 120
    cfg.timing.num_reps = 20
    with Sandbox(cfg, "cuda", scratch_root=tmp_path_factory.mktemp("adv_gpu")) as box:
        yield box


def test_every_gpu_adversarial_kernel_has_an_expectation() -> None:
    assert sorted(p.name for p in ADVERSARIAL.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gpu_adversarial_kernel_gets_expected_status_and_flag(
    sandbox: Sandbox, name: str
) -> None:
    expected = EXPECTED[name]
    res = sandbox.judge(ADVERSARIAL / name, "relu.default", CASES, measure_performance=True)
    assert res.status == Status(expected["status"]), (name, res.status, res.flags, res.reason)
    if expected["flag"] is None:
        assert all(t.speedup is not None for t in res.results), (name, res.results)
        return
    allowed = _EITHER.get(expected["flag"], {expected["flag"]})
    assert {flag_name(f) for f in res.flags} & allowed, (name, res.flags, res.reason)


def test_honest_kernel_is_timed_through_the_runner(sandbox: Sandbox) -> None:
    """The honest relu passes with a speedup per case: timing ran in the runner and its last
    timed output matched the verifier's eager result."""
    honest = FIXTURES / "kernels/corpus/relu__default/relu__default_implementation_v1.py"
    res = sandbox.judge(honest, "relu.default", CASES, measure_performance=True)
    assert res.status is Status.PASSED, (res.flags, res.reason)
    assert all(t.speedup is not None and t.kernel_ms > 0 for t in res.results), res.results
