"""Speed rounds with a stub timing source standing in for the GPU timer.

`TimedMarkerJudge` is the marker judge (tests/agent_fakes.py) plus what only a GPU can give: on a
timed judging (`measure_performance=True`) of a passing file, every test gets a kernel and eager
time whose ratio is the file's `# SPEEDUP: a b ...` marker (the k-th timing of a file takes the
k-th value, the last one repeating, so repeated timings of one kernel can spread like noise), and
a bandwidth floor from `# FLOOR: f` (a share of the kernel time; default 0.1). The device is
reported as "cuda" through the parts seam; nothing else is faked.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import MarkerJudge, QueueProvider, Scripted, config, make_parts

from agent.session import RunRequest, Session
from agent.speed import resolve_speed_rounds
from evaluator.naming import kernel_function_name, kernel_path
from evaluator.results import Status, geomean

OP = "relu.default"
EAGER_MS = 0.02


def timed(verdict: str, speedups: str, note: str, floor: float = 0.1) -> str:
    """A model answer whose file passes or fails and times at `speedups` ("1.0 1.05")."""
    fn = kernel_function_name(OP)
    return (
        f"A kernel ({note}).\n\n```python\n# VERDICT: {verdict}\n# SPEEDUP: {speedups}\n"
        f"# FLOOR: {floor}\n# {note}\ndef {fn}(*args, **kwargs):\n    return None\n```\n"
    )


class TimedMarkerJudge(MarkerJudge):
    def __init__(self) -> None:
        super().__init__()
        self.timings: dict[str, int] = defaultdict(int)
        self.timed_calls = 0

    def __call__(self, kernel_file: Path, op: str, cases: list[Any], **kw: Any):
        result = super().__call__(kernel_file, op, cases, **kw)
        if not kw.get("measure_performance") or result.status != Status.PASSED:
            return result
        text = Path(kernel_file).read_text()
        values = [float(v) for v in text.split("# SPEEDUP:", 1)[1].splitlines()[0].split()]
        floor = float(text.split("# FLOOR:", 1)[1].split()[0])
        k = self.timings[text]
        self.timings[text] += 1
        self.timed_calls += 1
        speedup = values[min(k, len(values) - 1)]
        for t in result.results:
            t.eager_ms, t.kernel_ms, t.speedup = EAGER_MS, EAGER_MS / speedup, speedup
            t.floor_ms = t.kernel_ms * floor
            t.kernel_host_ms, t.eager_host_ms = 0.015, 0.006
        result.geomean_speedup = geomean([t.speedup for t in result.results])
        return result


def gpu_parts(provider: Any, judge: Any, **over: Any):
    """Parts whose device is "cuda": the timed judge stands in for the GPU."""
    return make_parts(
        provider,
        judge,
        resolve_device=lambda device: "cuda",
        environment_info=lambda device, **_: {"gpu": "stub timer"},
        **over,
    )


def run(tmp_path: Path, provider: QueueProvider, judge: Any = None, **agent: Any):
    cfg = config(tmp_path, num_workers=1, max_rounds=2, **agent)
    parts = gpu_parts(provider, judge or TimedMarkerJudge())
    return Session(RunRequest(cfg=cfg, mode="generate", argv=["--test"]), parts).run()


def decision(result) -> dict[str, Any]:
    return json.loads((result.run_dir / "ops/relu__default/decision.json").read_text())


def kept_text(tmp_path: Path) -> str:
    return kernel_path(tmp_path / "kernels", OP).read_text()


def speed_prompts(provider: QueueProvider) -> list[str]:
    return [
        msgs[-1].content
        for msgs in provider.messages.values()
        if "Now make it faster" in msgs[-1].content
    ]


def test_speed_prompt_carries_the_timing_and_a_faster_file_replaces_the_kept_one(tmp_path):
    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "first"), timed("pass", "1.5", "faster")
    )
    result = run(tmp_path, provider, speed_rounds=1)

    (prompt,) = speed_prompts(provider)
    assert "# first" in prompt  # the kept file
    assert "Geomean speedup vs eager: 1.00x" in prompt
    assert "kernel 20.0 us, eager 20.0 us, speedup 1.00x" in prompt
    assert "10% of its bandwidth ceiling (2.0 us)" in prompt
    assert "host time per call: kernel 15.0 us, eager 6.0 us" in prompt
    assert "faster" in kept_text(tmp_path)
    speed = decision(result)["speed"]
    assert speed["kept"] == {"worker": 1, "speed_round": 1}
    assert speed["speedup_before"] == 1.0 and speed["speedup_after"] == 1.5
    assert speed["gain"] == 1.5
    assert "1.000x -> 1.500x" in decision(result)["reason"]
    rdir = result.run_dir / "ops/relu__default/worker_1/speed_round_1"
    files = {"messages.json", "response.md", "candidate.py", "verdict.json", "feedback.md"}
    assert files | {"meta.json"} <= {p.name for p in rdir.iterdir()}
    assert "passed at 1.500x" in (rdir / "feedback.md").read_text()
    assert json.loads((rdir / "meta.json").read_text())["outcome"] == "faster"
    baseline = json.loads(
        (result.run_dir / "ops/relu__default/speed_baseline/meta.json").read_text()
    )
    assert baseline["repeats"] == 2 and baseline["noise"] == 0.0


def test_slower_and_within_noise_files_are_not_kept(tmp_path):
    # The kept kernel times 1.0 then 1.1: 10% noise; 1.08 is within it, 0.8 slower.
    provider = QueueProvider().enqueue(
        OP,
        1,
        timed("pass", "1.0 1.1", "first"),
        timed("pass", "1.08", "within noise"),
        timed("pass", "0.8", "slower"),
    )
    result = run(tmp_path, provider, speed_rounds=2)
    assert "first" in kept_text(tmp_path)
    speed = decision(result)["speed"]
    assert abs(speed["noise"] - 0.1) < 1e-9
    assert speed["threshold"] == speed["noise"]
    assert speed["kept"] is None
    assert [h["candidates"][0]["outcome"] for h in speed["history"]] == ["not_faster"] * 2
    # the second prompt says why the first attempt was not kept
    assert "not faster by more than 10.0%" in speed_prompts(provider)[-1]


def test_a_failing_file_never_replaces_however_fast(tmp_path):
    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "first"), timed("fail", "9.0", "fast but wrong")
    )
    result = run(tmp_path, provider, speed_rounds=1)
    assert "first" in kept_text(tmp_path)
    assert decision(result)["speed"]["history"][0]["candidates"][0]["outcome"] == "failed"


def test_two_rounds_without_gain_stop_the_speed_rounds(tmp_path):
    provider = QueueProvider().enqueue(
        OP,
        1,
        timed("pass", "1.0", "first"),
        timed("pass", "1.0", "same speed"),
        timed("fail", "2.0", "wrong"),
        timed("pass", "3.0", "never asked"),
    )
    result = run(tmp_path, provider, speed_rounds=5)
    speed = decision(result)["speed"]
    assert (speed["rounds"], speed["stopped"]) == (2, "no_gain")
    assert len(speed_prompts(provider)) == 2
    assert "first" in kept_text(tmp_path)


def test_a_kernel_at_its_ceiling_gets_no_speed_round(tmp_path):
    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "at roofline", floor=0.95), timed("pass", "2.0", "unused")
    )
    result = run(tmp_path, provider, speed_rounds=3)
    speed = decision(result)["speed"]
    assert (speed["rounds"], speed["stopped"]) == (0, "at_ceiling")
    assert speed_prompts(provider) == []


def test_the_budget_stops_speed_rounds(tmp_path):
    # 150 tokens a call: the first round spends 150 of 200, the first speed round reaches 300.
    provider = QueueProvider().enqueue(
        OP,
        1,
        timed("pass", "1.0", "first"),
        timed("pass", "1.5", "faster"),
        timed("pass", "3.0", "never asked"),
    )
    result = run(tmp_path, provider, speed_rounds=3, max_tokens=200)
    speed = decision(result)["speed"]
    assert speed["stopped"] == "budget"
    assert len(speed_prompts(provider)) == 1
    assert "faster" in kept_text(tmp_path)
    assert decision(result)["input_tokens"] == 200  # both calls counted


def test_the_fastest_passing_candidate_of_a_round_wins(tmp_path):
    provider = QueueProvider()
    # w1's first answer comes late, so w2 has asked for (and failed) its first round before w1's
    # pass ends the operator's first phase: otherwise w2's first answer could be left for its
    # speed round
    first = Scripted(text=timed("pass", "1.0", "first"), delay_s=0.5)
    provider.enqueue(OP, 1, first, timed("pass", "1.3", "w1 faster"))
    provider.enqueue(OP, 2, timed("fail", "1.0", "w2 wrong"), timed("pass", "1.6", "w2 fastest"))
    cfg = config(tmp_path, num_workers=2, max_rounds=1, speed_rounds=1)
    parts = gpu_parts(provider, TimedMarkerJudge())
    result = Session(RunRequest(cfg=cfg, mode="generate", argv=["--test"]), parts).run()
    assert "w2 fastest" in kept_text(tmp_path)
    assert decision(result)["speed"]["kept"] == {"worker": 2, "speed_round": 1}


def test_no_speed_rounds_on_the_cpu_and_it_is_said_once():
    assert resolve_speed_rounds("auto", "cpu") == (
        0,
        "speed rounds: none on the CPU (kernels are not timed there)",
    )
    assert resolve_speed_rounds(2, "cpu")[0] == 0
    assert resolve_speed_rounds(0, "cpu") == (0, None)
    assert resolve_speed_rounds("auto", "cuda") == (3, None)
    assert resolve_speed_rounds(5, "cuda") == (5, None)


def test_cpu_run_keeps_the_first_passing_file_without_timing(tmp_path):
    provider = QueueProvider().enqueue(OP, 1, timed("pass", "1.0", "first"))
    judge = TimedMarkerJudge()
    cfg = config(tmp_path, num_workers=1, max_rounds=1)
    result = Session(RunRequest(cfg=cfg, mode="generate"), make_parts(provider, judge)).run()
    assert decision(result)["speed"] is None
    assert judge.timed_calls == 0


def test_reports_show_the_speedup_before_and_after_the_speed_rounds(tmp_path):
    from agent_fakes import marker_evaluate

    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "first"), timed("pass", "1.5", "faster")
    )
    cfg = config(tmp_path, num_workers=1, max_rounds=1, speed_rounds=1)
    parts = gpu_parts(provider, TimedMarkerJudge(), evaluate=marker_evaluate)
    result = Session(RunRequest(cfg=cfg, mode="full", argv=["--test"]), parts).run()
    summary = (result.run_dir / "OVERALL_SUMMARY.md").read_text()
    assert "speed rounds, `relu.default`: 1.000x -> 1.500x eager" in summary
    assert "kept speed round 1, worker 1, stopped: rounds_done" in summary
    rows = (result.run_dir / "speed_rounds.csv").read_text().splitlines()
    assert rows[0].startswith("operator,speedup_before,speedup_after,gain")
    assert rows[1].startswith("relu.default,1,1.5,1.5,")


def test_a_replayed_run_repeats_its_speed_rounds(tmp_path):
    from agent.providers.replay import ReplayProvider

    provider = QueueProvider().enqueue(
        OP,
        1,
        timed("pass", "1.0", "first"),
        timed("pass", "1.02", "within noise"),
        timed("pass", "1.5", "faster"),
    )
    recorded = run(tmp_path / "recorded", provider, speed_rounds=2)
    replayed = run(tmp_path / "replayed", ReplayProvider(recorded.run_dir), speed_rounds=2)

    assert "faster" in kept_text(tmp_path / "replayed")
    speed = decision(replayed)["speed"]
    assert [h["candidates"][0]["outcome"] for h in speed["history"]] == ["not_faster", "faster"]
    assert speed["kept"] == {"worker": 1, "speed_round": 2}
    prompt = json.loads(
        (replayed.run_dir / "ops/relu__default/worker_1/speed_round_2/messages.json").read_text()
    )[-1]["content"]
    assert "kernel 20.0 us, eager 20.0 us, speedup 1.00x" in prompt
    assert "not faster by more than 3.0%" in prompt  # what became of round 1's file


def test_the_console_says_what_each_speed_round_did(tmp_path):
    import io

    from rich.console import Console

    from agent.live import RunView

    out = io.StringIO()
    view = RunView(Console(file=out, width=200), live=False)
    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "first"), timed("pass", "1.5", "faster")
    )
    cfg = config(tmp_path, num_workers=1, max_rounds=1, speed_rounds=1)
    parts = gpu_parts(provider, TimedMarkerJudge())
    Session(RunRequest(cfg=cfg, mode="generate"), parts, view).run()
    text = out.getvalue()
    assert "[relu.default] worker 1 speed round 1: faster at 1.500x" in text
    assert "[relu.default] speed rounds: 1.000x -> 1.500x eager (1 round(s), rounds_done)" in text


class FailsWhenTimedJudge(TimedMarkerJudge):
    """The GPU shows what the untimed run did not: the kept file fails its timed judging."""

    def __call__(self, kernel_file: Path, op: str, cases: list[Any], **kw: Any):
        result = super().__call__(kernel_file, op, cases, **kw)
        if kw.get("measure_performance"):
            result.status, result.reason = Status.REJECTED, "rejected: nondeterministic"
        return result


def test_a_kept_kernel_that_fails_its_timed_judging_gets_no_speed_round(tmp_path):
    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "first"), timed("pass", "2.0", "never asked")
    )
    result = run(tmp_path, provider, FailsWhenTimedJudge(), speed_rounds=2)
    speed = decision(result)["speed"]
    assert (speed["rounds"], speed["stopped"]) == (0, "kept_kernel_failed_timed_judging")
    assert speed["baseline_failure"] == "rejected: nondeterministic"
    assert speed_prompts(provider) == []


class FlagsBigSpeedupsJudge(TimedMarkerJudge):
    """The evaluator's own doubt: speedups above 10x carry suspicious_speedup."""

    def __call__(self, kernel_file: Path, op: str, cases: list[Any], **kw: Any):
        result = super().__call__(kernel_file, op, cases, **kw)
        for t in result.results:
            if t.speedup is not None and t.speedup > 10:
                t.flags.append("suspicious_speedup")
        return result


