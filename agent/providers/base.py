"""The one interface every provider implements.

A provider turns a conversation into one completion. It never runs code and never sees the
evaluator; a failed call raises `ProviderError` with a reason, which the worker records as a
failed round (never a made-up answer).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant"]


@dataclass
class Message:
    role: Role
    content: str


@dataclass
class OperatorContext:
    """What a provider may know about the task besides the prompt text.

    LLM providers ignore it (they get the rendered prompt); the builtin and replay providers use it.
    """

    op: str  # normalized overload, e.g. "add.Tensor"
    schema: str  # ATen schema string
    cases: list[Any]  # evaluator.testcase.TestCase
    worker: int = 0
    round: int = 0
    feedback: dict[str, Any] | None = None  # the evaluator's verdict on the last candidate


@dataclass
class Completion:
    text: str
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1  # requests made for this answer, retries included
    raw: dict[str, Any] = field(default_factory=dict)
    # Why the model stopped, as the API says it: OpenAI's finish_reason, Anthropic's stop_reason.
    finish_reason: str | None = None
    truncated: bool = False  # the answer hit the output token limit
    request: dict[str, Any] = field(default_factory=dict)  # how the request was fitted (context)


class ProviderError(Exception):
    """A call that failed for good (after bounded retries): the round fails with this reason."""

    def __init__(self, reason: str, *, retryable: bool = False, attempts: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.attempts = attempts


class Provider(Protocol):
    name: str
    model: str

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        """One completion for the conversation so far; raises ProviderError when it fails."""
        ...
