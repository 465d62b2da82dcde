"""How many operators a run works on at once, and running one operator's workers side by side.

Contract: `operators_in_flight(setting, judge_capacity, workers_per_op)` -> int >= 1:
`agent.parallel_ops`, or enough operators to fill the judges.
- An int setting is used as given.
- `"auto"`: enough operators that their workers keep every judge slot busy. A worker spends part
  of each round waiting for the provider, so twice the slots' worth of workers are in flight:
  ceil(2 x capacity / workers per operator), at least 2, at most 64. The token and cost budget
  (agent.budget) still stops new provider calls, whatever this number is.

`run_side_by_side(jobs, on_error)` runs each named job in its own daemon thread and waits for all
of them. A job that raises calls `on_error(exc)` in its own thread (the callers cancel the other
jobs there, so they stop early) and the first such exception is raised again once all have ended.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping

MAX_OPS = 64


def operators_in_flight(setting: int | str, judge_capacity: int, workers_per_op: int) -> int:
    if setting != "auto":
        return max(1, int(setting))
    wanted = math.ceil(2 * max(1, judge_capacity) / max(1, workers_per_op))
    return max(2, min(MAX_OPS, wanted))


def run_side_by_side(
    jobs: Mapping[str, Callable[[], None]], on_error: Callable[[BaseException], None]
) -> None:
    errors: list[BaseException] = []

    def body(job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # re-raised below, once every job has ended
            errors.append(exc)
            on_error(exc)

    threads = [
        threading.Thread(target=body, args=(job,), name=name, daemon=True)
        for name, job in jobs.items()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
