"""The `openai` provider: Chat Completions through the official SDK.

Contract: `OpenAIProvider(cfg, api_key=..., base_url=..., model=..., prices=...,
context_tokens=...)` implements `Provider`. The registry reads `OPENAI_API_KEY` and `OPENAI_BASE_URL` from the environment, so any
OpenAI-compatible server (vLLM, Ollama, llama.cpp, a proxy) works. One `complete()` is one chat
completion; retries are ours (`retry.py`), the SDK's are off. Token usage comes from the response.

Every request is fitted to the model's context window (`context.py`): `context_tokens` is the
configured window, else (on a server other than OpenAI's own) what the server reports about
itself, asked once (`server_info.py`). A 400 saying the context is too long shrinks the request
once and retries it. `finish_reason` is kept on the Completion; "length" marks it truncated.
`probe()` asks `GET /models`: True when the server answers (the outage wait uses it).

Sampling settings are sent only where the API takes them: reasoning models (o-series, gpt-5 and
later) take no temperature and count output as `max_completion_tokens`; OpenAI's own API takes
`max_completion_tokens` for every model, while compatible servers are sent the older and more
widely understood `max_tokens`.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping
from typing import Any

import openai

from agent.config import Price, ProviderConfig
from agent.providers import server_info
from agent.providers.base import Completion, Message, OperatorContext, ProviderError
from agent.providers.context import ContextWindow, Fitted, call_fitted
from agent.providers.retry import Failure, call_with_retries, classify_sdk_error

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Model families that reject `temperature` (they only sample at 1) and `max_tokens`.
_REASONING_MODEL = re.compile(r"^(o\d|gpt-[5-9])")


def is_reasoning_model(model: str) -> bool:
    name = model.rsplit("/", 1)[-1].lower()  # proxies spell it "openai/gpt-5"
    return bool(_REASONING_MODEL.match(name)) and "-chat" not in name


class OpenAIProvider:
    name = "openai"

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
        self.base_url = base_url or DEFAULT_BASE_URL
        self.official_api = base_url is None or "api.openai.com" in base_url
        self._secret = api_key  # kept only to scrub it out of error text
        self._client = openai.OpenAI(
            api_key=api_key, base_url=self.base_url, timeout=cfg.timeout_s, max_retries=0
        )
        self._warned_temperature = False
        self.window = ContextWindow(context_tokens, chars_per_token=cfg.chars_per_token)
        self.context_source = "provider config" if context_tokens else None
        # OpenAI's own API does not describe context windows; other servers may.
        self._asked_server = context_tokens is not None or self.official_api
        self._ask_lock = threading.Lock()

    @property
    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._secret}"}

    @property
    def context_tokens(self) -> int | None:
        """The model's context window in tokens, or None when nobody says."""
        with self._ask_lock:
            if not self._asked_server:
                found = server_info.openai_compatible_context(
                    self.base_url, self.model, self._headers, min(10.0, self.cfg.timeout_s)
                )
                self._asked_server = found.answered  # a server that is down is asked again
                if found.tokens is not None:
                    self.window.set_tokens(found.tokens)
                    self.context_source = found.source
        return self.window.tokens

    def probe(self) -> bool:
        """True when the server answers a cheap request (GET /models) with a status below 500."""
        url = f"{self.base_url.rstrip('/')}/models"
        return server_info.probe(url, self._headers, min(10.0, self.cfg.timeout_s))

    def request_args(
        self, messages: list[Message], max_output_tokens: int | None = None
    ) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for this conversation."""
        args: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        limit = max_output_tokens or self.cfg.max_output_tokens
        reasoning = is_reasoning_model(self.model)
        if reasoning or self.official_api:
            args["max_completion_tokens"] = limit
        else:
            args["max_tokens"] = limit
        if self.cfg.temperature is not None:
            if reasoning:
                if not self._warned_temperature:
                    log.warning("openai: %s takes no temperature; ignoring temperature", self.model)
                    self._warned_temperature = True
            else:
                args["temperature"] = self.cfg.temperature
        return args

    def _send(self, fitted: Fitted) -> tuple[Any, int]:
        args = self.request_args(fitted.messages, fitted.max_output_tokens)
        return call_with_retries(
            lambda: self._client.chat.completions.create(**args),
            self.cfg,
            self._classify,
            api="openai",
        )

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        self.context_tokens  # noqa: B018 (asks the server once, before the first request)
        start = time.monotonic()
        response, attempts, fitted = call_fitted(
            self.window, messages, self.cfg.max_output_tokens, self._send
        )
        latency_s = time.monotonic() - start
        if not response.choices:
            raise ProviderError(f"openai: the response from {self.model} has no choices")
        choice = response.choices[0]
        text = choice.message.content or getattr(choice.message, "refusal", None) or ""
        usage = response.usage
        if usage and usage.prompt_tokens:
            self.window.observe(fitted.messages, usage.prompt_tokens)
        return Completion(
            text=text,
            model=response.model or self.model,
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            latency_s=latency_s,
            attempts=attempts,
            raw={
                "id": response.id,
                "finish_reason": choice.finish_reason,
                "usage": usage.model_dump(mode="json", exclude_none=True) if usage else None,
            },
            finish_reason=choice.finish_reason,
            truncated=choice.finish_reason == "length",
            request={**fitted.summary(), "context_source": self.context_source},
        )

    def _classify(self, exc: BaseException) -> Failure | None:
        failure = classify_sdk_error(
            exc,
            openai,
            openai.OpenAIError,
            api="openai",
            timeout_s=self.cfg.timeout_s,
            base_url=self.base_url,
        )
        return failure.scrubbed(self._secret) if failure else None
