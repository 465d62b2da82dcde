"""What the SDK-backed providers (`openai`, `anthropic`) share: one request's life.

Contract: a subclass sets `name` (also the api label of retries and errors), `DEFAULT_BASE_URL`,
`_sdk` (the SDK module) and `_sdk_error` (its base exception), and implements
`_make_client(api_key)`, `_create(args)` (one SDK call), `request_args(messages, max_tokens)` and
`_read(response) -> Reply`. `complete()` then fits the request to the context window
(`context.py`), sends it with our retries (`retry.py`, the SDK's own are off), tells the window
how many input tokens the server counted, and returns the `Completion`. Failures are classified by
`retry.classify_sdk_error` with the API key scrubbed out of their text. `_before_request()` runs
before each request (the `openai` provider asks a server its context window there, once).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from agent.config import Price, ProviderConfig
from agent.providers.base import Completion, Message, OperatorContext
from agent.providers.context import ContextWindow, Fitted, call_fitted
from agent.providers.retry import Failure, call_with_retries, classify_sdk_error


@dataclass
class Reply:
    """The parts of one SDK response that make a `Completion`."""

    text: str
    input_tokens: int
    output_tokens: int
    finish_reason: str | None
    truncated: bool
    raw: dict[str, Any]


class SdkProvider:
    name: ClassVar[str]
    DEFAULT_BASE_URL: ClassVar[str]
    _sdk: ClassVar[ModuleType]
    _sdk_error: ClassVar[type[BaseException]]

    def __init__(
        self,
        cfg: ProviderConfig,
        *,
        api_key: str,
        base_url: str | None,
        model: str,
        prices: Mapping[str, Price] | None = None,
        context_tokens: int | None = None,
    ) -> None:
        self.cfg = cfg
        self.model = model
        self.prices = dict(prices or {})
        self.base_url = base_url or self.DEFAULT_BASE_URL
        self._secret = api_key  # kept only to scrub it out of error text
        self._client = self._make_client(api_key)
        self.window = ContextWindow(context_tokens, chars_per_token=cfg.chars_per_token)
        self.context_source = "provider config" if context_tokens else None

    def _make_client(self, api_key: str) -> Any:
        raise NotImplementedError

    def _create(self, args: dict[str, Any]) -> Any:
        raise NotImplementedError

    def request_args(
        self, messages: list[Message], max_output_tokens: int | None = None
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _read(self, response: Any) -> Reply:
        raise NotImplementedError

    def _before_request(self) -> None:
        return None

    def _send(self, fitted: Fitted) -> tuple[Any, int]:
        args = self.request_args(fitted.messages, fitted.max_output_tokens)
        return call_with_retries(
            lambda: self._create(args), self.cfg, self._classify, api=self.name
        )

    def _classify(self, exc: BaseException) -> Failure | None:
        failure = classify_sdk_error(
            exc,
            self._sdk,
            self._sdk_error,
            api=self.name,
            timeout_s=self.cfg.timeout_s,
            base_url=self.base_url,
        )
        return failure.scrubbed(self._secret) if failure else None

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        self._before_request()
        start = time.monotonic()
        response, attempts, fitted = call_fitted(
            self.window, messages, self.cfg.max_output_tokens, self._send
        )
        latency_s = time.monotonic() - start
        reply = self._read(response)
        if reply.input_tokens:
            self.window.observe(fitted.messages, reply.input_tokens)
        return Completion(
            text=reply.text,
            model=response.model or self.model,
            input_tokens=reply.input_tokens,
            output_tokens=reply.output_tokens,
            latency_s=latency_s,
            attempts=attempts,
            raw=reply.raw,
            finish_reason=reply.finish_reason,
            truncated=reply.truncated,
            request={**fitted.summary(), "context_source": self.context_source},
        )