def test_a_speedup_the_evaluator_flags_as_suspicious_is_not_kept(tmp_path):
    provider = QueueProvider().enqueue(
        OP, 1, timed("pass", "1.0", "first"), timed("pass", "40.0", "too good")
    )
    result = run(tmp_path, provider, FlagsBigSpeedupsJudge(), speed_rounds=1)
    assert "first" in kept_text(tmp_path)
    (candidate,) = decision(result)["speed"]["history"][0]["candidates"]
    assert candidate["outcome"] == "suspicious"


@pytest.mark.gpu
def test_speed_rounds_on_the_gpu_with_the_builtin_provider_and_the_real_judge(tmp_path):
    """The whole loop on a GPU: the builtin writer's relu, timed twice for the noise, then its
    knob variants judged and timed in full; the reports carry the before/after."""
    from agent.config import load_config
    from agent.session import Parts

    cfg = load_config(
        None,
        {
            "suite": {"suite": "smoke", "ops": ["relu.default", "add.Tensor"]},
            "kernels_dir": str(tmp_path / "kernels"),
            "log_dir": str(tmp_path / "logs"),
            "device": "cuda",
            "provider": {"name": "builtin"},
            "agent": {"num_workers": 1, "max_rounds": 2, "speed_rounds": 2},
        },
    )
    result = Session(RunRequest(cfg=cfg, mode="full", argv=["--test"]), Parts()).run()
    for folder in ("relu__default", "add__Tensor"):
        d = json.loads((result.run_dir / f"ops/{folder}/decision.json").read_text())
        assert d["status"] == "kept", d["reason"]
        speed = d["speed"]
        assert speed["speedup_before"] is not None, speed
        assert speed["noise"] is not None and speed["noise"] >= 0
        assert speed["speedup_after"] >= speed["speedup_before"]
        assert (result.run_dir / f"ops/{folder}/speed_baseline/verdict_2.json").is_file()
    assert (result.run_dir / "speed_rounds.csv").is_file()
    assert "speed rounds, `relu.default`" in (result.run_dir / "OVERALL_SUMMARY.md").read_text()
