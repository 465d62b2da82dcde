"""The openai and anthropic providers through their official SDKs, over real HTTP.

Each test starts a local server (http.server in a thread on 127.0.0.1, a random port) that speaks
the provider's wire protocol and answers from a script: a good answer, an answer without code,
429 then success, 5xx until the retries run out, a reply slower than the timeout, 401/400.
No network beyond 127.0.0.1, waits of a few hundredths of a second.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.config import ProviderConfig
from agent.extract import ExtractError, extract_candidate
from agent.providers.base import Message, OperatorContext, ProviderError
from agent.providers.openai_provider import is_reasoning_model
from agent.providers.registry import make_provider
from agent.providers.retry import http_failure, is_retryable_status, parse_retry_after

RESPONSES = Path(__file__).parent / "fixtures" / "responses"
OPENAI_KEY = "sk-test-openai-0123456789"
ANTHROPIC_KEY = "sk-ant-test-0123456789"


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class FakeAPI:
    """A scripted HTTP server: each POST pops the next Reply and is recorded in `requests`."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                api.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "json": json.loads(raw) if raw else None,
                    }
                )
                reply = (
                    api.replies.popleft() if api.replies else Reply(599, {"error": "unscripted"})
                )
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                payload = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def enqueue(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class OpenAIWire:
    name = "openai"
    path = "/v1/chat/completions"
    key = OPENAI_KEY

    def env(self, url: str) -> dict[str, str]:
        return {"OPENAI_API_KEY": self.key, "OPENAI_BASE_URL": f"{url}/v1"}

    def ok(self, text: str, input_tokens: int = 11, output_tokens: int = 22) -> Reply:
        return Reply(
            body={
                "id": "chatcmpl-test",
                "object": "chat.completion",
                "created": 1767225600,
                "model": "test-model-2026-01-01",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": input_tokens,
                    "completion_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
            }
        )

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        body = {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
        return Reply(status, body, headers or {})

    def auth_ok(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.key}"


class AnthropicWire:
    name = "anthropic"
    path = "/v1/messages"
    key = ANTHROPIC_KEY

    def env(self, url: str) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": self.key, "ANTHROPIC_BASE_URL": url}

    def ok(self, text: str, input_tokens: int = 11, output_tokens: int = 22) -> Reply:
        return Reply(
            body={
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": "test-model-2026-01-01",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
            }
        )

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = {429: "rate_limit_error", 401: "authentication_error"}.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return Reply(status, body, headers or {})

    def auth_ok(self, headers: dict[str, str]) -> bool:
        # Older SDKs send x-api-key; recent ones send the key as a bearer token.
        return self.key in (headers.get("x-api-key"), headers.get("authorization", "")[7:])


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
