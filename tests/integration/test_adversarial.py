"""Hostile kernels against the real evaluator on the CPU: each gets its status and flag
(tests/fixtures/kernels/adversarial/EXPECTED.json; each file's docstring names the exploit and the
property that stops it)."""

from __future__ import annotations

import json

import pytest
from layout import FIXTURES

from evaluator.cases.hidden_cases import hidden_sets
from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.judging.sandbox import Sandbox
from evaluator.results import Status, flag_name

ADVERSARIAL = FIXTURES / "kernels" / "adversarial"
EXPECTED = json.loads((ADVERSARIAL / "EXPECTED.json").read_text())
SHOWN = [parse_case("((T([37, 129], f32),), {})"), parse_case("((T([64, 128], f32),), {})")]
# as the final evaluation judges: the shown cases and a hidden set no prompt showed
CASES = SHOWN + hidden_sets("relu.default", SHOWN, [], 2, "adversarial")[1]
_EITHER = {"wrong_values": {"wrong_values", "nan_mismatch"}}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory):
    cfg = EvalConfig()
    cfg.sandbox.test_timeout_s = 30
    with Sandbox(cfg, "cpu", scratch_root=tmp_path_factory.mktemp("adv")) as box:
        yield box


def test_every_adversarial_kernel_has_an_expectation() -> None:
    files = sorted(p.name for p in ADVERSARIAL.glob("*.py"))
    assert files == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_adversarial_kernel_gets_expected_status_and_flag(sandbox: Sandbox, name: str) -> None:
    expected = EXPECTED[name]
    res = sandbox.judge(ADVERSARIAL / name, "relu.default", CASES)
    assert res.status == Status(expected["status"]), (name, res.status, res.flags, res.reason)
    allowed = _EITHER.get(expected["flag"], {expected["flag"]})
    assert {flag_name(f) for f in res.flags} & allowed, (name, res.flags, res.reason)


def test_honest_kernel_survives_ghost_replay(sandbox: Sandbox) -> None:
    """The honest relu passes: with its launches turned off, its output stays poisoned."""
    honest = FIXTURES / "kernels/corpus/relu__default/relu__default_implementation_v1.py"
    res = sandbox.judge(honest, "relu.default", CASES)
    assert res.status is Status.PASSED, (res.flags, res.reason)
