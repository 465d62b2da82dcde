"""Optional: two operators against a real llama.cpp server (llama-cpp-python's), started here.

Skipped unless `ATENFORGE_LLAMA_GGUF` names a GGUF model file and llama-cpp-python is installed
with its server extra (`pip install 'llama-cpp-python[server]'`). It checks what no scripted
server can: that a real model's answers, token counts and finish reasons flow through the loop,
every round ends with an outcome and a reason, and the token totals in the round folders, the
events, the decisions and run.json add up.
"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from agent_fakes import fake_select, make_parts
from rich.console import Console

from agent.run import EXIT_OK, main
from evaluator.reports.runfolder import read_events

GGUF = os.environ.get("ATENFORGE_LLAMA_GGUF", "")
CONTEXT_TOKENS = 4096
OPS = ["relu.default", "add.Tensor"]


def _skip_reason() -> str | None:
    if not GGUF:
        return "set ATENFORGE_LLAMA_GGUF to a GGUF model file to run it against a llama.cpp server"
    if not Path(GGUF).is_file():
        return f"ATENFORGE_LLAMA_GGUF={GGUF} is not a file"
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette"):
        if importlib.util.find_spec(module) is None:
            return f"needs llama-cpp-python with its server extra ({module} is not installed)"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_skip_reason() is not None, reason=_skip_reason() or ""),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path: Path):
    port = _free_port()
    log = (tmp_path / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "llama_cpp.server", "--model", GGUF,
            "--n_ctx", str(CONTEXT_TOKENS), "--host", "127.0.0.1", "--port", str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the llama.cpp server did not start; see {log.name}")
                time.sleep(1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_two_operators_against_a_real_llama_cpp_server(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch
):
    from evaluator.evaluate import close_sandboxes, judge_candidate

    monkeypatch.setenv("OPENAI_BASE_URL", server)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    config = tmp_path / "local.toml"
    config.write_text(
        f'[provider]\nmodel = "local"\ncontext_tokens = {CONTEXT_TOKENS}\n'
        "max_output_tokens = 2048\ntimeout_s = 900.0\nnum_retries = 1\n"
    )
    args = [
        "--config", str(config), "--provider", "openai", "--ops", ",".join(OPS),
        "--num-workers", "1", "--max-rounds", "2", "--parallel-ops", "1", "--generate-only",
        "--kernels-dir", str(tmp_path / "kernels"), "--log-dir", str(tmp_path / "logs"),
        "--device", "cpu", "--quiet",
    ]  # fmt: skip
    parts = make_parts(None, judge_candidate, select=fake_select, close_sandboxes=close_sandboxes)
    assert main(args, parts=parts, console=Console(file=io.StringIO())) == EXIT_OK

    (run_dir,) = (tmp_path / "logs").iterdir()
    metas = [json.loads(p.read_text()) for p in run_dir.glob("ops/*/worker_*/round_*/meta.json")]
    assert metas
    for meta in metas:
        assert meta["outcome"] in {"passed", "failed", "no_code", "untestable", "provider_error"}
        assert meta["outcome"] == "passed" or meta["error"], meta
        if meta["outcome"] != "provider_error":
            assert meta["finish_reason"] in ("stop", "length") and meta["attempts"] >= 1
            assert meta["input_tokens"] > 0 and meta["output_tokens"] > 0
            assert meta["request"]["context_tokens"] == CONTEXT_TOKENS

    totals = (sum(m["input_tokens"] for m in metas), sum(m["output_tokens"] for m in metas))
    ends = [e for e in read_events(run_dir) if e["event"] == "round_end"]
    assert totals == (
        sum(e["input_tokens"] for e in ends),
        sum(e["output_tokens"] for e in ends),
    )
    budget = json.loads((run_dir / "run.json").read_text())["budget"]
    assert totals == (budget["input_tokens"], budget["output_tokens"])
    decided = [json.loads(p.read_text()) for p in run_dir.glob("ops/*/decision.json")]
    assert len(decided) == len(OPS)
    assert sum(d["input_tokens"] + d["output_tokens"] for d in decided) == sum(totals)
    assert all(d["cost"] == "unpriced" for d in decided)
