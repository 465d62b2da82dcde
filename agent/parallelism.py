"""How many operators a run works on at once: `agent.parallel_ops`, or enough to fill the judges.

Contract: `operators_in_flight(setting, judge_capacity, workers_per_op)` -> int >= 1.
- An int setting is used as given.
- `"auto"`: enough operators that their workers keep every judge slot busy. A worker spends part
  of each round waiting for the provider, so twice the slots' worth of workers are in flight:
  ceil(2 x capacity / workers per operator), at least 2, at most 64. The token and cost budget
  (agent.budget) still stops new provider calls, whatever this number is.
"""

from __future__ import annotations

import math

MAX_OPS = 64


def operators_in_flight(setting: int | str, judge_capacity: int, workers_per_op: int) -> int:
    if setting != "auto":
        return max(1, int(setting))
    wanted = math.ceil(2 * max(1, judge_capacity) / max(1, workers_per_op))
    return max(2, min(MAX_OPS, wanted))
