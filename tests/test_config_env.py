"""A bad `SESSIONSTORE_<FIELD>` value is a typed error and, on the command line, one line and exit 2.

`SESSIONSTORE_SNIP_ENABLED=maybe sessionstore prepare S` printed a ValueError
traceback (exit 1); `SESSIONSTORE_COLLAPSE_START_RATIO=nan` was taken and
later failed converting NaN to an integer.
"""

from __future__ import annotations

import pytest

from sessionstore import Config, ConfigError, SessionStoreError
from tests.support.cli import run_cli


@pytest.mark.parametrize(
    "name,raw",
    [
        ("SNIP_ENABLED", "maybe"),
        ("BUSY_TIMEOUT_MS", "abc"),
        ("COLLAPSE_START_RATIO", "nan"),
        ("MICROCOMPACT_IDLE_MINUTES", "inf"),
    ],
)
def test_a_bad_value_is_a_config_error(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"SESSIONSTORE_{name}") as info:
        Config.from_env({f"SESSIONSTORE_{name}": raw})
    assert isinstance(info.value, SessionStoreError) and isinstance(info.value, ValueError)


def test_good_values_still_parse() -> None:
    config = Config.from_env(
        {
            "SESSIONSTORE_SNIP_ENABLED": "off",
            "SESSIONSTORE_COLLAPSE_START_RATIO": "0.8",
            "SESSIONSTORE_BUSY_TIMEOUT_MS": "250",
        }
    )
    assert (config.snip_enabled, config.collapse_start_ratio, config.busy_timeout_ms) == (False, 0.8, 250)


@pytest.mark.parametrize("name,raw", [("SNIP_ENABLED", "maybe"), ("COLLAPSE_START_RATIO", "nan")])
def test_the_cli_says_it_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, sqlite_url: str, name: str, raw: str
) -> None:
    monkeypatch.setenv(f"SESSIONSTORE_{name}", raw)
    result = run_cli(capsys, "sessions", "--db", sqlite_url)
    assert result.code == 2, result
    assert result.err.startswith(f"error: SESSIONSTORE_{name}=") and len(result.err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "name,raw",
    [
        ("DEFAULT_CONTEXT_WINDOW", "-5"),
        ("BUSY_TIMEOUT_MS", "-1"),
        ("COLLAPSE_START_RATIO", "7"),
        ("MICROCOMPACT_KEEP_RECENT", str(2**60)),
        ("WATCH_SETTLE_SECONDS", "-0.5"),
        ("DEFAULT_CONTEXT_WINDOW", "0"),
    ],
)
def test_a_value_out_of_range_is_a_config_error(name: str, raw: str) -> None:
    """Parsed but impossible (a negative window, a ratio of 7) used to be taken and fail later, or never."""
    with pytest.raises(ConfigError, match=f"SESSIONSTORE_{name}={raw}.*out of range"):
        Config.from_env({f"SESSIONSTORE_{name}": raw})


def test_collapse_must_start_before_it_blocks() -> None:
    with pytest.raises(ConfigError, match="COLLAPSE_START_RATIO"):
        Config.from_env({"SESSIONSTORE_COLLAPSE_START_RATIO": "0.97", "SESSIONSTORE_COLLAPSE_BLOCK_RATIO": "0.95"})


def test_an_unknown_setting_is_named_in_a_warning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SESSIONSTORE_CONTEXT_WINDOW` (the setting is DEFAULT_CONTEXT_WINDOW) was ignored without a word."""
    from sessionstore.storage.engine import config as config_module

    monkeypatch.setattr(config_module, "_warned", set())  # each name is warned about once per process
    with caplog.at_level("WARNING", logger="sessionstore.config"):
        config = Config.from_env({"SESSIONSTORE_CONTEXT_WINDOW_TYPO": "5", "SESSIONSTORE_DB_URL": "sqlite://"})
    assert config == Config()
    warned = [r.getMessage() for r in caplog.records]
    assert any("SESSIONSTORE_CONTEXT_WINDOW_TYPO is not a sessionstore setting" in w for w in warned), warned
    assert not any("DB_URL" in w for w in warned)


@pytest.mark.parametrize(
    "typed, meant",
    [
        ("SESSIONSTORE_DB", "SESSIONSTORE_DB_URL"),
        ("SESSIONSTORE_TOOL_RESULT_MAX_CHAR", "SESSIONSTORE_TOOL_RESULT_MAX_CHARS"),
        ("SESSIONSTORE_XYZZY", None),
    ],
)
def test_the_warning_names_the_setting_meant(
    typed: str, meant: str | None, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user typed SESSIONSTORE_DB and only learned that it was ignored, not what to use instead."""
    from sessionstore.storage.engine import config as config_module

    monkeypatch.setattr(config_module, "_warned", set())
    with caplog.at_level("WARNING", logger="sessionstore.config"):
        Config.from_env({typed: "1"})
    warned = " ".join(r.getMessage() for r in caplog.records)
    if meant:
        assert f"did you mean {meant}?" in warned, warned
    else:
        assert "did you mean" not in warned and typed in warned
