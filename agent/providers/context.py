"""A request that fits the model's context window: prompt plus answer within `context_tokens`.

Contract: `ContextWindow(tokens, chars_per_token=...)` is shared by one provider's calls
(thread-safe). `fit(messages, max_output_tokens) -> Fitted` returns the messages to send and the
output limit to ask for:
- the first system message, the first user message (the task) and the last message (the latest
  candidate and its feedback) are always kept; the messages between them (earlier answers and
  rounds) are replaced, oldest first, by a one-line note until the rest fits with the full
  `max_output_tokens`; the output limit is then capped to what is left;
- when even the kept messages leave fewer than `MIN_OUTPUT_TOKENS`, `ContextError` says so in one
  line (raise the server's context size, or shorten the prompt);
- with an unknown window the messages go as they are.
Token counts are estimates: characters divided by the lowest characters-per-token ratio seen in
the provider's own counts (`observe(messages, input_tokens)` after each answer), or by the
configured conservative `chars_per_token` before the server has counted anything.

`call_fitted(window, messages, max_output_tokens, send)` does the above for one call.
`overflowed(reason, fitted)` is called when the server answered 400 "context too long": it learns
what it can from the message (the window it names, the prompt tokens it counted) and bounds the
window by the request that failed, so that the next `fit` gives a strictly smaller request. `is_context_overflow(reason)` recognises those messages
(OpenAI, vLLM, llama.cpp, Anthropic wording).
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from agent.providers.base import Message, ProviderError
from agent.providers.retry import CallFailedError

T = TypeVar("T")

MIN_OUTPUT_TOKENS = 256  # an answer shorter than this cannot hold a kernel file
PER_MESSAGE_TOKENS = 8  # role markers and separators of the chat template
LEFT_OUT = "(An earlier answer was left out here to fit the model's context window.)"
SHRINK_ON_OVERFLOW = 0.75  # with no numbers in the error: the window is this much below the request

_OVERFLOW = re.compile(
    r"context length|context window|context size|context_length_exceeded|prompt is too long|"
    r"exceeds? (the )?(available )?context|exceed context limit|too many tokens|n_ctx|"
    r"input (is too long|length exceeds)",
    re.IGNORECASE,
)
_WINDOW_PATTERNS = (
    re.compile(r"maximum context length is (\d+)", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"context (?:length|size|window) (?:of|is) (\d+)", re.IGNORECASE),
    re.compile(r"available context size \((\d+) tokens", re.IGNORECASE),  # llama.cpp
    re.compile(r"n_ctx(?:_slot)?\s*[=:]\s*(\d+)", re.IGNORECASE),  # llama.cpp
    re.compile(
        r"> ?(\d+)(?: tokens)? maximum", re.IGNORECASE
    ),  # Anthropic: 210000 > 200000 maximum
    re.compile(r"exceed context limit: \d+ \+ \d+ > (\d+)", re.IGNORECASE),  # Anthropic
)
_PROMPT_TOKENS = (
    re.compile(r"\((\d+) in the messages", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"prompt is too long: (\d+) tokens", re.IGNORECASE),  # Anthropic
    re.compile(r"exceed context limit: (\d+) \+", re.IGNORECASE),  # Anthropic
    re.compile(r"request \((\d+) tokens\)", re.IGNORECASE),  # llama.cpp
)


class ContextError(ProviderError):
    """The prompt cannot fit the window at all: no request is sent."""


def is_context_overflow(reason: str) -> bool:
    """True when a 400/413's message says the request was too long for the model's context."""
    return bool(_OVERFLOW.search(reason or ""))


def _first_int(patterns: tuple[re.Pattern[str], ...], text: str) -> int | None:
    for pattern in patterns:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


@dataclass
class Fitted:
    messages: list[Message]
    max_output_tokens: int
    input_tokens_est: int
    left_out: int = 0  # messages replaced by the LEFT_OUT note
    window: int | None = None
    notes: dict[str, Any] = field(default_factory=dict)

    def key(self) -> tuple[Any, ...]:
        """What makes two requests the same request."""
        return (tuple((m.role, m.content) for m in self.messages), self.max_output_tokens)

    def summary(self) -> dict[str, Any]:
        """What meta.json records about the request (`request`)."""
        return {
            "context_tokens": self.window,
            "max_output_tokens": self.max_output_tokens,
            "input_tokens_estimate": self.input_tokens_est,
            "messages_left_out": self.left_out,
            **self.notes,
        }


class ContextWindow:
    def __init__(self, tokens: int | None, *, chars_per_token: float = 3.0) -> None:
        self._lock = threading.Lock()
        self._tokens = tokens
        self._default_ratio = chars_per_token
        self._ratio: float | None = None  # lowest chars/token seen in the server's counts

    @property
    def tokens(self) -> int | None:
        with self._lock:
            return self._tokens

    def set_tokens(self, tokens: int | None) -> None:
        with self._lock:
            if tokens is not None and tokens > 0:
                self._tokens = tokens

    def ratio(self) -> float:
        with self._lock:
            return self._ratio if self._ratio is not None else self._default_ratio

    def estimate(self, messages: list[Message]) -> int:
        ratio = self.ratio()
        chars = sum(len(m.content) for m in messages)
        return math.ceil(chars / ratio) + PER_MESSAGE_TOKENS * len(messages)

    def observe(self, messages: list[Message], input_tokens: int) -> None:
        """Learn characters per token from a count the server made of exactly these messages."""
        body = input_tokens - PER_MESSAGE_TOKENS * len(messages)
        if body <= 0:
            return
        ratio = sum(len(m.content) for m in messages) / body
        with self._lock:
            if self._ratio is None or ratio < self._ratio:
                self._ratio = max(0.5, ratio)

    def fit(self, messages: list[Message], max_output_tokens: int) -> Fitted:
        window = self.tokens
        if window is None:
            return Fitted(list(messages), max_output_tokens, self.estimate(messages))
        sent = list(messages)
        left_out = 0
        for i in _droppable(sent):
            if self.estimate(sent) + max_output_tokens <= window:
                break
            if sent[i].content != LEFT_OUT:
                sent[i] = Message(sent[i].role, LEFT_OUT)
                left_out += 1
        estimate = self.estimate(sent)
        room = window - estimate
        if room < MIN_OUTPUT_TOKENS:
            raise ContextError(
                f"the prompt (about {estimate} tokens) leaves less than {MIN_OUTPUT_TOKENS} tokens "
                f"for the answer in the model's {window}-token context window: give the model a "
                "larger context (llama-server --ctx-size, vLLM --max-model-len) and set "
                "provider.context_tokens to match, or lower agent.num_prompt_cases"
            )
        return Fitted(sent, min(max_output_tokens, room), estimate, left_out, window)

    def overflowed(self, reason: str, fitted: Fitted) -> None:
        """The server said `fitted` was too long: learn enough for a strictly smaller request.

        The window it names is taken as it is; the prompt tokens it counted correct the
        characters-per-token estimate. Either way the request that failed bounds the window from
        above (its prompt plus the answer it asked for did not fit); with no numbers in the
        message, that bound is taken a quarter lower than the estimate of what was sent.
        """
        window = _first_int(_WINDOW_PATTERNS, reason)
        prompt_tokens = _first_int(_PROMPT_TOKENS, reason)
        if prompt_tokens:
            self.observe(fitted.messages, prompt_tokens)
            bound = prompt_tokens + fitted.max_output_tokens - 1
        else:
            bound = int((fitted.input_tokens_est + fitted.max_output_tokens) * SHRINK_ON_OVERFLOW)
        with self._lock:
            for limit in (window, bound):
                if limit is not None and (self._tokens is None or limit < self._tokens):
                    self._tokens = limit


def _droppable(messages: list[Message]) -> list[int]:
    """Indexes between the task (first user message) and the last message, oldest first."""
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is None:
        return []
    return list(range(first_user + 1, len(messages) - 1))


def call_fitted(
    window: ContextWindow,
    messages: list[Message],
    max_output_tokens: int,
    send: Callable[[Fitted], tuple[T, int]],
) -> tuple[T, int, Fitted]:
    """Send the fitted conversation; after a "context too long" 400, once more, smaller.

    Returns (result, requests made in all, the request that was answered). The same request is
    never sent twice: when what the error taught cannot make it smaller, the error stands.
    """
    fitted = window.fit(messages, max_output_tokens)
    try:
        result, attempts = send(fitted)
        return result, attempts, fitted
    except CallFailedError as exc:
        if exc.retryable or not is_context_overflow(exc.reason):
            raise
        first = exc
    window.overflowed(first.reason, fitted)
    try:
        smaller = window.fit(messages, max_output_tokens)
    except ContextError as err:
        raise ContextError(f"{first.reason}; {err.reason}", attempts=first.attempts) from None
    if smaller.key() == fitted.key():
        raise CallFailedError(
            f"{first.reason} (the request cannot be made smaller)",
            retryable=False,
            attempts=first.attempts,
        ) from None
    smaller.notes["shrunk_after"] = first.reason[:200]
    try:
        result, attempts = send(smaller)
    except CallFailedError as again:
        raise CallFailedError(
            again.reason, retryable=again.retryable, attempts=first.attempts + again.attempts
        ) from None
    return result, first.attempts + attempts, smaller
