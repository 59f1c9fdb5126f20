"""One typed configuration object holding every number of the design.

Each field has the design's default, can be passed as an argument, and can be
overridden by an environment variable `SESSIONSTORE_<FIELD NAME IN CAPITALS>`
(for example `SESSIONSTORE_MICROCOMPACT_KEEP_RECENT=5`).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from ..core.errors import ConfigError

log = logging.getLogger("sessionstore.config")

ENV_PREFIX = "SESSIONSTORE_"


def default_db_path() -> Path:
    """`$XDG_DATA_HOME/sessionstore/sessions.db` (XDG default: ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "sessionstore" / "sessions.db"


def default_db_url() -> str:
    """`SESSIONSTORE_DB_URL` if set, else the SQLite file under the XDG data dir."""
    return os.environ.get("SESSIONSTORE_DB_URL") or f"sqlite:///{default_db_path()}"


@dataclass(frozen=True)
class Config:
    """Every tunable number, with the defaults of DESIGN.md."""

    # Storage
    busy_timeout_ms: int = 10_000
    write_retries: int = 8
    default_context_window: int = 200_000

    #: PostgreSQL: seconds a schema upgrade waits for a table another connection holds (an open transaction)
    #: before it gives up, changes nothing and names who holds it; 0 waits for ever.
    upgrade_lock_timeout_seconds: float = 30.0

    # Search index (derived; built at query time, off the append path)
    search_max_chars: int = 16_000_000  # characters of one message indexed (a longer message's rest is not searchable)
    search_batch_chars: int = 1_000_000  # characters indexed per write transaction (appends wait that long)

    # Usage reports: a user price file (same format as sessionstore/data/prices.json) over the shipped one
    prices: str = ""

    # Layer 1: tool-result budget and spills
    tool_result_max_chars: int = 50_000
    tool_results_per_message_chars: int = 200_000
    spill_preview_bytes: int = 2_000

    # Layer 2: snip
    snip_enabled: bool = True

    # Layer 3: microcompact
    microcompact_enabled: bool = True
    microcompact_mode: str = "local"  # "local" clears content; "server" emits context_management
    compactable_tools: tuple[str, ...] = (
        "Read",
        "Bash",
        "Grep",
        "Glob",
        "WebSearch",
        "WebFetch",
        "Edit",
        "Write",
    )
    microcompact_trigger_count: int = 12
    microcompact_keep_recent: int = 3
    microcompact_idle_minutes: float = 60.0
    microcompact_idle_keep_recent: int = 5

    # Layer 4: context collapse
    collapse_enabled: bool = False
    collapse_start_ratio: float = 0.90
    collapse_block_ratio: float = 0.95

    # Layer 5: auto-compact
    auto_compact_enabled: bool = True
    max_output_tokens: int = 32_000
    output_reserve_cap: int = 20_000
    autocompact_buffer: int = 13_000
    warning_buffer: int = 20_000
    max_consecutive_failures: int = 3
    ptl_max_retries: int = 3

    # Full compaction re-attachments
    reattach_max_files: int = 5
    reattach_file_tokens: int = 5_000
    reattach_total_tokens: int = 50_000
    reattach_skill_tokens: int = 5_000
    reattach_skills_total_tokens: int = 25_000

    # Session memory
    memory_init_tokens: int = 10_000
    memory_update_tokens: int = 5_000
    memory_update_tool_calls: int = 3
    memory_keep_min_tokens: int = 10_000
    memory_keep_min_text_messages: int = 5
    memory_keep_max_tokens: int = 40_000
    memory_section_tokens: int = 2_000
    memory_total_tokens: int = 12_000

    # Summaries
    user_messages_budget_tokens: int = 20_000
    #: Append the facts a summary left out (user messages, paths, failures, open items).
    facts_gate_enabled: bool = True
    #: End each summary with a line naming the `recall` tool (set by an agent that has it).
    recall_note: bool = False
    summary_max_output_tokens: int = 20_000
    #: Most tokens a summary (gated facts and condensed references included) may take; 0 = 10% of the window.
    summary_max_tokens: int = 0
    #: Most tokens all pinned messages of a session may take together; 0 = 5% of the window.
    pins_max_tokens: int = 0
    #: Pin a summarized user message that states a standing rule ("never push to main") at compaction.
    auto_pin_instructions: bool = False

    #: `watch`: seconds a Codex response may wait for its usage line before it is imported without it.
    watch_settle_seconds: float = 30.0
    #: `watch`: longest a burst of writes is gathered (ms) before its lines are imported.
    watch_debounce_ms: int = 200

    #: The machine sessions are recorded as captured on (`sessions --host`); empty: this host's name.
    host: str = ""

    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "Config":
        """Defaults, then `SESSIONSTORE_*` variables, then explicit keyword arguments."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "extra":
                continue
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                values[f.name] = _parse(f, raw)
        values.update(overrides)
        _warn_unknown(env)
        return cls(**values)

    def __post_init__(self) -> None:
        """Refuse values no setting can take (negative sizes, ratios outside (0, 1], absurd counts)."""
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            low, high = _bounds(f.name)
            if not (low <= value <= high) or (isinstance(value, float) and not math.isfinite(value)):
                raise ConfigError(
                    f"{ENV_PREFIX}{f.name.upper()}={value!r} is out of range: it must be between {low:g} and {high:g}"
                )
        if self.collapse_start_ratio > self.collapse_block_ratio:
            raise ConfigError(
                f"{ENV_PREFIX}COLLAPSE_START_RATIO ({self.collapse_start_ratio:g}) must not exceed "
                f"{ENV_PREFIX}COLLAPSE_BLOCK_RATIO ({self.collapse_block_ratio:g})"
            )

    def summary_budget(self, context_window: int) -> int:
        """Tokens a summary may take in a session with this window (`summary_max_tokens`, else 10%)."""
        return self.summary_max_tokens or max(1, context_window // 10)

    def pins_budget(self, context_window: int) -> int:
        """Tokens a session's pinned messages may take together (`pins_max_tokens`, else 5%)."""
        return self.pins_max_tokens or max(1, context_window // 20)

    def host_name(self) -> str:
        """The host new sessions record: `SESSIONSTORE_HOST`, else this machine's name."""
        import socket

        return (self.host.strip() or socket.gethostname() or "unknown")[:255]

    def replace(self, **changes: Any) -> "Config":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


#: The largest count or size a setting takes (2**53: exact as a float, and far inside a 64-bit column).
MAX_SETTING = 2**53
#: Variables read elsewhere (the database URL, the summarizer's model, the test and fault harnesses).
OTHER_VARIABLES = frozenset(
    {
        "DB_URL",
        "SUMMARY_MODEL",
        "TEST_PG_URL",
        "TEST_POLICY_BREAK",
        "REQUIRE_PG",
        "REQUIRE_TRANSCRIPTS",
        "REQUIRE_BROWSER",
        "FAULT",
        "TRANSCRIPTS",
        "CRASH_TRIALS",
        "SOAK_SECONDS",
    }
)
_warned: set[str] = set()


#: Settings that must be at least 1 (a window, an output or an index batch of nothing means nothing).
AT_LEAST_ONE = frozenset({"default_context_window", "max_output_tokens", "search_max_chars", "search_batch_chars"})


def _bounds(name: str) -> tuple[float, float]:
    """The range a numeric setting may take."""
    if name.endswith("_ratio"):
        return 0.01, 1.0
    return (1 if name in AT_LEAST_ONE else 0), MAX_SETTING


def _warn_unknown(env: Mapping[str, str]) -> None:
    """A `SESSIONSTORE_*` variable no setting reads is most likely a typo: say so once per name."""
    known = {f.name.upper() for f in fields(Config)} | OTHER_VARIABLES
    for key in env:
        if key.startswith(ENV_PREFIX) and key[len(ENV_PREFIX) :] not in known and key not in _warned:
            _warned.add(key)
            name = key[len(ENV_PREFIX) :]
            close = [k for k in sorted(known) if k.startswith(name + "_")][:1] or difflib.get_close_matches(
                name, sorted(known), n=1, cutoff=0.6
            )
            hint = f"; did you mean {ENV_PREFIX}{close[0]}?" if close else ""
            log.warning(
                "%s is not a sessionstore setting and is ignored "
                "(the settings are the fields of sessionstore.Config)%s",
                key,
                hint,
            )


def _parse(f: dataclasses.Field[Any], raw: str) -> Any:
    """Convert an environment string to the field's type, with a clear error."""
    default = f.default
    try:
        if isinstance(default, bool):
            lowered = raw.strip().lower()
            if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError(raw)
            return lowered in {"1", "true", "yes", "on"}
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value
        if isinstance(default, tuple):
            return tuple(part.strip() for part in raw.split(",") if part.strip())
        return raw
    except ValueError as exc:
        raise ConfigError(
            f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a valid {type(default).__name__}"
            f"{' (a finite number)' if isinstance(default, float) else ''}"
        ) from exc
