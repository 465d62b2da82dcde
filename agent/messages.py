"""What the agent's parts pass each other: a conversation's messages, what a provider knows about
its task, a completion, and the names of round outcomes.

Providers (agent/providers/), the worker and the run log (agent/runlog.py) all import these from
here, so none of them needs another's module: providers never import the run log, and the run
log never imports providers. Plain data only, no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

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
    cases: list[Any]  # evaluator.cases.testcase.TestCase
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


# Round outcomes written in meta.json["outcome"] and the round_end event.
PASSED = "passed"  # this round's candidate passed and was kept
# Passed too, but another worker's kernel is the one kept: it passed first, or it sent the same
# text and its sandbox run gave the verdict this round reused.
PASSED_NOT_KEPT = "passed_not_kept"
FAILED = "failed"  # the verdict was not `passed`
UNTESTABLE = "untestable"  # the verdict was `skipped`: no test can run on this device
NO_CODE = "no_code"  # no usable kernel could be extracted from the answer
PROVIDER_ERROR = "provider_error"  # the call got no answer (after the provider's retries)
CANCELLED = "cancelled"  # stopped mid-round: another worker won, or the run was interrupted
# A cancelled round is not finished, and a call without an answer is not a round: resume redoes
# both. (The builtin and replay providers' failed calls are rounds, and resume redoes them too:
# they answer the same way again.)
# "passed_late" is PASSED_NOT_KEPT's name in run folders written before it was renamed.
FINISHED_OUTCOMES = {PASSED, PASSED_NOT_KEPT, "passed_late", FAILED, UNTESTABLE, NO_CODE}
