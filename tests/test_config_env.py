"""A bad `SESSIONSTORE_<FIELD>` value is a typed error and, on the command line, one line and exit 2.

`SESSIONSTORE_SNIP_ENABLED=maybe sessionstore prepare S` printed a ValueError
traceback (exit 1); `SESSIONSTORE_COLLAPSE_START_RATIO=nan` was taken and
later failed converting NaN to an integer.
"""

from __future__ import annotations

import pytest

from sessionstore import Config, ConfigError, SessionStoreError
from tests.support.cli import run_cli


@pytest.mark.parametrize("name,raw", [("SNIP_ENABLED", "maybe"), ("BUSY_TIMEOUT_MS", "abc"),
                                      ("COLLAPSE_START_RATIO", "nan"), ("MICROCOMPACT_IDLE_MINUTES", "inf")])
def test_a_bad_value_is_a_config_error(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=f"SESSIONSTORE_{name}") as info:
        Config.from_env({f"SESSIONSTORE_{name}": raw})
    assert isinstance(info.value, SessionStoreError) and isinstance(info.value, ValueError)


def test_good_values_still_parse() -> None:
    config = Config.from_env({"SESSIONSTORE_SNIP_ENABLED": "off", "SESSIONSTORE_COLLAPSE_START_RATIO": "0.8",
                              "SESSIONSTORE_BUSY_TIMEOUT_MS": "250"})
    assert (config.snip_enabled, config.collapse_start_ratio, config.busy_timeout_ms) == (False, 0.8, 250)


@pytest.mark.parametrize("name,raw", [("SNIP_ENABLED", "maybe"), ("COLLAPSE_START_RATIO", "nan")])
def test_the_cli_says_it_in_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                     sqlite_url: str, name: str, raw: str) -> None:
    monkeypatch.setenv(f"SESSIONSTORE_{name}", raw)
    result = run_cli(capsys, "sessions", "--db", sqlite_url)
    assert result.code == 2, result
    assert result.err.startswith(f"error: SESSIONSTORE_{name}=") and len(result.err.strip().splitlines()) == 1
