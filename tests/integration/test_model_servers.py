"""The whole loop against a local model server that misbehaves the way real ones do.

`python -m agent.run` (its `main`) with `--provider openai` / `--provider anthropic` talks over
real HTTP to tests/llm_server.py, scripted to: refuse connections for a while, then come back;
answer 400 "context too long" to a request over its window; cut an answer off at the output
limit; die for good, then come back for `--resume`. The answers carry the builtin writer's real
kernels (or a wrong one), judged by the real evaluator in its sandbox on the CPU (Triton's
interpreter): rounds pass or fail for real. Each run is one worker on one or two small operators.
"""

from __future__ import annotations

import functools
import io
import json
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from agent_fakes import fake_select, make_parts
from llm_server import AnthropicWire, FakeAPI, OpenAIWire, Reply
from rich.console import Console

from agent.config import ProviderConfig
from agent.extract import extract_candidate
from agent.providers.base import OperatorContext
from agent.providers.registry import make_provider
from agent.run import EXIT_PROVIDER, main
from evaluator.naming import kernel_function_name, kernel_path
from evaluator.reports.runfolder import read_events

pytestmark = pytest.mark.slow

PROVIDER_TOML = """
[provider]
model = "test-model"
timeout_s = 10.0
num_retries = 1
retry_min_wait_s = 0.01
retry_max_wait_s = 0.02
max_output_tokens = 1024
max_consecutive_failures = 2
outage_wait_s = {outage_wait_s}
probe_interval_s = 0.1
"""


@functools.cache
def builtin_code(op: str) -> str:
    """The builtin writer's kernel file for `op` (it passes the evaluator)."""
    provider, _ = make_provider(ProviderConfig(name="builtin"))
    (oc,) = fake_select(ops=[op]).ops
    context = OperatorContext(op=op, schema="", cases=oc.cases, worker=1, round=1)
    return extract_candidate(provider.complete([], context).text, op)


def good(op: str) -> str:
    return f"Here is the kernel.\n\n```python\n{builtin_code(op)}```\n"


def wrong(op: str, ramble_chars: int = 0) -> str:
    """A file the evaluator rejects (no Triton kernel runs), after `ramble_chars` of musing."""
    musing = ("Let me think about the memory layout once more. " * 1000)[:ramble_chars]
    fn = kernel_function_name(op)
    return f"{musing}\n\n```python\ndef {fn}(*args, **kwargs):\n    return args[0]\n```\n"


