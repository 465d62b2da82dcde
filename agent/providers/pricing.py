"""Estimated cost of one completion from a price table (`ProviderConfig.prices`, USD per million tokens).

Contract: `estimate_cost_usd(model, input_tokens, output_tokens, prices)` returns USD, or None when
the model has no price (a local server, the builtin writer, a model missing from the table): an
unknown price is reported as unknown, never as zero. APIs answer with dated snapshot names
(`gpt-4.1-2025-04-14`, `claude-sonnet-4-5-20250929`); such a name falls back to the undated
entry. It never falls back to a shorter name otherwise: `gpt-4.1-mini` must not be billed as `gpt-4.1`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from agent.config import Price

# A trailing snapshot date: -20250929 or -2025-04-14.
_DATE_SUFFIX = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")


def undated_model(model: str) -> str:
    """`claude-sonnet-4-5-20250929` -> `claude-sonnet-4-5`; other names unchanged."""
    return _DATE_SUFFIX.sub("", model)


def find_price(model: str, prices: Mapping[str, Price]) -> Price | None:
    """The table entry for `model`, or for its undated name; None when neither is there."""
    if model in prices:
        return prices[model]
    return prices.get(undated_model(model))


def estimate_cost_usd(
    model: str, input_tokens: int, output_tokens: int, prices: Mapping[str, Price]
) -> float | None:
    """USD for one call, or None when the table has no price for the model."""
    price = find_price(model, prices)
    if price is None:
        return None
    return (
        input_tokens * price.input_usd_per_mtok + output_tokens * price.output_usd_per_mtok
    ) / 1_000_000
