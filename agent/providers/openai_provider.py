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
from typing import Any

import openai

from agent.providers import server_info
from agent.providers.base import Message, ProviderError
from agent.providers.sdk_provider import Reply, SdkProvider

log = logging.getLogger(__name__)

# Model families that reject `temperature` (they only sample at 1) and `max_tokens`.
_REASONING_MODEL = re.compile(r"^(o\d|gpt-[5-9])")


def is_reasoning_model(model: str) -> bool:
    name = model.rsplit("/", 1)[-1].lower()  # proxies spell it "openai/gpt-5"
    return bool(_REASONING_MODEL.match(name)) and "-chat" not in name


class OpenAIProvider(SdkProvider):
    name = "openai"
    DEFAULT_BASE_URL = "https://api.openai.com/v1"
    _sdk = openai
    _sdk_error = openai.OpenAIError

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.official_api = "api.openai.com" in self.base_url
        self._warned_temperature = False
        # OpenAI's own API does not describe context windows; other servers may.
        self._asked_server = self.window.tokens is not None or self.official_api
        self._ask_lock = threading.Lock()

    def _make_client(self, api_key: str) -> Any:
        return openai.OpenAI(
            api_key=api_key, base_url=self.base_url, timeout=self.cfg.timeout_s, max_retries=0
        )

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

    def _create(self, args: dict[str, Any]) -> Any:
        return self._client.chat.completions.create(**args)

    def _before_request(self) -> None:
        self.context_tokens  # noqa: B018 (asks the server once, before the first request)

    def _read(self, response: Any) -> Reply:
        if not response.choices:
            raise ProviderError(f"openai: the response from {self.model} has no choices")
        choice = response.choices[0]
        usage = response.usage
        return Reply(
            text=choice.message.content or getattr(choice.message, "refusal", None) or "",
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            finish_reason=choice.finish_reason,
            truncated=choice.finish_reason == "length",
            raw={
                "id": response.id,
                "finish_reason": choice.finish_reason,
                "usage": usage.model_dump(mode="json", exclude_none=True) if usage else None,
            },
        )
