"""Bounded retries for provider calls: transport errors only, never auth or other 4xx.

Contract: `call_with_retries(call, cfg, classify, api=...)` runs `call()` at most
`cfg.num_retries + 1` times and returns `(result, attempts)`. `classify(exc)` turns an SDK
exception into a `Failure` (or None for an exception that is not an API failure at all, which
propagates unchanged: a bug must not look like an outage). Only failures marked retryable are
retried: rate limits (429), timeouts and connection errors, and 5xx. Waits grow exponentially
between `cfg.retry_min_wait_s` and `cfg.retry_max_wait_s`; a server's `Retry-After` is honoured
when it fits under the longest wait. A call that still fails raises `CallFailedError` (a
`ProviderError`) whose reason names the status and the server's message, and whose `attempts`
says how many requests were made. The SDKs' own retries must be off (`max_retries=0`) so that
this module is the only place that decides.

Reasons are built from status codes and server messages; a server can echo the key back in its
message, so each provider masks its key out of every Failure (`Failure.scrubbed`), and a final
error does not chain the SDK's exception (whose text is not scrubbed).
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import ModuleType
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from agent.config import ProviderConfig
from agent.providers.base import ProviderError

log = logging.getLogger(__name__)

T = TypeVar("T")

# Server messages can be long HTML error pages; a reason is one readable line.
MAX_MESSAGE_CHARS = 300

_STATUS_WORDS = {
    400: "bad request",
    401: "authentication failed",
    403: "permission denied",
    404: "not found",
    408: "request timeout",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "service unavailable",
    504: "gateway timeout",
    529: "overloaded",
}


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the retry policy sees it."""

    reason: str
    retryable: bool
    retry_after_s: float | None = None

    def scrubbed(self, secret: str | None) -> Failure:
        """The same failure with `secret` (an API key a server echoed back) masked out."""
        if not secret or secret not in self.reason:
            return self
        return replace(self, reason=self.reason.replace(secret, "***"))


class CallFailedError(ProviderError):
    """A call that failed for good; `attempts` counts the requests made, retries included."""

    def __init__(self, reason: str, *, retryable: bool, attempts: int) -> None:
        super().__init__(reason, retryable=retryable)
        self.attempts = attempts


class _Transient(Exception):
    """Carries a retryable Failure through tenacity."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.reason)
        self.failure = failure


def is_retryable_status(status: int) -> bool:
    """429 and 5xx are worth another try; every other status is the request's own fault."""
    return status == 429 or 500 <= status <= 599


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date); None if absent."""
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        value = lower.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def server_message(exc: BaseException) -> str:
    """The server's own words from a Stainless-SDK API error (`error.message` in the body)."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    elif isinstance(body, str) and body.strip():
        return body
    return str(getattr(exc, "message", "") or exc)


def http_failure(api: str, status: int, message: str, headers: Mapping[str, str] | None) -> Failure:
    """A Failure for an HTTP error status, e.g. `openai HTTP 429 (rate limited): slow down`."""
    words = _STATUS_WORDS.get(status)
    label = f"{api} HTTP {status}" + (f" ({words})" if words else "")
    return Failure(
        reason=f"{label}: {one_line(message)}" if message else label,
        retryable=is_retryable_status(status),
        retry_after_s=parse_retry_after(headers) if is_retryable_status(status) else None,
    )


def classify_sdk_error(
    exc: BaseException,
    sdk: ModuleType,
    base_error: type[BaseException],
    *,
    api: str,
    timeout_s: float,
    base_url: str,
) -> Failure | None:
    """Map an exception of the official openai/anthropic SDKs (same error family) to a Failure.

    Timeouts and connection errors are retryable, HTTP statuses as `http_failure` decides, any
    other SDK error (bad response, missing credentials) is not; a non-SDK exception gives None.
    """
    if isinstance(exc, sdk.APITimeoutError):
        return Failure(f"{api}: no answer within {timeout_s:g} s (timeout_s) from {base_url}", True)
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc
        return Failure(f"{api}: cannot connect to {base_url}: {one_line(str(cause))}", True)
    if isinstance(exc, sdk.APIStatusError):
        headers = getattr(getattr(exc, "response", None), "headers", None)
        return http_failure(api, exc.status_code, server_message(exc), headers)
    if isinstance(exc, base_error):
        return Failure(f"{api}: {one_line(str(exc))}", False)
    return None


def _make_wait(cfg: ProviderConfig) -> Callable[[RetryCallState], float]:
    longest = max(cfg.retry_max_wait_s, cfg.retry_min_wait_s)
    backoff = wait_exponential(
        multiplier=cfg.retry_min_wait_s, min=cfg.retry_min_wait_s, max=longest
    )

    def wait(state: RetryCallState) -> float:
        seconds = backoff(state)
        exc = state.outcome.exception() if state.outcome else None
        retry_after = exc.failure.retry_after_s if isinstance(exc, _Transient) else None
        # A server that says when to come back knows better than our guess, within reason.
        if retry_after is not None and retry_after <= longest:
            seconds = max(seconds, retry_after)
        return seconds

    return wait


def _log_retry(api: str, total: int) -> Callable[[RetryCallState], None]:
    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait_s = state.next_action.sleep if state.next_action else 0.0
        log.info(
            "%s: attempt %d/%d failed (%s); retrying in %.1f s",
            api,
            state.attempt_number,
            total,
            exc,
            wait_s,
        )

    return before_sleep


def call_with_retries(
    call: Callable[[], T],
    cfg: ProviderConfig,
    classify: Callable[[BaseException], Failure | None],
    *,
    api: str,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, int]:
    """Run `call` with bounded retries; return (result, attempts) or raise CallFailedError."""
    total = cfg.num_retries + 1
    attempts = 0

    def attempt() -> T:
        nonlocal attempts
        attempts += 1
        try:
            return call()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            if failure.retryable:
                raise _Transient(failure) from exc
            suffix = f" (attempt {attempts} of {total})" if attempts > 1 else ""
            # `from None`: the SDK's own message may echo the key; the reason is scrubbed.
            raise CallFailedError(
                failure.reason + suffix, retryable=False, attempts=attempts
            ) from None

    retrying = Retrying(
        stop=stop_after_attempt(total),
        wait=_make_wait(cfg),
        retry=retry_if_exception_type(_Transient),
        before_sleep=_log_retry(api, total),
        sleep=sleep,
        reraise=True,
    )
    try:
        result = retrying(attempt)
    except _Transient as exc:
        plural = "s" if attempts != 1 else ""
        raise CallFailedError(
            f"{exc.failure.reason} (gave up after {attempts} attempt{plural})",
            retryable=True,
            attempts=attempts,
        ) from None
    return result, attempts
