"""A local model server for tests: stdlib http.server in a thread, speaking the OpenAI and Anthropic
wire protocols from a script.

`FakeAPI()` binds 127.0.0.1 on a free port. Each POST is recorded in `requests` and answered by
`respond(request)` when set (a function of the parsed request that returns a Reply, or None to
fall back), else by the next queued Reply (`enqueue`), else 599 "unscripted". GETs answer from
`get_routes` ({path: JSON body}; 404 otherwise), so a test can describe the model (`/v1/models`,
`/props`). `go_down()` closes the listening socket (connections are refused, as with a dead
server) and `come_back()` listens again on the same port. `OpenAIWire` / `AnthropicWire` build
each API's answers and errors and the environment that points its SDK here.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_KEY = "sk-test-openai-0123456789"
ANTHROPIC_KEY = "sk-ant-test-0123456789"


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


class FakeAPI:
    """A scripted HTTP server: each POST is recorded in `requests` and answered from the script."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.respond: Callable[[dict[str, Any]], Reply | None] | None = None
        self.get_routes: dict[str, Any] = {}
        self.gets: list[str] = []
        self._lock = threading.Lock()
        self.port = 0
        self.server: ThreadingHTTPServer | None = None
        self._serve()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _send(self, reply: Reply) -> None:
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

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                path = self.path.split("?", 1)[0]
                with api._lock:
                    api.gets.append(path)
                if path in api.get_routes:
                    self._send(Reply(200, api.get_routes[path]))
                else:
                    self._send(Reply(404, {"error": {"message": f"no route {path}"}}))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length", 0))
                raw = self.rfile.read(length)
                request = {
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "json": json.loads(raw) if raw else None,
                }
                with api._lock:
                    api.requests.append(request)
                    reply = api.respond(request) if api.respond is not None else None
                    if reply is None:
                        reply = (
                            api.replies.popleft()
                            if api.replies
                            else Reply(599, {"error": {"message": "unscripted"}})
                        )
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                self._send(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def _serve(self) -> None:
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        server.block_on_close = False
        self.port = server.server_address[1]
        self.server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.replies.extend(replies)

    def posts(self) -> int:
        with self._lock:
            return len(self.requests)

    def go_down(self) -> None:
        """Stop listening: every connection is refused until `come_back`."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def come_back(self) -> None:
        """Listen again on the same port."""
        if self.server is None:
            self._serve()

    def close(self) -> None:
        self.go_down()


class OpenAIWire:
    name = "openai"
    path = "/v1/chat/completions"
    key = OPENAI_KEY

    def env(self, url: str) -> dict[str, str]:
        return {"OPENAI_API_KEY": self.key, "OPENAI_BASE_URL": f"{url}/v1"}

    def ok(
        self,
        text: str,
        input_tokens: int = 11,
        output_tokens: int = 22,
        finish_reason: str = "stop",
    ) -> Reply:
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
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": {
                    "prompt_tokens": input_tokens,
                    "completion_tokens": output_tokens,
                    "total_tokens": input_tokens + output_tokens,
                },
            }
        )

    def truncated(self, text: str, input_tokens: int = 11, output_tokens: int = 22) -> Reply:
        return self.ok(text, input_tokens, output_tokens, finish_reason="length")

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        body = {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
        return Reply(status, body, headers or {})

    def too_long(self, window: int, prompt_tokens: int, max_tokens: int) -> Reply:
        """vLLM's (and OpenAI's) 400 for a request over the context window."""
        return self.error(
            400,
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the messages, {max_tokens} "
            "in the completion). Please reduce the length of the messages or completion.",
        )

    def max_tokens(self, body: dict[str, Any]) -> int:
        return int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)

    def prompt_chars(self, body: dict[str, Any]) -> int:
        return sum(len(m["content"]) for m in body["messages"])

    def auth_ok(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.key}"


class AnthropicWire:
    name = "anthropic"
    path = "/v1/messages"
    key = ANTHROPIC_KEY

    def env(self, url: str) -> dict[str, str]:
        return {"ANTHROPIC_API_KEY": self.key, "ANTHROPIC_BASE_URL": url}

    def ok(
        self,
        text: str,
        input_tokens: int = 11,
        output_tokens: int = 22,
        stop_reason: str = "end_turn",
    ) -> Reply:
        return Reply(
            body={
                "id": "msg_test",
                "type": "message",
                "role": "assistant",
                "model": "test-model-2026-01-01",
                "content": [{"type": "text", "text": text}],
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
            }
        )

    def truncated(self, text: str, input_tokens: int = 11, output_tokens: int = 22) -> Reply:
        return self.ok(text, input_tokens, output_tokens, stop_reason="max_tokens")

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Reply:
        kind = {
            429: "rate_limit_error",
            401: "authentication_error",
            400: "invalid_request_error",
        }.get(status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return Reply(status, body, headers or {})

    def too_long(self, window: int, prompt_tokens: int, max_tokens: int) -> Reply:
        """Anthropic's 400 for a prompt plus max_tokens over the context window."""
        return self.error(
            400,
            f"input length and `max_tokens` exceed context limit: {prompt_tokens} + {max_tokens} "
            f"> {window}, decrease input length or `max_tokens` and try again",
        )

    def max_tokens(self, body: dict[str, Any]) -> int:
        return int(body.get("max_tokens") or 0)

    def prompt_chars(self, body: dict[str, Any]) -> int:
        system = body.get("system") or ""
        return len(system) + sum(len(m["content"]) for m in body["messages"])

    def auth_ok(self, headers: dict[str, str]) -> bool:
        # Older SDKs send x-api-key; recent ones send the key as a bearer token.
        return self.key in (headers.get("x-api-key"), headers.get("authorization", "")[7:])
