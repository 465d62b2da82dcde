"""The `anthropic` provider: the Messages API through the official SDK.

Contract: `AnthropicProvider(cfg, api_key=..., base_url=..., model=..., prices=...,
context_tokens=...)` implements `Provider`. The registry reads `ANTHROPIC_API_KEY`, and `ANTHROPIC_BASE_URL` when set (a proxy, or
the local server of the tests). System messages go in the separate `system` field; the rest of the
conversation alternates user/assistant as the API requires. Retries are ours (`retry.py`), the
SDK's are off. Token usage comes from the response (cache reads and writes count as input).

Every request is fitted to `context_tokens` (the configured window or the `context_windows`
table; the Messages API does not report it) by `context.py`; a 400 saying the prompt is too long
shrinks the request once and retries it. `stop_reason` is kept on the Completion ("max_tokens"
marks it truncated). `probe()` asks `GET /v1/models`: True when the server answers.

`max_tokens` is always sent (the API requires it). `temperature` is sent only when set and only
when the installed SDK's `messages.create` still takes it: recent SDKs dropped sampling settings.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import anthropic

from agent.providers import server_info
from agent.providers.base import Message
from agent.providers.sdk_provider import Reply, SdkProvider

log = logging.getLogger(__name__)


def _sdk_takes_temperature() -> bool:
    from anthropic.resources.messages import Messages

    return "temperature" in inspect.signature(Messages.create).parameters


class AnthropicProvider(SdkProvider):
    name = "anthropic"
    DEFAULT_BASE_URL = "https://api.anthropic.com"
    _sdk = anthropic
    _sdk_error = anthropic.AnthropicError

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._takes_temperature = _sdk_takes_temperature()
        if self.cfg.temperature is not None and not self._takes_temperature:
            log.warning(
                "anthropic: this SDK's messages API takes no temperature; ignoring temperature"
            )

    def _make_client(self, api_key: str) -> Any:
        return anthropic.Anthropic(
            api_key=api_key, base_url=self.base_url, timeout=self.cfg.timeout_s, max_retries=0
        )

    @property
    def context_tokens(self) -> int | None:
        """The model's context window in tokens, or None when the config does not say."""
        return self.window.tokens

    def probe(self) -> bool:
        """True when the server answers a cheap request (GET /v1/models) with a status below 500."""
        headers = {"x-api-key": self._secret, "anthropic-version": "2023-06-01"}
        url = f"{self.base_url.rstrip('/')}/v1/models"
        return server_info.probe(url, headers, min(10.0, self.cfg.timeout_s))

    def request_args(
        self, messages: list[Message], max_output_tokens: int | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of `messages.create` for this conversation."""
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        args: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_output_tokens or self.cfg.max_output_tokens,
            "messages": [
                {"role": m.role, "content": m.content} for m in messages if m.role != "system"
            ],
        }
        if system:
            args["system"] = system
        if self.cfg.temperature is not None and self._takes_temperature:
            args["temperature"] = self.cfg.temperature
        return args

    def _create(self, args: dict[str, Any]) -> Any:
        return self._client.messages.create(**args)

    def _read(self, response: Any) -> Reply:
        usage = response.usage
        return Reply(
            text="".join(
                block.text for block in response.content if getattr(block, "type", None) == "text"
            ),
            input_tokens=(
                (usage.input_tokens or 0)
                + (getattr(usage, "cache_creation_input_tokens", None) or 0)
                + (getattr(usage, "cache_read_input_tokens", None) or 0)
            ),
            output_tokens=usage.output_tokens or 0,
            finish_reason=response.stop_reason,
            truncated=response.stop_reason == "max_tokens",
            raw={
                "id": response.id,
                "stop_reason": response.stop_reason,
                "usage": usage.model_dump(mode="json", exclude_none=True),
            },
        )
