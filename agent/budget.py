"""A run's spending: tokens and estimated cost, shared by every worker thread.

Contract:
- `charge(input_tokens, output_tokens, cost_usd)` adds one provider call's usage (thread-safe).
  `cost_usd=None` means the price of the model is unknown: tokens still count, the cost total
  is then marked incomplete (`cost_known` False) rather than silently treated as free.
- `allow_call()` is asked before every provider call. Once `max_tokens` or `max_cost_usd` is
  reached it answers False for good, and the first time it does, `on_exhausted(reason)` runs
  once (the run logs a `budget_stop` event and says so on the console). Calls already in flight
  are not stopped: the limit stops *new* calls, so a run can overshoot by what was in flight.
- A resumed run starts from what the earlier part of the run spent (`tokens=`, `cost_usd=`,
  `cost_known=`).
- `cost_text(cost_usd, known)` is how a cost is shown to a person: "$0.0123", "unpriced" when no
  call had a price (a local model), "$0.0123 + unpriced" when some had none.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def cost_text(cost_usd: float | None, known: bool = True) -> str:
    """A cost for the console and reports; an unknown price is "unpriced", never "$0"."""
    cost = float(cost_usd or 0.0)
    if known:
        return f"${cost:.4f}"
    return "unpriced" if cost == 0 else f"${cost:.4f} + unpriced"


class Budget:
    def __init__(
        self,
        max_tokens: int | None = None,
        max_cost_usd: float | None = None,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        cost_known: bool = True,
        on_exhausted: Callable[[str], None] | None = None,
    ) -> None:
        self.max_tokens = max_tokens
        self.max_cost_usd = max_cost_usd
        self.on_exhausted = on_exhausted
        self._lock = threading.Lock()
        self._input_tokens = input_tokens
        self._output_tokens = output_tokens
        self._cost_usd = cost_usd
        self._cost_known = cost_known
        self._calls = 0
        self._stop_reason: str | None = None

    def charge(self, input_tokens: int, output_tokens: int, cost_usd: float | None) -> None:
        """Add one call's usage; negative counts from a confused API are treated as zero."""
        with self._lock:
            self._calls += 1
            self._input_tokens += max(0, int(input_tokens))
            self._output_tokens += max(0, int(output_tokens))
            if cost_usd is None:
                self._cost_known = False
            else:
                self._cost_usd += max(0.0, float(cost_usd))

    def _reason_locked(self) -> str | None:
        tokens = self._input_tokens + self._output_tokens
        if self.max_tokens is not None and tokens >= self.max_tokens:
            return f"token budget reached: {tokens} tokens used, max_tokens = {self.max_tokens}"
        if self.max_cost_usd is not None and self._cost_usd >= self.max_cost_usd:
            return (
                f"cost budget reached: ${self._cost_usd:.4f} estimated, "
                f"max_cost_usd = {self.max_cost_usd}"
            )
        return None

    def allow_call(self) -> bool:
        """True while a new provider call may start; False (forever) once a limit is reached."""
        announce: str | None = None
        with self._lock:
            if self._stop_reason is not None:
                return False
            reason = self._reason_locked()
            if reason is None:
                return True
            self._stop_reason = announce = reason
        # Outside the lock: the callback writes events and may take a while.
        if self.on_exhausted is not None:
            self.on_exhausted(announce)
        return False

    @property
    def stop_reason(self) -> str | None:
        """Why new calls are refused, or None while they are allowed."""
        with self._lock:
            return self._stop_reason

    @property
    def tokens(self) -> int:
        with self._lock:
            return self._input_tokens + self._output_tokens

    @property
    def cost_usd(self) -> float:
        with self._lock:
            return self._cost_usd

    def snapshot(self) -> dict[str, Any]:
        """Totals for run.json and the summary."""
        with self._lock:
            return {
                "calls": self._calls,
                "input_tokens": self._input_tokens,
                "output_tokens": self._output_tokens,
                "tokens": self._input_tokens + self._output_tokens,
                "cost_usd": round(self._cost_usd, 6),
                "cost_known": self._cost_known,
                "max_tokens": self.max_tokens,
                "max_cost_usd": self.max_cost_usd,
                "stopped": self._stop_reason,
            }
