"""What a model server says about itself: is it answering, and how long a context does it serve.

Contract:
- `probe(url, headers, timeout_s) -> bool`: one GET; True when the server answered with any status
  below 500 (it is up and routing requests), False on a refused connection, a timeout or a 5xx.
- `openai_compatible_context(base_url, model, headers, timeout_s) -> ServerContext`: whether
  the server answered at all (`answered`; ask again later when it did not), and the context window an OpenAI-compatible server reports, from `GET {base_url}/models` (vLLM's
  `max_model_len`, `context_length` / `context_window` / `n_ctx` of other servers, llama.cpp's
  `meta.n_ctx_train` as an upper bound) and llama.cpp's `GET {root}/props`
  (`default_generation_settings.n_ctx`: the context one request slot really has). The smallest
  value found wins (`tokens`), and `source` names where it came from; None when it says nothing.
Nothing here raises on a bad or absent answer: a server that does not describe itself is normal.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

# Keys under which OpenAI-compatible servers put the context window of a model entry.
_MODEL_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx")


def _get_json(url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, Any]:
    """(status, parsed JSON or None); status 0 when no answer came."""
    # The standard library, not the SDKs' HTTP client: which one they ship differs by version.
    request = urllib.request.Request(url, headers=dict(headers), method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, body = response.status, response.read(1_000_000)
    except urllib.error.HTTPError as exc:
        return exc.code, None
    except (OSError, ValueError):  # refused, unreachable, timed out, a malformed URL
        return 0, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def probe(url: str, headers: Mapping[str, str], timeout_s: float) -> bool:
    status, _ = _get_json(url, headers, timeout_s)
    return 0 < status < 500


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value > 0 else None


def _model_entry(data: Any, model: str) -> Mapping[str, Any] | None:
    entries = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, Mapping)]
    for entry in entries:
        if entry.get("id") == model:
            return entry
    # A server that serves one model answers for it whatever name the client uses (llama.cpp).
    return entries[0] if len(entries) == 1 else None


@dataclass
class ServerContext:
    answered: bool
    tokens: int | None = None
    source: str | None = None


def openai_compatible_context(
    base_url: str, model: str, headers: Mapping[str, str], timeout_s: float
) -> ServerContext:
    found: list[tuple[int, str]] = []
    base = base_url.rstrip("/")
    status, data = _get_json(f"{base}/models", headers, timeout_s)
    if status == 0:
        return ServerContext(answered=False)
    entry = _model_entry(data, model)
    if entry is not None:
        for key in _MODEL_KEYS:
            tokens = _positive_int(entry.get(key))
            if tokens:
                found.append((tokens, f"server /models {key}"))
        meta = entry.get("meta")
        if isinstance(meta, Mapping) and _positive_int(meta.get("n_ctx_train")):
            found.append((int(meta["n_ctx_train"]), "server /models meta.n_ctx_train"))
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    _, props = _get_json(f"{root}/props", headers, timeout_s)
    if isinstance(props, Mapping):
        settings = props.get("default_generation_settings")
        if isinstance(settings, Mapping) and _positive_int(settings.get("n_ctx")):
            found.append((int(settings["n_ctx"]), "server /props n_ctx"))
    if not found:
        return ServerContext(answered=True)
    tokens, source = min(found)
    log.info("context window of %s: %d tokens (%s)", model, tokens, source)
    return ServerContext(True, tokens, source)
