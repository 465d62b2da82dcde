"""The GPU readers-writer lock: a timer waits for correctness workers, and workers that arrive
while a timer waits queue behind it (no starvation)."""

from __future__ import annotations

import threading
import time

from evaluator.judge.gpu_lock import GpuLock


def test_timer_waits_for_sharers_and_new_sharers_queue_behind_it(tmp_path) -> None:
    base = tmp_path / "gpu.lock"
    order: list[str] = []
    a = GpuLock(base)
    a.share()

    def timer() -> None:
        lock = GpuLock(base)
        lock.exclusive()
        order.append("timer")
        time.sleep(0.3)
        order.append("timer done")
        lock.release()

    def late_worker() -> None:
        lock = GpuLock(base)
        lock.share()
        order.append("late worker")

    t = threading.Thread(target=timer)
    t.start()
    time.sleep(0.2)
    assert order == []  # the timer waits for the worker holding the GPU
    w = threading.Thread(target=late_worker)
    w.start()
    time.sleep(0.2)
    assert order == []  # the late worker queues behind the waiting timer
    a.release()
    t.join(5)
    w.join(5)
    assert order == ["timer", "timer done", "late worker"]
