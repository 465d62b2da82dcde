"""The builtin provider in speed rounds: one-knob variants of its kept file, proposed and judged."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import config, make_parts

from agent.providers.base import OperatorContext
from agent.providers.builtin import BuiltinProvider, variants
from agent.session import RunRequest, Session
from evaluator.cases.testcase import parse_case
from evaluator.naming import kernel_path, op_to_folder
from evaluator.results import OperatorResult, Status, TestResult

SAMPLE = """import triton
_OP = "aten::x.default"
_TILE_WARPS = 4
_BLOCK = 1024  # elements per program
_LONG_TILE = 1024 if _SMALL else 8192
_TILE_ELEMS_CPU = 16384
_ODD_BLOCK = 48
_NUM_STAGES = 1
_SPLIT = True
_WIN_DEBUG_COPY = False
    _INNER_WARPS = 4
"""

CASE = "((T([8, 16], f32),), {})"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_knob_variants_rewrite_one_tuning_constant_at_a_time():
    found = dict(variants.knob_variants(SAMPLE))
    assert list(found) == [
        "_TILE_WARPS 4 -> 8",
        "_TILE_WARPS 4 -> 2",
        "_BLOCK 1024 -> 2048",
        "_BLOCK 1024 -> 512",
        "_LONG_TILE 8192 -> 16384",
        "_LONG_TILE 8192 -> 4096",
        "_NUM_STAGES 1 -> 2",
        "_SPLIT True -> False",
    ]
    assert "_BLOCK = 2048  # elements per program\n" in found["_BLOCK 1024 -> 2048"]
    assert "_LONG_TILE = 1024 if _SMALL else 4096\n" in found["_LONG_TILE 8192 -> 4096"]
    for text in found.values():  # exactly one line differs
        diff = [a for a, b in zip(SAMPLE.splitlines(), text.splitlines(), strict=True) if a != b]
        assert len(diff) == 1


def test_propose_skips_what_was_tried_then_offers_the_writer_s_other_files():
    first = variants.propose(SAMPLE, [])
    assert first is not None and first[0] == "_TILE_WARPS 4 -> 8"
    every = [sha(t) for _, t in variants.knob_variants(SAMPLE)]
    assert variants.propose(SAMPLE, every[:1])[0] == "_TILE_WARPS 4 -> 2"
    alternative = ("writer variant 1", "other file")
    assert variants.propose(SAMPLE, every, [alternative]) == alternative
    assert variants.propose(SAMPLE, every, [("writer variant 0", SAMPLE)]) is None


def test_builtin_provider_answers_a_speed_request_with_a_variant_of_the_kept_file():
    provider = BuiltinProvider()
    op, cases = "relu.default", [parse_case(CASE)]
    first = provider.complete([], OperatorContext(op=op, schema="", cases=cases))
    kept = first.text.split("```python\n", 1)[1].rsplit("```", 1)[0]
    speed = {"round": 1, "best_code": kept, "tried": [sha(kept)]}
    answer = provider.complete(
        [], OperatorContext(op=op, schema="", cases=cases, feedback={"speed": speed})
    )
    assert answer.raw["speed_variant"] == "_TILE_WARPS 4 -> 8"
    code = answer.text.split("```python\n", 1)[1].rsplit("```", 1)[0]
    assert "_TILE_WARPS = 8" in code and code.replace("_TILE_WARPS = 8", "_TILE_WARPS = 4") == kept
    # every knob and writer variant tried: it says so, without code
    tried = [sha(t) for _, t in variants.knob_variants(kept)]
    tried += [sha(t) for _, t in provider._alternatives(op, OperatorContext(op, "", cases))]
    speed["tried"] = tried
    done = provider.complete(
        [], OperatorContext(op=op, schema="", cases=cases, feedback={"speed": speed})
    )
    assert "```" not in done.text and "no untried variant" in done.text


class WarpTimedJudge:
    """Passes every file; a stub GPU timer that finds 8 warps 30% faster, 2 warps slower."""

    def __init__(self) -> None:
        self.files: list[str] = []

    def __call__(self, kernel_file: Path, op: str, cases: list[Any], **kw: Any) -> OperatorResult:
        text = Path(kernel_file).read_text()
        self.files.append(text)
        results = [TestResult(args=c.serialize(), passed=True) for c in cases]
        result = OperatorResult(
            op, op_to_folder(op), Status.PASSED, tests=len(cases), passed=len(cases)
        )
        result.results = results
        if kw.get("measure_performance"):
            speedup = 1.3 if "_TILE_WARPS = 8" in text else 1.0
            speedup = 0.7 if "_TILE_WARPS = 2" in text else speedup
            for t in results:
                t.eager_ms, t.kernel_ms, t.speedup, t.floor_ms = (
                    0.02,
                    0.02 / speedup,
                    speedup,
                    0.001,
                )
            result.geomean_speedup = speedup
        return result


def test_speed_rounds_with_the_builtin_provider_keep_its_faster_variant(tmp_path):
    judge = WarpTimedJudge()
    cfg = config(tmp_path, speed_rounds=3)
    parts = make_parts(
        BuiltinProvider(),
        judge,
        resolve_device=lambda device: "cuda",
        environment_info=lambda device, **_: {"gpu": "stub timer"},
    )
    result = Session(RunRequest(cfg=cfg, mode="generate"), parts).run()
    kept = kernel_path(tmp_path / "kernels", "relu.default").read_text()
    assert "_TILE_WARPS = 8" in kept
    decision = json.loads((result.run_dir / "ops/relu__default/decision.json").read_text())
    speed = decision["speed"]
    assert speed["kept"] == {"worker": 1, "speed_round": 1}
    assert speed["speedup_after"] == pytest.approx(1.3)
    # round 2 tried 16 warps on the new kept file, round 3 went on to the tile size
    outcomes = [h["candidates"][0]["outcome"] for h in speed["history"]]
    assert outcomes[0] == "faster" and "not_faster" in outcomes[1:]


def test_a_knob_variant_of_a_builtin_kernel_passes_the_real_judge(tmp_path):
    from evaluator.config import EvalConfig
    from evaluator.evaluate import judge_candidate

    provider = BuiltinProvider()
    op, cases = "relu.default", [parse_case(CASE)]
    first = provider.complete([], OperatorContext(op=op, schema="", cases=cases))
    kept = first.text.split("```python\n", 1)[1].rsplit("```", 1)[0]
    label, code = variants.propose(kept, [])
    path = tmp_path / "relu__default_implementation_v1.py"
    path.write_text(code)
    result = judge_candidate(path, op, cases, config=EvalConfig(), device="cpu")
    assert result.status == Status.PASSED, result.reason
