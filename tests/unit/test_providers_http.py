"""The openai and anthropic providers through their official SDKs, over real HTTP.

Each test starts a local server (tests/llm_server.py: http.server in a thread on 127.0.0.1, a
random port) that speaks the provider's wire protocol and answers from a script: a good answer, an answer without code,
429 then success, 5xx until the retries run out, a reply slower than the timeout, 401/400.
No network beyond 127.0.0.1, waits of a few hundredths of a second.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from llm_server import AnthropicWire, FakeAPI, OpenAIWire

from agent.config import ProviderConfig
from agent.extract import ExtractError, extract_candidate
from agent.providers.base import Message, OperatorContext, ProviderError
from agent.providers.openai_provider import is_reasoning_model
from agent.providers.registry import make_provider
from agent.providers.retry import http_failure, is_retryable_status, parse_retry_after

RESPONSES = Path(__file__).resolve().parents[1] / "fixtures" / "responses"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy from the CI environment must not intercept 127.0.0.1.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def api() -> Any:
    server = FakeAPI()
    yield server
    server.close()


@pytest.fixture(params=[OpenAIWire(), AnthropicWire()], ids=["openai", "anthropic"])
def wire(request: pytest.FixtureRequest) -> Any:
    return request.param


def _config(wire: Any, **overrides: Any) -> ProviderConfig:
    fields: dict[str, Any] = {
        "name": wire.name,
        "model": "test-model",
        "timeout_s": 5.0,
        "num_retries": 2,
        "retry_min_wait_s": 0.01,
        "retry_max_wait_s": 0.05,
        "max_output_tokens": 1000,
    }
    fields.update(overrides)
    return ProviderConfig(**fields)


def _provider(wire: Any, api: FakeAPI, **overrides: Any) -> Any:
    provider, _why = make_provider(_config(wire, **overrides), env=wire.env(api.url))
    return provider


MESSAGES = [
    Message("system", "You write Triton kernels."),
    Message("user", "Write add.Tensor."),
]
CONTEXT = OperatorContext(op="add.Tensor", schema="", cases=[], worker=1, round=1)


def test_good_answer_gives_text_tokens_model_and_one_attempt(wire: Any, api: FakeAPI) -> None:
    text = (RESPONSES / "good.md").read_text()
    api.enqueue(wire.ok(text, input_tokens=120, output_tokens=340))
    completion = _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert completion.text == text
    assert (completion.input_tokens, completion.output_tokens) == (120, 340)
    assert completion.model == "test-model-2026-01-01"
    assert completion.attempts == 1
    assert "def add__Tensor_kernel_impl" in extract_candidate(completion.text, "add.Tensor")


def test_answer_without_code_is_returned_and_extraction_fails(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.ok((RESPONSES / "no_code.md").read_text()))
    completion = _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert "can't produce" in completion.text
    with pytest.raises(ExtractError, match="no code block in the response"):
        extract_candidate(completion.text, "add.Tensor")


def test_rate_limit_then_success_is_retried_with_two_attempts(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.error(429, "Rate limit reached, slow down"), wire.ok("```python\nx = 1\n```"))
    completion = _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert completion.attempts == 2
    assert len(api.requests) == 2


def test_5xx_until_retries_run_out_raises_with_status_and_message(wire: Any, api: FakeAPI) -> None:
    api.enqueue(*[wire.error(503, "upstream is overloaded") for _ in range(3)])
    with pytest.raises(ProviderError) as info:
        _provider(wire, api, num_retries=2).complete(MESSAGES, CONTEXT)
    assert "503" in info.value.reason
    assert "upstream is overloaded" in info.value.reason
    assert info.value.attempts == 3  # type: ignore[attr-defined]
    assert info.value.retryable
    assert len(api.requests) == 3


def test_timeout_raises_provider_error_after_retrying(wire: Any, api: FakeAPI) -> None:
    api.enqueue(*[wire.ok("late", 1, 1) for _ in range(2)])
    for reply in api.replies:
        reply.delay_s = 1.0
    start = time.monotonic()
    with pytest.raises(ProviderError) as info:
        _provider(wire, api, timeout_s=0.2, num_retries=1).complete(MESSAGES, CONTEXT)
    assert "no answer within 0.2 s" in info.value.reason
    assert info.value.attempts == 2  # type: ignore[attr-defined]
    assert time.monotonic() - start < 1.5


def test_base_url_is_honoured_and_auth_header_carries_the_key(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.ok("ok"))
    _provider(wire, api).complete(MESSAGES, CONTEXT)
    [request] = api.requests
    assert request["path"] == wire.path
    assert wire.auth_ok(request["headers"])
    assert request["json"]["model"] == "test-model"


def test_401_is_not_retried_and_the_echoed_key_is_masked(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.error(401, f"Incorrect API key provided: {wire.key}"), wire.ok("never"))
    with pytest.raises(ProviderError) as info:
        _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert "401" in info.value.reason
    assert wire.key not in info.value.reason
    assert not info.value.retryable
    assert info.value.attempts == 1  # type: ignore[attr-defined]
    assert len(api.requests) == 1


def test_400_is_not_retried(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.error(400, "max_tokens is too large"), wire.ok("never"))
    with pytest.raises(ProviderError, match="400.*max_tokens is too large"):
        _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert len(api.requests) == 1


def test_retry_after_header_is_waited_for(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.error(429, "slow down", {"retry-after": "0.3"}), wire.ok("ok"))
    start = time.monotonic()
    _provider(wire, api, retry_max_wait_s=1.0).complete(MESSAGES, CONTEXT)
    assert time.monotonic() - start >= 0.3


def test_refused_connection_is_retried_then_fails_naming_the_url(wire: Any) -> None:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = wire.env(f"http://127.0.0.1:{port}")
    provider, _ = make_provider(_config(wire, num_retries=1), env=env)
    with pytest.raises(ProviderError) as info:
        provider.complete(MESSAGES, CONTEXT)
    assert f"cannot connect to http://127.0.0.1:{port}" in info.value.reason
    assert info.value.attempts == 2  # type: ignore[attr-defined]


def test_openai_sends_system_message_and_max_tokens_to_a_compatible_server(api: FakeAPI) -> None:
    wire = OpenAIWire()
    api.enqueue(wire.ok("ok"))
    _provider(wire, api, temperature=0.3).complete(MESSAGES, CONTEXT)
    body = api.requests[0]["json"]
    assert body["messages"][0] == {"role": "system", "content": "You write Triton kernels."}
    assert body["max_tokens"] == 1000 and "max_completion_tokens" not in body
    assert body["temperature"] == 0.3


def test_openai_reasoning_model_gets_no_temperature_and_max_completion_tokens(
    api: FakeAPI,
) -> None:
    wire = OpenAIWire()
    api.enqueue(wire.ok("ok"))
    _provider(wire, api, model="o4-mini", temperature=0.3).complete(MESSAGES, CONTEXT)
    body = api.requests[0]["json"]
    assert "temperature" not in body
    assert body["max_completion_tokens"] == 1000 and "max_tokens" not in body


def test_anthropic_sends_the_system_prompt_separately(api: FakeAPI) -> None:
    wire = AnthropicWire()
    api.enqueue(wire.ok("ok"))
    _provider(wire, api).complete(MESSAGES, CONTEXT)
    body = api.requests[0]["json"]
    assert body["system"] == "You write Triton kernels."
    assert body["messages"] == [{"role": "user", "content": "Write add.Tensor."}]
    assert body["max_tokens"] == 1000


def test_reasoning_model_names_are_recognised() -> None:
    assert is_reasoning_model("o3") and is_reasoning_model("gpt-5-mini")
    assert is_reasoning_model("openai/o4-mini")
    assert not is_reasoning_model("gpt-4.1") and not is_reasoning_model("gpt-5-chat-latest")
    assert not is_reasoning_model("llama3.1:8b")


def test_only_429_and_5xx_statuses_are_retryable() -> None:
    assert is_retryable_status(429) and is_retryable_status(500) and is_retryable_status(529)
    assert not any(is_retryable_status(s) for s in (400, 401, 403, 404, 408, 422))


def test_retry_after_parses_seconds_milliseconds_and_absence() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None


def test_http_failure_reason_names_status_and_server_message() -> None:
    failure = http_failure("openai", 429, "Rate limit\n  reached", None)
    assert failure.reason == "openai HTTP 429 (rate limited): Rate limit reached"
    assert failure.retryable


# ---------------------------------------------------------------------------------- context, truncation


def _server_tokens(wire: Any, body: dict[str, Any]) -> int:
    """How this fake server counts a prompt: 4 characters a token."""
    return -(-wire.prompt_chars(body) // 4)


def _windowed(wire: Any, api: FakeAPI, window: int) -> None:
    """Answer 400 "context too long" to any request over `window`, else the queued reply."""

    def respond(request: dict[str, Any]) -> Any:
        body = request["json"]
        prompt = _server_tokens(wire, body)
        if prompt + wire.max_tokens(body) > window:
            return wire.too_long(window, prompt, wire.max_tokens(body))
        return None

    api.respond = respond


LONG_CONVERSATION = [
    Message("system", "You write Triton kernels. " * 20),
    Message("user", "Write add.Tensor. " * 50),
    Message("assistant", "Let me think about this at length. " * 400),  # ~14,000 characters
    Message("user", "Your previous file failed: wrong values. Fix it."),
]


def test_truncated_answer_carries_the_finish_reason(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.truncated("```python\nimport triton\n"))
    completion = _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert completion.truncated
    assert completion.finish_reason == ("length" if wire.name == "openai" else "max_tokens")


def test_finished_answer_is_not_truncated(wire: Any, api: FakeAPI) -> None:
    api.enqueue(wire.ok("done"))
    completion = _provider(wire, api).complete(MESSAGES, CONTEXT)
    assert not completion.truncated
    assert completion.finish_reason == ("stop" if wire.name == "openai" else "end_turn")


def test_context_too_long_shrinks_the_request_once_and_succeeds(wire: Any, api: FakeAPI) -> None:
    _windowed(wire, api, window=2000)
    api.enqueue(wire.ok("fixed"))
    completion = _provider(wire, api).complete(LONG_CONVERSATION, CONTEXT)
    assert completion.text == "fixed"
    assert completion.attempts == 2
    first, second = (r["json"] for r in api.requests)
    # The earlier answer was replaced by a one-line note; the task and the latest turn were kept.
    assert wire.prompt_chars(second) < wire.prompt_chars(first) // 3
    assert _server_tokens(wire, second) + wire.max_tokens(second) <= 2000
    sent = json.dumps(second)
    assert "Write add.Tensor." in sent and "Your previous file failed" in sent
    assert "left out here to fit the model's context window" in sent
    assert completion.request["messages_left_out"] == 1
    assert completion.request["context_tokens"] == 2000


def test_context_too_long_twice_is_not_sent_a_third_time(wire: Any, api: FakeAPI) -> None:
    window = 300  # below even the kept messages: the shrunk request cannot fit either
    api.respond = lambda request: wire.too_long(window, 5000, wire.max_tokens(request["json"]))
    with pytest.raises(ProviderError) as info:
        _provider(wire, api).complete(LONG_CONVERSATION, CONTEXT)
    assert "context" in info.value.reason
    assert len(api.requests) == 1  # what it learned shows no smaller request can fit
    assert not info.value.retryable


def test_a_known_window_fits_the_first_request_and_caps_the_answer(wire: Any, api: FakeAPI) -> None:
    _windowed(wire, api, window=3000)
    api.enqueue(wire.ok("ok"))
    _provider(wire, api, context_tokens=3000).complete(LONG_CONVERSATION, CONTEXT)
    [request] = api.requests  # no 400 first: the window was known
    body = request["json"]
    assert _server_tokens(wire, body) + wire.max_tokens(body) <= 3000
    assert wire.max_tokens(body) <= 1000


def test_openai_compatible_server_is_asked_for_its_context_window(api: FakeAPI) -> None:
    wire = OpenAIWire()
    # llama.cpp: the training context in /v1/models, the real per-slot context in /props.
    api.get_routes["/v1/models"] = {
        "object": "list",
        "data": [{"id": "gemma.gguf", "object": "model", "meta": {"n_ctx_train": 131072}}],
    }
    api.get_routes["/props"] = {"default_generation_settings": {"n_ctx": 4096}}
    provider = _provider(wire, api)
    assert provider.context_tokens == 4096
    assert provider.context_source == "server /props n_ctx"
    api.get_routes.pop("/props")
    api.get_routes["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 16384}]}  # vLLM
    assert _provider(wire, api).context_tokens == 16384


def test_configured_window_wins_over_the_server(api: FakeAPI) -> None:
    api.get_routes["/v1/models"] = {"data": [{"id": "test-model", "max_model_len": 16384}]}
    provider = _provider(OpenAIWire(), api, context_tokens=8192)
    assert provider.context_tokens == 8192 and api.gets == []


def test_probe_says_whether_the_server_answers(wire: Any, api: FakeAPI) -> None:
    provider = _provider(wire, api)
    assert provider.probe()  # 404 for /models is still an answer
    api.go_down()
    assert not provider.probe()
    api.come_back()
    assert provider.probe()


def test_failed_call_reports_every_attempt_made(wire: Any, api: FakeAPI) -> None:
    api.enqueue(*[wire.error(502, "bad gateway") for _ in range(4)])
    with pytest.raises(ProviderError) as info:
        _provider(wire, api, num_retries=3).complete(MESSAGES, CONTEXT)
    assert "gave up after 4 attempts" in info.value.reason
    assert info.value.attempts == 4
