"""What a model server that is down for a while costs a run, with the shipped retry settings.

    python benchmarks/outage_recovery.py [--down-s 30] [--provider openai|anthropic]

Starts the tests' local model server (tests/llm_server.py) down, brings it back after `--down-s`
seconds, and runs `python -m agent.run` (one worker, one round, relu.default, the real evaluator on
the CPU) with every [provider] key at its default except the model. Prints the exit code, the wall
time, the operator's decision, the round folders (`round_1.failedK` are calls that got no answer)
and each one's attempts. A run that loses nothing keeps the kernel in round 1 of 1.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported; a GPU is not needed

from agent_fakes import make_parts  # noqa: E402
from llm_server import AnthropicWire, FakeAPI, OpenAIWire  # noqa: E402
from rich.console import Console  # noqa: E402
from test_model_servers import Script, good, judged_evaluate  # noqa: E402

from agent.run import main  # noqa: E402


def run(down_s: float, wire: OpenAIWire | AnthropicWire) -> None:
    from evaluator.evaluate import close_sandboxes, judge_candidate

    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(var, None)
    api = FakeAPI()
    os.environ.update(wire.env(api.url))
    api.respond = Script(wire).then(good("relu.default"))
    tmp = Path(tempfile.mkdtemp(prefix="outage_"))
    config = tmp / "provider.toml"
    config.write_text('[provider]\nmodel = "test-model"\n')
    api.go_down()
    started = time.monotonic()
    threading.Timer(down_s, api.come_back).start()
    parts = make_parts(
        None, judge_candidate, evaluate=judged_evaluate, close_sandboxes=close_sandboxes
    )
    code = main(
        [
            "--config", str(config), "--provider", wire.name, "--ops", "relu.default",
            "--num-workers", "1", "--max-rounds", "1", "--generate-only",
            "--kernels-dir", str(tmp / "kernels"), "--log-dir", str(tmp / "logs"),
            "--device", "cpu", "--quiet",
        ],
        parts=parts,
        console=Console(file=io.StringIO()),
    )  # fmt: skip
    wall = time.monotonic() - started
    api.close()
    (run_dir,) = (tmp / "logs").iterdir()
    worker = run_dir / "ops/relu__default/worker_1"
    decision = json.loads((run_dir / "ops/relu__default/decision.json").read_text())
    rounds = {
        p.name: json.loads((p / "meta.json").read_text())["attempts"]
        for p in sorted(worker.iterdir())
    }
    print(
        f"{wire.name}: server down {down_s:g} s: exit {code}, wall {wall:.1f} s, "
        f"{decision['status']} in round {decision['round']} of 1; attempts per folder {rounds}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--down-s", type=float, default=30.0)
    parser.add_argument("--provider", choices=["openai", "anthropic"], default="openai")
    args = parser.parse_args()
    run(args.down_s, OpenAIWire() if args.provider == "openai" else AnthropicWire())