class Script:
    """The server's behaviour: answers in order, an optional context window, dead or alive."""

    def __init__(self, wire: Any, window: int | None = None) -> None:
        self.wire = wire
        self.window = window
        self.answers: deque[Any] = deque()
        self.dead = False

    def tokens(self, body: dict[str, Any]) -> int:
        return -(-self.wire.prompt_chars(body) // 4)  # this server: 4 characters a token

    def __call__(self, request: dict[str, Any]) -> Reply:
        body = request["json"]
        prompt, limit = self.tokens(body), self.wire.max_tokens(body)
        if self.dead:
            return self.wire.error(503, "the server is shutting down")
        if self.window is not None and prompt + limit > self.window:
            return self.wire.too_long(self.window, prompt, limit)
        if not self.answers:
            return self.wire.error(500, "unscripted request")
        item = self.answers.popleft()
        if callable(item):
            return item(request)
        text, truncated = item
        reply = self.wire.truncated if truncated else self.wire.ok
        return reply(text, prompt, min(limit, len(text) // 4 + 1))

    def then(self, text: str, *, truncated: bool = False) -> Script:
        self.answers.append((text, truncated))
        return self


@pytest.fixture(params=[OpenAIWire(), AnthropicWire()], ids=["openai", "anthropic"])
def wire(request: pytest.FixtureRequest) -> Any:
    return request.param


@pytest.fixture
def api(wire: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    server = FakeAPI()
    for key, value in wire.env(server.url).items():
        monkeypatch.setenv(key, value)
    yield server
    server.close()


def judged_evaluate(kernels_dir: Path, *, ops=None, run_dir=None, device="cpu", config=None, **_):
    """evaluate() over the same small cases the run generated for, with the real judge."""
    from evaluator.evaluate import judge_candidate
    from evaluator.reports.report import Report, write_reports
    from evaluator.results import OperatorResult, Status

    results = []
    for oc in fake_select(ops=ops).ops:
        path = kernel_path(kernels_dir, oc.op)
        if path.exists():
            results.append(judge_candidate(path, oc.op, oc.cases, config=config, device="cpu"))
        else:
            results.append(OperatorResult(oc.op, path.parent.name, Status.MISSING, tests=1))
    report = Report(run={}, operators=results, excluded=[], suite="fake", device=device)
    write_reports(run_dir, report)
    return report


def cli(args: list[str], out: io.StringIO | None = None) -> int:
    from evaluator.evaluate import close_sandboxes, judge_candidate

    parts = make_parts(
        None, judge_candidate, evaluate=judged_evaluate, close_sandboxes=close_sandboxes
    )
    return main(args, parts=parts, console=Console(file=out or io.StringIO(), width=200))


def argv(tmp: Path, wire: Any, ops: list[str], max_rounds: int, outage_wait_s: float = 10.0):
    config = tmp / "provider.toml"
    config.write_text(PROVIDER_TOML.format(outage_wait_s=outage_wait_s))
    return [
        "--config", str(config), "--provider", wire.name, "--ops", ",".join(ops),
        "--num-workers", "1", "--max-rounds", str(max_rounds), "--parallel-ops", "1",
        "--kernels-dir", str(tmp / "kernels"), "--log-dir", str(tmp / "logs"), "--device", "cpu",
        "--quiet",
    ]  # fmt: skip


def come_back_after_wait(api: FakeAPI, logs: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = [e["event"] for d in logs.glob("run_*") for e in read_events(d)]
        if "provider_wait" in events:
            time.sleep(0.5)
            break
        time.sleep(0.05)
    api.come_back()


def run_dir(tmp: Path) -> Path:
    (only,) = (tmp / "logs").iterdir()
    return only


def decision(folder: Path, op_folder: str) -> dict[str, Any]:
    return json.loads((folder / "ops" / op_folder / "decision.json").read_text())


def meta(folder: Path, op_folder: str, name: str) -> dict[str, Any]:
    return json.loads((folder / "ops" / op_folder / "worker_1" / name / "meta.json").read_text())


def test_a_server_that_refuses_connections_then_comes_back_costs_no_round(
    tmp_path: Path, wire: Any, api: FakeAPI
):
    api.respond = Script(wire).then(good("relu.default"))
    api.go_down()
    # Back half a second after the run starts waiting for it (not before: the outage must bite).
    back = threading.Thread(target=come_back_after_wait, args=(api, tmp_path / "logs"), daemon=True)
    back.start()
    code = cli(argv(tmp_path, wire, ["relu.default"], max_rounds=1) + ["--generate-only"])
    folder = run_dir(tmp_path)
    assert code == 0
    assert decision(folder, "relu__default")["status"] == "kept"
    assert decision(folder, "relu__default")["round"] == 1  # the only round allowed
    failed = sorted((folder / "ops/relu__default/worker_1").glob("round_1.failed*"))
    assert len(failed) == 2  # max_consecutive_failures, then the wait for the server
    assert "cannot connect" in meta(folder, "relu__default", failed[0].name)["error"]
    assert meta(folder, "relu__default", failed[0].name)["attempts"] == 2  # num_retries + 1
    events = [e["event"] for e in read_events(folder)]
    assert "provider_wait" in events and "provider_stop" not in events


def test_context_too_long_shrinks_the_conversation_and_the_next_call_succeeds(
    tmp_path: Path, wire: Any, api: FakeAPI
):
    # Round 1 rambles (about 10,000 tokens) and is wrong; round 2's whole conversation would
    # not fit the 6,000-token window.
    script = Script(wire, window=6000)
    api.respond = script.then(wrong("relu.default", ramble_chars=40_000)).then(good("relu.default"))
    code = cli(argv(tmp_path, wire, ["relu.default"], max_rounds=2) + ["--generate-only"])
    folder = run_dir(tmp_path)
    assert code == 0
    assert decision(folder, "relu__default")["round"] == 2
    bodies = [r["json"] for r in api.requests]
    assert len(bodies) == 3  # round 1, round 2 refused (400), round 2 smaller
    assert script.tokens(bodies[1]) > 6000 >= script.tokens(bodies[2]) + wire.max_tokens(bodies[2])
    second = meta(folder, "relu__default", "round_2")
    assert second["attempts"] == 2 and second["outcome"] == "passed"
    assert second["request"]["messages_left_out"] == 1
    assert "context" in second["request"]["shrunk_after"]


def test_an_answer_cut_off_at_the_output_limit_is_no_code_and_the_next_prompt_asks_for_less(
    tmp_path: Path, wire: Any, api: FakeAPI
):
    cut = "Here is the file:\n\n```python\nimport torch\nimport triton\n\n@triton.jit\ndef _k("
    api.respond = Script(wire).then(cut, truncated=True).then(good("relu.default"))
    api.get_routes["/props"] = {"default_generation_settings": {"n_ctx": 32768}}  # llama.cpp
    out = io.StringIO()
    code = cli(argv(tmp_path, wire, ["relu.default"], max_rounds=2) + ["--generate-only"], out)
    folder = run_dir(tmp_path)
    assert code == 0
    if wire.name == "openai":
        assert "context window: 32,768 tokens (server /props n_ctx)" in out.getvalue()
    else:  # the Messages API does not report it, and test-model is in no table
        assert "context window: unknown" in out.getvalue()
    first = meta(folder, "relu__default", "round_1")
    assert first["outcome"] == "no_code"
    assert first["error"] == "no usable kernel in the answer: answer truncated at max_output_tokens"
    assert first["truncated"] is True
    assert first["finish_reason"] == ("length" if wire.name == "openai" else "max_tokens")
    second_prompt = api.requests[1]["json"]["messages"][-1]["content"]
    assert "Write a shorter file" in second_prompt and "```python\n```" not in second_prompt
    assert meta(folder, "relu__default", "round_2")["finish_reason"] in ("stop", "end_turn")
    assert decision(folder, "relu__default")["status"] == "kept"


def test_a_server_that_dies_stops_the_run_with_exit_3_and_resume_finishes_it(
    tmp_path: Path, wire: Any, api: FakeAPI
):
    script = Script(wire)

    def die(request: dict[str, Any]) -> Reply:
        script.dead = True
        threading.Thread(target=api.go_down, daemon=True).start()
        return wire.error(503, "the server is shutting down")

    script.then(good("relu.default"))
    script.answers.append(die)
    api.respond = script
    ops = ["relu.default", "add.Tensor"]
    code = cli(argv(tmp_path, wire, ops, max_rounds=2, outage_wait_s=0.5))
    folder = run_dir(tmp_path)
    assert code == EXIT_PROVIDER
    assert decision(folder, "relu__default")["status"] == "kept"
    assert not (folder / "ops/add__Tensor/decision.json").exists()
    run = json.loads((folder / "run.json").read_text())
    assert run["outcomes"]["add.Tensor"] == "provider_stopped"
    assert "did not come back within 0.5 s" in run["provider_stop"]
    results = json.loads((folder / "atenforge_results.json").read_text())
    assert {o["op"]: o["status"] for o in results["operators"]} == {
        "relu.default": "passed",
        "add.Tensor": "missing",
    }

    seen = len(api.requests)
    script.dead = False
    script.then(good("add.Tensor"))
    api.come_back()
    assert cli(["--resume", str(folder), "--quiet"]) == 0
    resumed = api.requests[seen:]
    assert len(resumed) == 1 and "add.Tensor" in json.dumps(resumed[0]["json"])
    assert decision(folder, "add__Tensor")["status"] == "kept"
    results = json.loads((folder / "atenforge_results.json").read_text())
    assert {o["status"] for o in results["operators"]} == {"passed"}
