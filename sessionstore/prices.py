"""Prices per model and token kind: the table shipped in the package, overridable by a user file.

The shipped table (`sessionstore/data/prices.json`) names its date and sources. A user file
in the same format (`--prices FILE`, or `SESSIONSTORE_PRICES`) adds models or replaces the
shipped entry of a model it names. Rates are USD per million tokens for input, output, 5-minute
and 1-hour cache writes and cache reads; a model may add `long_context` rates that apply to every
token of a request whose prompt (input + cache writes + cache reads) exceeds `above_prompt_tokens`.
A model the table does not name has no price: its cost is unknown, never zero.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from .storage.core.errors import SessionStoreError
from .storage.derived.usage_counts import PROMPT_BANDS

#: The rate names of a price entry, in the order of the token kinds (usage_counts.KINDS).
RATES = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")

_DATE_SUFFIX = re.compile(r"(?:[-@]20\d{6}|-latest)$")
_BEDROCK_VERSION = re.compile(r"-v\d+(?::\d+)?$")


class PriceTableError(SessionStoreError, ValueError):
    """A price file that cannot be read or does not have the table's shape."""


@dataclass(frozen=True, slots=True)
class Rates:
    """USD per million tokens of each kind (RATES order)."""

    per_million: tuple[float, float, float, float, float]

    def cost(self, counts: Sequence[int]) -> float:
        """USD for token counts in KINDS order."""
        return sum(n * r for n, r in zip(counts, self.per_million, strict=True)) / 1_000_000


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """A model's rates, and its long-context rates with the prompt size they start above."""

    model: str
    base: Rates
    long_context: Rates | None = None
    above_prompt_tokens: int | None = None

    def rates_for_band(self, band: int) -> Rates:
        """The rates of a request whose prompt exceeded `band` of the PROMPT_BANDS thresholds."""
        if self.long_context is None or self.above_prompt_tokens is None or band <= 0:
            return self.base
        return self.long_context if PROMPT_BANDS[band - 1] >= self.above_prompt_tokens else self.base


@dataclass(frozen=True)
class PriceTable:
    """Model prices with where they came from."""

    models: Mapping[str, ModelPrice]
    aliases: Mapping[str, str]
    date: str
    sources: tuple[str, ...]
    _found: dict[str, ModelPrice | None] = field(default_factory=dict, repr=False, compare=False)

    def lookup(self, model: str | None) -> ModelPrice | None:
        """The price of a model id as agents report it (dates, `[1m]`, provider prefixes ignored), or None."""
        if not model:
            return None
        if model in self._found:
            return self._found[model]
        name = canonical_model(model)
        key = name if name in self.models else self.aliases.get(name)
        price = self._found[model] = self.models.get(key) if key else None
        return price

    def to_dict(self) -> dict[str, Any]:
        """The table's date, sources and model names (for `usage --json`)."""
        return {"date": self.date, "sources": list(self.sources), "models": sorted(self.models)}


def canonical_model(model: str) -> str:
    """`claude-sonnet-4-20250514` -> `claude-sonnet-4`; `anthropic.claude-opus-4-1-v1:0` -> `claude-opus-4-1`."""
    name = model.strip().lower()
    for prefix in ("anthropic/", "anthropic.", "us.anthropic.", "eu.anthropic.", "openai/"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    name = name.removesuffix("[1m]")
    name = _BEDROCK_VERSION.sub("", name)
    return _DATE_SUFFIX.sub("", name)


def shipped_table_text() -> str:
    """The JSON of the price table shipped in the package."""
    return resources.files("sessionstore").joinpath("data/prices.json").read_text(encoding="utf-8")


def load_prices(user_file: str | Path | None = None) -> PriceTable:
    """The shipped table, with the entries of `user_file` (same format) added or replacing shipped ones."""
    if not user_file:
        return _shipped_table()
    shipped = _parse(shipped_table_text(), "the shipped price table")
    path = Path(user_file).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PriceTableError(f"cannot read the price file {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    user = _parse(text, str(path))
    models = {**shipped["models"], **user["models"]}
    header = {
        "date": f"{shipped['date']} (shipped) + {user.get('date') or path.name}",
        "sources": [*shipped.get("sources", []), str(path)],
    }
    return _table(models, header)


@lru_cache(maxsize=1)
def _shipped_table() -> PriceTable:
    """The shipped table, read once per process (it is package data: it does not change under us)."""
    shipped = _parse(shipped_table_text(), "the shipped price table")
    return _table(shipped["models"], shipped)


def _parse(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PriceTableError(f"{where}: not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise PriceTableError(f'{where}: expected an object with "models": {{"MODEL": {{"input": ..., ...}}}}')
    return data


def _table(models: Mapping[str, Any], header: Mapping[str, Any]) -> PriceTable:
    prices: dict[str, ModelPrice] = {}
    aliases: dict[str, str] = {}
    for name, entry in models.items():
        key = canonical_model(name)
        prices[key] = _model_price(key, entry)
        for alias in entry.get("aliases", []) if isinstance(entry, dict) else []:
            if isinstance(alias, str):
                aliases[canonical_model(alias)] = key
    aliases = {a: k for a, k in aliases.items() if a not in prices}
    sources = header.get("sources") or []
    return PriceTable(
        prices,
        aliases,
        str(header.get("date") or "undated"),
        tuple(str(s) for s in sources) if isinstance(sources, list) else (str(sources),),
    )


def _model_price(name: str, entry: Any) -> ModelPrice:
    if not isinstance(entry, dict):
        raise PriceTableError(f"price of {name}: expected an object of rates")
    base = _rates(name, entry)
    extra = entry.get("long_context")
    if extra is None:
        return ModelPrice(name, base)
    if not isinstance(extra, dict):
        raise PriceTableError(f"price of {name}: long_context must be an object")
    above = extra.get("above_prompt_tokens")
    if above not in PROMPT_BANDS:
        bands = ", ".join(f"{b:,}" for b in PROMPT_BANDS)
        raise PriceTableError(
            f"price of {name}: long_context.above_prompt_tokens must be one of {bands} "
            f"(the prompt sizes the store records), got {above!r}"
        )
    return ModelPrice(name, base, _rates(f"{name} long_context", extra), int(above))


def _rates(name: str, entry: Mapping[str, Any]) -> Rates:
    values = []
    for rate in RATES:
        value = entry.get(rate)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6:
            raise PriceTableError(
                f"price of {name}: {rate!r} must be a non-negative number of USD per million tokens, got {value!r}"
            )
        values.append(float(value))
    return Rates((values[0], values[1], values[2], values[3], values[4]))
