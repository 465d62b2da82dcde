"""The one interface every provider implements.

A provider turns a conversation into one completion. It never runs code and never sees the
evaluator; a failed call raises `ProviderError` with a reason, which the worker records as a
failed round (never a made-up answer).
"""

from __future__ import annotations

from typing import Protocol

# The conversation types live in agent.messages (the run log reads them too); providers name them
# from here.
from agent.messages import Completion, Message, OperatorContext, Role

__all__ = ["Completion", "Message", "OperatorContext", "Provider", "ProviderError", "Role"]


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
