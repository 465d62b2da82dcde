"""ProviderHealth: failures in a row across the run, the wait for a server that went away, the stop."""

from __future__ import annotations

import threading
import time

from agent.providers.health import ProviderHealth


def test_failures_below_the_limit_allow_calls_and_a_success_resets_the_count():
    health = ProviderHealth(3)
    for _ in range(2):
        health.failed("refused", True)
    assert health.allow_call()
    health.succeeded()
    for _ in range(2):
        health.failed("refused", True)
    assert health.allow_call() and health.stop_reason is None


def test_a_failure_that_is_not_an_outage_stops_at_the_limit_without_waiting():
    stops: list[str] = []
    probes: list[int] = []
    health = ProviderHealth(
        2, outage_wait_s=30, probe=lambda: probes.append(1) or True, on_stop=stops.append
    )
    health.failed("openai HTTP 401 (authentication failed): bad key", False)
    health.failed("openai HTTP 401 (authentication failed): bad key", False)
    started = time.monotonic()
    assert not health.allow_call()
    assert time.monotonic() - started < 1 and probes == []
    assert stops == [health.stop_reason]
    assert "2 provider calls in a row failed; the last: openai HTTP 401" in stops[0]
    assert not health.allow_call() and len(stops) == 1  # said once


def test_an_outage_waits_for_the_server_and_lets_calls_go_on_when_it_is_back():
    back_at = time.monotonic() + 0.3
    waits: list[str] = []
    health = ProviderHealth(
        2,
        outage_wait_s=5,
        probe_interval_s=0.05,
        probe=lambda: time.monotonic() >= back_at,
        on_wait=waits.append,
    )
    before = health.epoch()
    health.failed("cannot connect", True)
    health.failed("cannot connect", True)
    assert health.allow_call()
    assert time.monotonic() >= back_at and len(waits) == 1
    # A call that started before the server came back says nothing about it now.
    health.failed("cannot connect", True, before)
    assert health.allow_call()
    health.succeeded()
    assert health.consecutive_failures == 0


def test_the_server_back_then_failing_again_stops_the_run():
    health = ProviderHealth(2, outage_wait_s=5, probe_interval_s=0.01, probe=lambda: True)
    health.failed("HTTP 503", True)
    health.failed("HTTP 503", True)
    assert health.allow_call()  # the probe answered: one more try
    health.failed("HTTP 503", True, health.epoch())
    assert not health.allow_call()
    assert "answered a probe, then failed again" in (health.stop_reason or "")


def test_a_server_still_down_after_the_wait_stops_the_run_with_the_wait_named():
    health = ProviderHealth(1, outage_wait_s=0.2, probe_interval_s=0.05, probe=lambda: False)
    health.failed("openai: cannot connect to http://127.0.0.1:9/v1: Connection refused", True)
    started = time.monotonic()
    assert not health.allow_call()
    assert 0.2 <= time.monotonic() - started < 2
    assert "did not come back within 0.2 s (outage_wait_s)" in (health.stop_reason or "")
    assert "Connection refused" in (health.stop_reason or "")


def test_an_interrupt_ends_the_wait_without_stopping_the_run():
    cancel = threading.Event()
    health = ProviderHealth(1, outage_wait_s=30, probe_interval_s=0.05, probe=lambda: False)
    health.failed("refused", True)
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    assert not health.allow_call(cancel)
    assert time.monotonic() - started < 2 and health.stop_reason is None


def test_threads_waiting_for_one_probe_share_its_answer():
    probes: list[int] = []

    def probe() -> bool:
        probes.append(1)
        time.sleep(0.2)
        return True

    health = ProviderHealth(1, outage_wait_s=5, probe_interval_s=0.05, probe=probe)
    health.failed("refused", True)
    answers: list[bool] = []
    threads = [
        threading.Thread(target=lambda: answers.append(health.allow_call())) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [True] * 4 and len(probes) == 1
