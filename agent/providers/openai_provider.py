"""The `openai` provider: Chat Completions through the official SDK (design §7).

Contract: `OpenAIProvider(cfg, api_key=..., base_url=..., model=..., prices=...)` implements
`Provider`. The registry reads `OPENAI_API_KEY` and `OPENAI_BASE_URL` from the environment, so any
OpenAI-compatible server (vLLM, Ollama, llama.cpp, a proxy) works. One `complete()` is one chat
completion; retries are ours (`retry.py`), the SDK's are off. Token usage comes from the response.

Sampling settings are sent only where the API takes them: reasoning models (o-series, gpt-5 and
later) take no temperature and count output as `max_completion_tokens`; OpenAI's own API takes
`max_completion_tokens` for every model, while compatible servers are sent the older and more
widely understood `max_tokens`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

import openai

from agent.config import Price, ProviderConfig
from agent.providers.base import Completion, Message, OperatorContext, ProviderError
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

    def request_args(self, messages: list[Message]) -> dict[str, Any]:
        """The keyword arguments of `chat.completions.create` for this conversation."""
        args: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        reasoning = is_reasoning_model(self.model)
        if reasoning or self.official_api:
            args["max_completion_tokens"] = self.cfg.max_output_tokens
        else:
            args["max_tokens"] = self.cfg.max_output_tokens
        if self.cfg.temperature is not None:
            if reasoning:
                if not self._warned_temperature:
                    log.warning("openai: %s takes no temperature; ignoring temperature", self.model)
                    self._warned_temperature = True
            else:
                args["temperature"] = self.cfg.temperature
        return args

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        args = self.request_args(messages)
        start = time.monotonic()
        response, attempts = call_with_retries(
            lambda: self._client.chat.completions.create(**args),
            self.cfg,
            self._classify,
            api="openai",
        )
        latency_s = time.monotonic() - start
        if not response.choices:
            raise ProviderError(f"openai: the response from {self.model} has no choices")
        choice = response.choices[0]
        text = choice.message.content or getattr(choice.message, "refusal", None) or ""
        usage = response.usage
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
