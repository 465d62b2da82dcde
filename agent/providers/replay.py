"""The `replay` provider: answers from a recorded run folder, to reproduce a run and for tests.

Contract: `ReplayProvider(run_dir)` answers the call for `context.op`, worker `context.worker`,
round `context.round` (both start at 1) with the text of
`run_dir/ops/<folder>/worker_<w>/round_<r>/response.md`, or of `speed_round_<r>/`
when the context asks for a speed round (agent.speed). Tokens and the model name come
from that round's `meta.json` when present, so budgets behave as in the recorded run. A round that
was recorded as a failed call (no response; `meta.json` with outcome `provider_error` and its
`error`) fails again with that error; a round that was never recorded raises
`ProviderError("replay has no recorded response for <op> worker w round r in <dir>")`.
It never makes an answer up.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from agent.messages import PROVIDER_ERROR
from agent.providers.base import Completion, Message, OperatorContext, ProviderError
from evaluator.naming import normalize_op, op_to_folder


class ReplayProvider:
    name = "replay"

    def __init__(self, run_dir: Path | str, *, model: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.model = model or "replay"
        self.prices: dict[str, Any] = {}  # a replayed call costs nothing now

    def round_dir(self, op: str, worker: int, round_: int, *, speed: bool = False) -> Path:
        name = f"speed_round_{round_}" if speed else f"round_{round_}"  # agent.speed's rounds
        return self.run_dir / "ops" / op_to_folder(op) / f"worker_{worker}" / name

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        start = time.monotonic()
        op = normalize_op(context.op)
        speed = bool((context.feedback or {}).get("speed"))
        where = self.round_dir(op, context.worker, context.round, speed=speed)
        meta = _read_meta(where / "meta.json")
        response = where / "response.md"
        if not response.is_file():
            # Only a call that failed for good is replayed as a failure; a round cut short
            # (cancelled, interrupted) says nothing about what the provider would have answered.
            if meta.get("outcome") == PROVIDER_ERROR and meta.get("error"):
                raise ProviderError(f"{meta['error']} (replayed from {where})")
            raise ProviderError(
                f"replay has no recorded response for {op} worker {context.worker} "
                f"round {context.round} in {self.run_dir}"
            )
        text = response.read_text(encoding="utf-8")
        return Completion(
            text=text,
            model=str(meta.get("model") or self.model),
            input_tokens=_int(meta.get("input_tokens")),
            output_tokens=_int(meta.get("output_tokens")),
            latency_s=time.monotonic() - start,
            attempts=1,
            raw={"replayed_from": str(where)},
        )


def _read_meta(path: Path) -> dict[str, Any]:
    """A round's meta.json, or {} when absent or unreadable (tokens then count as 0)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
