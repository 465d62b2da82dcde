"""Fitting a conversation to a model's context window, and learning from "context too long" errors."""

from __future__ import annotations

import pytest

from agent.providers.base import Message
from agent.providers.context import (
    LEFT_OUT,
    MIN_OUTPUT_TOKENS,
    ContextError,
    ContextWindow,
    is_context_overflow,
)

CONVERSATION = [
    Message("system", "s" * 3000),  # 1,000 tokens at 3 characters a token
    Message("user", "t" * 3000),
    Message("assistant", "a" * 30000),  # the previous answer: 10,000 tokens
    Message("user", "f" * 3000),  # the latest candidate and its feedback
]


def test_unknown_window_sends_everything_with_the_full_answer_limit():
    fitted = ContextWindow(None).fit(CONVERSATION, 8192)
    assert fitted.messages == CONVERSATION and fitted.max_output_tokens == 8192


def test_the_previous_answer_is_left_out_before_the_answer_limit_is_cut():
    fitted = ContextWindow(8192).fit(CONVERSATION, 4096)
    assert [m.content for m in fitted.messages] == ["s" * 3000, "t" * 3000, LEFT_OUT, "f" * 3000]
    assert [m.role for m in fitted.messages] == ["system", "user", "assistant", "user"]
    assert fitted.left_out == 1 and fitted.max_output_tokens == 4096


def test_the_answer_limit_is_capped_to_what_the_window_leaves():
    fitted = ContextWindow(4000).fit(CONVERSATION, 8192)
    assert fitted.input_tokens_est + fitted.max_output_tokens == 4000
    assert MIN_OUTPUT_TOKENS <= fitted.max_output_tokens < 8192


def test_a_prompt_that_cannot_fit_is_refused_before_any_request_with_how_to_fix_it():
    with pytest.raises(ContextError, match="--ctx-size") as info:
        ContextWindow(3000).fit(CONVERSATION, 8192)
    assert not info.value.retryable


def test_the_servers_counts_replace_the_default_estimate():
    window = ContextWindow(None, chars_per_token=3.0)
    before = window.estimate(CONVERSATION)
    window.observe(CONVERSATION, 39000 // 4 + 8 * 4)  # the server counts 4 characters a token
    assert window.ratio() == pytest.approx(4.0)
    assert window.estimate(CONVERSATION) < before


@pytest.mark.parametrize(
    ("message", "window"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, you requested 8411 "
            "tokens (219 in the messages, 8192 in the completion).",
            8192,
        ),
        ("request (4476 tokens) exceeds the available context size (4096 tokens)", 4096),
        ("prompt is too long: 210000 tokens > 200000 maximum", 200000),
        (
            "input length and `max_tokens` exceed context limit: 198000 + 8192 > 200000, "
            "decrease input length or `max_tokens` and try again",
            200000,
        ),
    ],
    ids=["openai-vllm", "llama.cpp", "anthropic-prompt", "anthropic-total"],
)
def test_overflow_messages_are_recognised_and_their_window_learned(message: str, window: int):
    assert is_context_overflow(message)
    learner = ContextWindow(None)
    fitted = learner.fit(CONVERSATION, 8192)
    learner.overflowed(message, fitted)
    assert learner.tokens == window


def test_an_overflow_that_names_no_numbers_still_makes_the_next_request_smaller():
    learner = ContextWindow(20000)
    fitted = learner.fit(CONVERSATION, 8192)
    learner.overflowed("the request exceeds the available context size, try increasing it", fitted)
    smaller = learner.fit(CONVERSATION, 8192)
    assert smaller.key() != fitted.key()
    assert (
        smaller.max_output_tokens < fitted.max_output_tokens or smaller.left_out > fitted.left_out
    )


def test_other_400s_are_not_context_overflows():
    assert not is_context_overflow("openai HTTP 400 (bad request): unknown model 'gpt-9'")
    assert not is_context_overflow("max_tokens is too large")
